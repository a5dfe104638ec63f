package bench

import (
	"math"
	"testing"
)

func TestFsyncFiguresFromBucketDeltas(t *testing.T) {
	// 100 fsyncs this run: 60 <= 500us, 39 more <= 1000us, 1 more <= 5000us.
	d := map[string]float64{
		"aof_uring_fsync_count":                100,
		"aof_uring_fsync_usec_sum":             70000,
		"aof_uring_fsync_usec_bucket_le_500":   60,
		"aof_uring_fsync_usec_bucket_le_1000":  99,
		"aof_uring_fsync_usec_bucket_le_2500":  99,
		"aof_uring_fsync_usec_bucket_le_5000":  100,
		"aof_uring_fsync_usec_bucket_le_inf":   100,
		"aof_uring_fsync_usec_bucket_le_bogus": 3,
	}
	f := fsyncFigures(d)
	if f == nil {
		t.Fatal("no figures")
	}
	if f.Count != 100 || f.AvgMs != 0.7 || f.P50Ms != 0.5 || f.P99Ms != 1 {
		t.Errorf("got %+v", *f)
	}
	d["aof_uring_fsync_usec_bucket_le_1000"] = 60
	d["aof_uring_fsync_usec_bucket_le_2500"] = 60
	d["aof_uring_fsync_usec_bucket_le_5000"] = 60
	if f := fsyncFigures(d); f.P99Ms != math.Inf(1) {
		t.Errorf("p99 beyond the last finite bucket: got %v", f.P99Ms)
	}
	if fsyncFigures(map[string]float64{"aof_delayed_fsync": 3}) != nil {
		t.Error("posix INFO produced uring fsync figures")
	}
}

func TestSummarizeRatiosAndBound(t *testing.T) {
	run := func(vol, mode, test string, rps, cpu float64) Run {
		return Run{Volume: vol, Mode: mode, Test: test, Tool: ToolResult{RPS: rps}, CPUPer1k: cpu}
	}
	rep := &Report{
		Options: Options{Requests: 1000, Clients: 50},
		Volumes: []*Volume{{Name: "loop", BoundOpsPS: 10000}},
		Runs: []Run{
			run("loop", "everysec", "set", 40000, 0.010),
			run("loop", "always", "set", 5000, 0.020),
			run("loop", "uring-durable", "set", 9000, 0.011),
			run("loop", "uring-durable", "set", 7000, 0.013), // median of 7000, 9000 and 8000
			run("loop", "uring-durable", "set", 8000, 0.012),
			{Volume: "loop", Mode: "uring-durable", Test: "set", Error: "boom"},
		},
	}
	rows := summarize(rep)
	var ud *Row
	for i := range rows {
		if rows[i].Mode == "uring-durable" {
			ud = &rows[i]
		}
	}
	if ud == nil {
		t.Fatal("no uring-durable row")
	}
	if ud.Runs != 4 || ud.Errors != 1 || ud.RPS != 8000 {
		t.Errorf("runs %d errors %d rps %v", ud.Runs, ud.Errors, ud.RPS)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(ud.VsEverysec, 0.2) || !near(ud.VsAlways, 1.6) || !near(ud.CPUVsEverysec, 1.2) || !near(ud.OfBound, 0.8) {
		t.Errorf("ratios: %+v", *ud)
	}
	for _, r := range rows {
		if r.Mode == "everysec" && r.OfBound != 0 {
			t.Error("C/L fraction reported for a non-durable mode")
		}
	}
}

func TestTargets(t *testing.T) {
	rows := []Row{
		{Volume: "loop", Mode: "everysec", Test: "set", Runs: 1, RPS: 100, CPUPer1k: 0.010, RSSMiB: 10},
		{Volume: "loop", Mode: "always", Test: "set", Runs: 1, RPS: 20},
		{Volume: "loop", Mode: "uring-fast", Test: "set", Runs: 1, RPS: 105, CPUPer1k: 0.012, RSSMiB: 13},
		{Volume: "loop", Mode: "uring-durable", Test: "set", Runs: 1, RPS: 40, OfBound: 0.9, RSSMiB: 11},
		{Volume: "loop", Mode: "none", Test: Mixed, Runs: 1, GetP99Ms: 2},
		{Volume: "loop", Mode: "uring-durable", Test: Mixed, Runs: 1, GetP99Ms: 4},
		{Volume: "root", Mode: "uring-fast", Test: "set", Runs: 2, Errors: 2, RPS: 1},
	}
	got := map[string]bool{}
	for _, tg := range targets(rows) {
		if tg.Volume != "loop" {
			t.Errorf("target from a volume without comparable rows: %+v", tg)
		}
		got[tg.Test+" "+tg.Goal] = tg.Met
	}
	want := map[string]bool{
		"set ops/s uring-fast / everysec >= 1.0":    true,
		"set CPU/op uring-fast / everysec <= 1.1":   false, // 1.2
		"set ops/s uring-durable / always >= 1.5":   true,  // 2.0
		"set ops/s uring-durable / (C/L) >= 0.8":    true,
		"set RSS MiB uring-durable - everysec <= 2": true,
		"set RSS MiB uring-fast - everysec <= 2":    false, // 3 MiB
		"mixed GET p99 uring-durable / none <= 1.5": false, // 2.0
	}
	if len(got) != len(want) {
		t.Errorf("got %d targets, want %d: %v", len(got), len(want), got)
	}
	for g, met := range want {
		if m, ok := got[g]; !ok || m != met {
			t.Errorf("%s: met=%v present=%v, want met=%v", g, m, ok, met)
		}
	}
}
