package benchreport

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

func TestTable(t *testing.T) {
	results := []v1alpha1.BenchmarkResult{
		{Target: "a", Mode: "aof-always", Engine: "posix", Command: "set", OpsPerSecond: 1000, CPUMicrosPerKop: 20000, P99Micros: 4000, FsyncP99Micros: 1000},
		{Target: "a", Mode: "aof-always", Engine: "posix", Command: "incr", OpsPerSecond: 3000, CPUMicrosPerKop: 10000, P99Micros: 2000, FsyncP99Micros: 500},
		// everysec's background fsync ran during set only: its mean is set's.
		{Target: "e", Mode: "aof-everysec", Engine: "posix", Command: "set", OpsPerSecond: 8000, CPUMicrosPerKop: 9000, P99Micros: 1000, FsyncP99Micros: 250},
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
		{"aof-always", "2000", "0.25x", "1.00x", "15.0", "3.00", "0.75", "-", "-"},
		{"aof-everysec", "8000", "1.00x", "4.00x", "9.0", "1.00", "0.25"},
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

// TestTableReplicated: targets with replicas get the replica columns, and one
// whose writes wait for a replica is compared with the same mode without.
func TestTableReplicated(t *testing.T) {
	results := []v1alpha1.BenchmarkResult{
		{Target: "k0", Mode: "uring-durable", Engine: "uring", Replicas: 2, Command: "set", OpsPerSecond: 4000, P99Micros: 3000},
		{Target: "k1", Mode: "uring-durable", Engine: "uring", Replicas: 2, AckReplicas: 1, Command: "set", OpsPerSecond: 3000, P99Micros: 5000},
		{Target: "solo", Mode: "uring-durable", Engine: "uring", Command: "set", OpsPerSecond: 5000, P99Micros: 2000},
	}
	var out bytes.Buffer
	if err := Table(&out, results, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "ackReplicas") {
		t.Fatalf("want a header with the replica columns and 3 rows:\n%s", out.String())
	}
	for i, want := range []struct{ target, ops, p99, replicaColumns string }{
		{"k0", "4000", "3.00", "2 0 -"},
		{"k1", "3000", "5.00", "2 1 0.75x"},
		{"solo", "5000", "2.00", "0 0 -"},
	} {
		fields := strings.Fields(lines[i+1])
		if fields[0] != want.target || !slices.Contains(fields, want.ops) || !slices.Contains(fields, want.p99) ||
			strings.Join(fields[len(fields)-3:], " ") != want.replicaColumns {
			t.Errorf("row %d %q: want %+v", i, lines[i+1], want)
		}
	}
	out.Reset()
	if err := Table(&out, results[2:], nil); err != nil || strings.Contains(out.String(), "ackReplicas") {
		t.Errorf("a benchmark without replicas has no replica columns: %v\n%s", err, out.String())
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

// TestTableTwoStorages: targets on two storages get a storage column, and
// each is compared with the everysec and always targets of its own storage.
func TestTableTwoStorages(t *testing.T) {
	results := []v1alpha1.BenchmarkResult{
		{Target: "always", Mode: "aof-always", Storage: "local-nvme", Command: "set", OpsPerSecond: 4000},
		{Target: "durable", Mode: "uring-durable", Storage: "local-nvme", Command: "set", OpsPerSecond: 5000},
		{Target: "always-gp3", Mode: "aof-always", Storage: "uring-gp3-like", Command: "set", OpsPerSecond: 1000},
		{Target: "durable-gp3", Mode: "uring-durable", Storage: "uring-gp3-like", Command: "set", OpsPerSecond: 1600},
	}
	var out bytes.Buffer
	if err := Table(&out, results, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "storage") {
		t.Fatalf("want a header with a storage column and 4 rows:\n%s", out.String())
	}
	for i, want := range []struct{ target, storage, vsAlways string }{
		{"always", "local-nvme", "1.00x"},
		{"durable", "local-nvme", "1.25x"},
		{"always-gp3", "uring-gp3-like", "1.00x"},
		{"durable-gp3", "uring-gp3-like", "1.60x"},
	} {
		fields := strings.Fields(lines[i+1])
		// target mode engine storage ops vs-everysec vs-always ...
		if fields[0] != want.target || fields[3] != want.storage || fields[6] != want.vsAlways {
			t.Errorf("row %d %q: want %+v", i, lines[i+1], want)
		}
	}
	out.Reset()
	if err := Table(&out, results[:2], nil); err != nil || strings.Contains(out.String(), "storage") {
		t.Errorf("targets on one storage have no storage column: %v\n%s", err, out.String())
	}
}
