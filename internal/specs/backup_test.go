package specs_test

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

// TestBackupJobGolden renders the Job of a backup of a replicated TLS
// instance with every destination option set and compares it with
// testdata/backup.job.yaml.
func TestBackupJobGolden(t *testing.T) {
	rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Replicas: 3,
		TLS: &v1alpha1.TLSSpec{SecretName: "cache-tls", ClientAuth: true},
		Backup: &v1alpha1.BackupSpec{Destination: v1alpha1.BackupDestination{S3: v1alpha1.S3Destination{
			Endpoint: "https://s3.storage.svc:8333", Bucket: "backups", Path: "team/cache", Region: "eu-west-1",
			Credentials:          v1alpha1.S3Credentials{SecretName: "s3", AccessKeyIDKey: "id", SecretAccessKeyKey: "secret"},
			CASecret:             &v1alpha1.CASecretRef{Name: "store-ca", Key: "ca.pem"},
			ServerSideEncryption: v1alpha1.SSES3,
		}}, Compression: v1alpha1.CompressionZstd},
	})
	b := &v1alpha1.RedisBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: rp.Namespace, UID: "b-uid"},
		Spec:       v1alpha1.RedisBackupSpec{RedisPersistence: v1alpha1.LocalObjectReference{Name: rp.Name}},
	}
	job := specs.BackupJob(b, rp, "cache-1", specs.BackupOptions{Image: "uring-redis-operator:test",
		ImagePull: specs.ImagePull{Policy: corev1.PullIfNotPresent}})
	out, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	compareGolden(t, filepath.Join("testdata", "backup.job.yaml"), out)
	if got, want := specs.BackupLocation(rp, b), "s3://backups/team/cache/backups/nightly/dump.rdb.zst"; got != want {
		t.Errorf("location %q, want %q", got, want)
	}
	rp.Spec.Backup.Destination.S3.Path, rp.Spec.Backup.Compression = "", ""
	if got, want := specs.BackupLocation(rp, b), "s3://backups/apps/cache/backups/nightly/dump.rdb"; got != want {
		t.Errorf("location without a path %q, want %q", got, want)
	}
}
