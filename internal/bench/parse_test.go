package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestParseTool(t *testing.T) {
	out, err := os.ReadFile("testdata/valkey-benchmark-set.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseTool(string(out))
	if err != nil {
		t.Fatal(err)
	}
	// p99.9 is the first distribution line at or above 99.9% (99.902% <= 2.447 ms).
	want := ToolResult{OpsPerSecond: 26315.79, P50Micros: 95, P99Micros: 743, P999Micros: 2447}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}

	for desc, broken := range map[string]string{
		"no summary":      strings.Split(string(out), "Summary:")[0],
		"no distribution": strings.Replace(string(out), "Latency by percentile distribution", "", 1),
		"error only":      "Could not connect to Valkey at 127.0.0.1:1: Connection refused\n",
	} {
		if _, err := ParseTool(broken); err == nil {
			t.Errorf("%s: parsed without error", desc)
		}
	}
}

// uringInfo is INFO cpu, memory and persistence of a uring server, as
// go-redis's InfoMap returns it.
func uringInfo() map[string]map[string]string {
	return map[string]map[string]string{
		"CPU":    {"used_cpu_sys": "1.500000", "used_cpu_user": "2.250000"},
		"Memory": {"used_memory_rss": "8388608"},
		"Persistence": {
			"aof_enabled":                         "1",
			"aof_engine":                          "uring",
			"aof_uring_fsync_count":               "10",
			"aof_uring_fsync_usec_bucket_le_50":   "0",
			"aof_uring_fsync_usec_bucket_le_100":  "0",
			"aof_uring_fsync_usec_bucket_le_250":  "1",
			"aof_uring_fsync_usec_bucket_le_500":  "5",
			"aof_uring_fsync_usec_bucket_le_1000": "9",
			"aof_uring_fsync_usec_bucket_le_2500": "10",
			"aof_uring_fsync_usec_bucket_le_inf":  "10",
		},
	}
}

func TestSampleFromInfo(t *testing.T) {
	s, err := SampleFromInfo(uringInfo())
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUSeconds != 3.75 || s.RSSBytes != 8<<20 || s.Engine != "uring" {
		t.Errorf("got %+v", s)
	}
	bounds := []int64{}
	for _, b := range s.FsyncBuckets {
		bounds = append(bounds, b.LeMicros)
	}
	if got := fmt.Sprint(bounds); got != "[50 100 250 500 1000 2500 -1]" {
		t.Errorf("bucket bounds in order %s", got)
	}
	if _, err := SampleFromInfo(map[string]map[string]string{"Persistence": {"aof_enabled": "1"}}); err == nil {
		t.Error("a reply without INFO cpu parsed")
	}
	posix, err := SampleFromInfo(map[string]map[string]string{
		"CPU":         {"used_cpu_sys": "0", "used_cpu_user": "0"},
		"Persistence": {"aof_enabled": "0", "aof_engine": "posix"},
	})
	if err != nil || posix.Engine != "" {
		t.Errorf("without an append-only file the engine is %q (%v), want empty", posix.Engine, err)
	}
}

func TestFsyncDelta(t *testing.T) {
	before, _ := SampleFromInfo(uringInfo())
	later := uringInfo()
	for bound, count := range map[string]string{"500": "55", "1000": "108", "2500": "109", "inf": "110"} {
		later["Persistence"]["aof_uring_fsync_usec_bucket_le_"+bound] = count
	}
	after, _ := SampleFromInfo(later)
	// 100 new fsyncs: 50 in (250,500], 49 in (500,1000], 0 in (1000,2500], 1 above 2500.
	count, p50, p99 := FsyncDelta(before, after)
	if count != 100 || p50 != 500 || p99 != 1000 {
		t.Errorf("count %d p50 %d p99 %d, want 100 500 1000", count, p50, p99)
	}
	if c, _, _ := FsyncDelta(before, before); c != 0 {
		t.Errorf("no new fsyncs counted %d", c)
	}
	if c, _, _ := FsyncDelta(Sample{}, Sample{}); c != 0 {
		t.Errorf("the posix engine (no buckets) counted %d fsyncs", c)
	}
}
