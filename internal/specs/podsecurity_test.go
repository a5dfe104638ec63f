package specs_test

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestEveryPodPassesRestricted: every pod the operator creates — the
// server of each mode (uring under its Localhost seccomp profile), the
// replicated servers and their Sentinels, the volume probe and the benchmark
// runner, as their golden files hold them — passes the Pod Security
// `restricted` level, judged by the Pod Security admission library the API
// server runs. So a namespace of RedisPersistences may enforce `restricted`.
func TestEveryPodPassesRestricted(t *testing.T) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		t.Fatal(err)
	}
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pods := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		reader := yaml.NewYAMLReader(bufio.NewReader(f))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var obj struct {
				Kind string `json:"kind"`
				Spec struct {
					Template *corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := sigsyaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if obj.Spec.Template == nil {
				continue
			}
			pods++
			result := policy.AggregateCheckResults(evaluator.EvaluatePod(restricted, &obj.Spec.Template.ObjectMeta, &obj.Spec.Template.Spec))
			if !result.Allowed {
				t.Errorf("%s: a %s whose pods do not pass restricted: %s", file, obj.Kind, result.ForbiddenDetail())
			}
		}
		_ = f.Close()
	}
	// One StatefulSet per mode file, the replicated servers and Sentinels, two Jobs.
	if pods < 14 {
		t.Fatalf("found %d pod templates in testdata/: the golden files moved?", pods)
	}
}
