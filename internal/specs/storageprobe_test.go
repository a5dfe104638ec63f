package specs_test

import (
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

func TestStorageProbeJobGolden(t *testing.T) {
	rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring,
		Storage: &v1alpha1.StorageSpec{StorageClassName: "local", ProbeInterval: &metav1.Duration{Duration: time.Hour}}})
	render := func() []byte {
		b, err := yaml.Marshal(specs.StorageProbeJob(rp, specstest.Options, "redis-uring:test", "node-a"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := render()
	if second := render(); string(first) != string(second) {
		t.Fatal("two renders of the same storage probe Job differ")
	}
	compareGolden(t, filepath.Join("testdata", "storage-probe.job.yaml"), first)
}
