package bench

import (
	"fmt"
	"strings"
	"testing"
)

// valkey-benchmark prints milliseconds with three decimals; results are in
// whole microseconds (the set-c5 capture's p50, p99 and p99.9).
func TestMillisToMicros(t *testing.T) {
	for ms, want := range map[float64]int64{0.095: 95, 0.743: 743, 2.447: 2447} {
		if got := millisToMicros(ms); got != want {
			t.Errorf("%v ms: got %d µs, want %d", ms, got, want)
		}
	}
}

// Cumulative fsync buckets as INFO reports them, by bound. tenFsyncs: 1 in
// (100,250], 4 in (250,500], 4 in (500,1000], 1 in (1000,2500].
var (
	tenFsyncs = map[string]string{"50": "0", "100": "0", "250": "1", "500": "5", "1000": "9", "2500": "10", "inf": "10"}
	noFsyncs  = map[string]string{"50": "0", "100": "0", "250": "0", "500": "0", "1000": "0", "2500": "0", "inf": "0"}
)

// info is INFO cpu, memory and persistence of a server running engine with
// appendfsync policy, as go-redis's InfoMap returns it; histograms are its
// fsync histograms by prefix (aof_fsync, aof_uring_fsync).
func info(engine, policy string, histograms map[string]map[string]string) map[string]map[string]string {
	persistence := map[string]string{"aof_enabled": "1", "aof_engine": engine, "appendfsync": policy}
	for prefix, buckets := range histograms {
		for bound, count := range buckets {
			persistence[prefix+"_usec_bucket_le_"+bound] = count
		}
		persistence[prefix+"_count"] = buckets["inf"]
	}
	return map[string]map[string]string{
		"CPU":         {"used_cpu_sys": "1.500000", "used_cpu_user": "2.250000"},
		"Memory":      {"used_memory_rss": "8388608"},
		"Persistence": persistence,
	}
}

// uringInfo is a uring server's: every fdatasync of the AOF in aof_fsync_*,
// the engine's own in aof_uring_fsync_*.
func uringInfo() map[string]map[string]string {
	return info("uring", "always", map[string]map[string]string{"aof_fsync": tenFsyncs, "aof_uring_fsync": tenFsyncs})
}

// posixInfo is a posix server's: its fdatasyncs (inline with always, the
// background job's with everysec) in aof_fsync_*, and the io_uring engine's
// fields, which it prints too, at zero.
func posixInfo(policy string) map[string]map[string]string {
	return info("posix", policy, map[string]map[string]string{"aof_fsync": tenFsyncs, "aof_uring_fsync": noFsyncs})
}

func TestSampleFromInfo(t *testing.T) {
	for desc, tc := range map[string]struct {
		info   map[string]map[string]string
		engine string
	}{
		"uring":          {uringInfo(), "uring"},
		"posix always":   {posixInfo("always"), "posix"},
		"posix everysec": {posixInfo("everysec"), "posix"},
		// A server older than aof_fsync_*: only the io_uring engine reported fsyncs.
		"uring before aof_fsync_*": {info("uring", "always", map[string]map[string]string{"aof_uring_fsync": tenFsyncs}), "uring"},
	} {
		s, err := SampleFromInfo(tc.info)
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		if s.CPUSeconds != 3.75 || s.RSSBytes != 8<<20 || s.Engine != tc.engine {
			t.Errorf("%s: got %+v", desc, s)
		}
		buckets := []string{}
		for _, b := range s.FsyncBuckets {
			buckets = append(buckets, fmt.Sprintf("%d:%d", b.LeMicros, b.Count))
		}
		if got := strings.Join(buckets, " "); got != "50:0 100:0 250:1 500:5 1000:9 2500:10 -1:10" {
			t.Errorf("%s: buckets in order %s", desc, got)
		}
	}
	if _, err := SampleFromInfo(map[string]map[string]string{"Persistence": {"aof_enabled": "1"}}); err == nil {
		t.Error("a reply without INFO cpu parsed")
	}
	broken := posixInfo("always")
	broken["Persistence"]["aof_fsync_usec_bucket_le_500"] = "many"
	if _, err := SampleFromInfo(broken); err == nil {
		t.Error("a bucket that is not a count parsed")
	}
	off, err := SampleFromInfo(map[string]map[string]string{
		"CPU":         {"used_cpu_sys": "0", "used_cpu_user": "0"},
		"Persistence": {"aof_enabled": "0", "aof_engine": "posix"},
	})
	if err != nil || off.Engine != "" || len(off.FsyncBuckets) != 0 {
		t.Errorf("without an append-only file: engine %q, %d fsync buckets (%v), want neither", off.Engine, len(off.FsyncBuckets), err)
	}
}

func TestFsyncDelta(t *testing.T) {
	// 100 new fsyncs: 50 in (250,500], 49 in (500,1000], 0 in (1000,2500], 1 above 2500.
	later := map[string]string{"500": "55", "1000": "108", "2500": "109", "inf": "110"}
	for desc, tc := range map[string]struct {
		info   func() map[string]map[string]string
		prefix string // of the fields the server moves
	}{
		"uring":          {uringInfo, "aof_fsync"},
		"posix always":   {func() map[string]map[string]string { return posixInfo("always") }, "aof_fsync"},
		"posix everysec": {func() map[string]map[string]string { return posixInfo("everysec") }, "aof_fsync"},
		"uring before aof_fsync_*": {func() map[string]map[string]string {
			return info("uring", "always", map[string]map[string]string{"aof_uring_fsync": tenFsyncs})
		}, "aof_uring_fsync"},
	} {
		before, _ := SampleFromInfo(tc.info())
		moved := tc.info()
		for bound, count := range later {
			moved["Persistence"][tc.prefix+"_usec_bucket_le_"+bound] = count
		}
		after, _ := SampleFromInfo(moved)
		count, p50, p99 := FsyncDelta(before, after)
		if count != 100 || p50 != 500 || p99 != 1000 {
			t.Errorf("%s: count %d p50 %d p99 %d, want 100 500 1000", desc, count, p50, p99)
		}
		if c, _, _ := FsyncDelta(before, before); c != 0 {
			t.Errorf("%s: no new fsyncs counted %d", desc, c)
		}
	}
	if c, _, _ := FsyncDelta(Sample{}, Sample{}); c != 0 {
		t.Errorf("a server without fsync buckets counted %d fsyncs", c)
	}
}
