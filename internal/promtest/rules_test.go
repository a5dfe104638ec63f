package promtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

var rulesFile = filepath.Join(testenv.RepoRoot(), "charts", "uring-redis-operator", "files", "prometheus-rules.yaml")

// TestRulesCheck is `promtool check rules` on the chart's rule groups.
func TestRulesCheck(t *testing.T) {
	out, err := exec.Command(Bin(t, "promtool"), "check", "rules", rulesFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS: 23 rules found") {
		t.Errorf("promtool check rules:\n%s", out)
	}
}

// TestRulesFire is `promtool test rules`: every alert fires on the series
// that should raise it, with the labels and text an operator reads.
func TestRulesFire(t *testing.T) {
	spec, err := os.ReadFile("testdata/rules-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules-test.yaml")
	spec = append([]byte("rule_files: ["+rulesFile+"]\n"), spec...)
	if err := os.WriteFile(path, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(Bin(t, "promtool"), "test", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
