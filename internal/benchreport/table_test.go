package benchreport

import (
	"bytes"
	"strings"
	"testing"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

func TestTable(t *testing.T) {
	results := []v1alpha1.BenchmarkResult{
		{Target: "a", Mode: "aof-always", Engine: "posix", Command: "set", OpsPerSecond: 1000, CPUMicrosPerKop: 20000, P99Micros: 4000},
		{Target: "a", Mode: "aof-always", Engine: "posix", Command: "incr", OpsPerSecond: 3000, CPUMicrosPerKop: 10000, P99Micros: 2000},
		{Target: "e", Mode: "aof-everysec", Engine: "posix", Command: "set", OpsPerSecond: 8000, CPUMicrosPerKop: 9000, P99Micros: 1000},
		{Target: "e", Mode: "aof-everysec", Engine: "posix", Command: "incr", OpsPerSecond: 8000, CPUMicrosPerKop: 9000, P99Micros: 1000},
		{Target: "d", Mode: "uring-durable", Engine: "uring", Command: "set", OpsPerSecond: 4000, CPUMicrosPerKop: 15000, P99Micros: 3000, FsyncP99Micros: 2500},
		{Target: "d", Mode: "uring-durable", Engine: "uring", Command: "incr", OpsPerSecond: 2000, CPUMicrosPerKop: 15000, P99Micros: 3000, FsyncP99Micros: 2500},
		{Target: "d", Mode: "uring-durable", Engine: "uring", Command: "get-during-set", OpsPerSecond: 9000, P99Micros: 700},
	}
	crashes := []v1alpha1.CrashCheckResult{{Target: "d", Mode: "uring-durable", AcknowledgedKeys: 5000, LostKeys: 0, Durable: true}}
	var out bytes.Buffer
	if err := Table(&out, results, crashes); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 rows:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"aof-always", "2000", "0.25x", "1.00x", "15.0", "3.00", "-", "-", "-"},
		{"aof-everysec", "8000", "1.00x", "4.00x", "9.0", "1.00"},
		{"uring-durable", "uring", "3000", "0.38x", "1.50x", "15.0", "3.00", "2.50", "0.70", "0/5000"},
	} {
		fields := strings.Fields(lines[i+1])
		for _, w := range want {
			found := false
			for _, f := range fields {
				found = found || f == w
			}
			if !found {
				t.Errorf("row %d %q lacks %q", i, lines[i+1], w)
			}
		}
	}
}

func TestTableWithoutBaselines(t *testing.T) {
	var out bytes.Buffer
	err := Table(&out, []v1alpha1.BenchmarkResult{{Target: "f", Mode: "uring-fast", Command: "set", OpsPerSecond: 5}}, nil)
	if err != nil || strings.Count(out.String(), " - ") < 2 {
		t.Errorf("ratios without an everysec or always target must read '-': %v\n%s", err, out.String())
	}
	if err := Table(&out, []v1alpha1.BenchmarkResult{{Target: "g", Mode: "none", Command: "get"}}, nil); err == nil {
		t.Error("a table without write results is an error")
	}
}
