package bench

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/internal/benchparse"
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
		t.Error("an INFO without fsync fields produced fsync figures")
	}
	// This build's aof_fsync_* (every engine) wins over aof_uring_fsync_*:
	// a posix run has the former only, an io_uring run both.
	posix := map[string]float64{"aof_uring_fsync_count": 0, "aof_fsync_count": 10, "aof_fsync_usec_sum": 20000,
		"aof_fsync_usec_bucket_le_2500": 10, "aof_fsync_usec_bucket_le_inf": 10}
	if f := fsyncFigures(posix); f == nil || f.Count != 10 || f.AvgMs != 2 || f.P99Ms != 2.5 {
		t.Errorf("posix figures: %+v", f)
	}
}

func TestSummarizeRatiosAndBound(t *testing.T) {
	run := func(vol, mode, test string, rps, cpu float64) Run {
		return Run{Volume: vol, Mode: mode, Test: test, Tool: benchparse.Report{OpsPerSecond: rps}, CPUPer1k: cpu}
	}
	rep := &Report{
		Options: testOptions(),
		Volumes: []*Volume{{Name: "loop", LMs: 5}}, // C/L = 50 / 5 ms = 10000 ops/s
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
	if !near(ud.VsEverysec, 0.2) || !near(ud.VsAlways, 1.6) || !near(ud.CPUVsEverysec, 1.2) ||
		!near(ud.CPUVsAlways, 0.6) || !near(ud.BoundOpsPS, 10000) || !near(ud.OfBound, 0.8) {
		t.Errorf("ratios: %+v", *ud)
	}
	for _, r := range rows {
		if r.Mode == "everysec" && r.OfBound != 0 {
			t.Error("C/L fraction reported for a non-durable mode")
		}
	}
}

func TestSummarizeSideLoadAndScaledRequests(t *testing.T) {
	o := testOptions()
	var err error
	if o.Workloads, err = ParseWorkloads([]string{ReadHeavy, "set-c1"}, o); err != nil {
		t.Fatal(err)
	}
	side := func(rps, p99 float64, count int) *SideStats {
		return &SideStats{Op: SideSet, Count: count, RPS: rps, P99Ms: p99}
	}
	run := func(mode, test string, rps float64, s *SideStats, fsyncs float64) Run {
		return Run{Volume: "loop", Mode: mode, Test: test, Tool: benchparse.Report{OpsPerSecond: rps}, Side: s,
			Fsync: &FsyncFigures{Count: fsyncs}, DevFlushes: fsyncs}
	}
	rep := &Report{Options: o, Volumes: []*Volume{{Name: "loop", LMs: 2}}, Runs: []Run{
		run("always", ReadHeavy, 3000, side(500, 40, 1000), 1000),
		run("everysec", ReadHeavy, 9000, side(4000, 4, 8000), 1),
		run("uring-durable", ReadHeavy, 9000, side(1000, 9, 1000), 100),
		run("uring-durable", ReadHeavy, 12000, side(2000, 8, 3000), 200), // medians of two: 10500, 1500, 8.5
		run("none", ReadHeavy, 10000, side(5000, 2, 9000), 0),
		run("uring-durable", "set-c1", 400, nil, 50), // 50 requests: 1000 / 20
	}}
	rows := summarize(rep)
	find := func(mode, test string) Row {
		for _, r := range rows {
			if r.Mode == mode && r.Test == test {
				return r
			}
		}
		t.Fatalf("no row %s/%s", mode, test)
		return Row{}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	ud := find("uring-durable", ReadHeavy)
	if ud.Clients != 50 || ud.SideOp != SideSet || ud.SideClients != 8 || ud.Requests != 1000 {
		t.Errorf("workload shape: %+v", ud)
	}
	if !near(ud.RPS, 10500) || !near(ud.SideRPS, 1500) || !near(ud.SideP99Ms, 8.5) {
		t.Errorf("medians: rps %v side %v side p99 %v", ud.RPS, ud.SideRPS, ud.SideP99Ms)
	}
	if !near(ud.VsAlways, 3.5) || !near(ud.SideVsAlways, 3) || !near(ud.SideVsEverysec, 0.375) || !near(ud.SideP99VsNone, 4.25) {
		t.Errorf("ratios: %+v", ud)
	}
	// fsyncs per 1k requests count the side load's: 100/2 and 200/4.
	if !near(ud.FsyncsPer1k, 50) || !near(ud.DevFlushesPer1k, 50) {
		t.Errorf("per 1k: fsyncs %v flushes %v", ud.FsyncsPer1k, ud.DevFlushesPer1k)
	}
	if ud.BoundOpsPS != 0 || ud.OfBound != 0 {
		t.Errorf("C/L bound for a GET load: %+v", ud)
	}
	c1 := find("uring-durable", "set-c1")
	if c1.Clients != 1 || c1.Requests != 50 || !near(c1.FsyncsPer1k, 1000) || !near(c1.BoundOpsPS, 500) || !near(c1.OfBound, 0.8) {
		t.Errorf("set-c1: %+v", c1)
	}
}

func TestParseWorkload(t *testing.T) {
	o := testOptions()
	for _, tc := range []struct {
		name string
		want Workload
	}{
		{"set", Workload{Name: "set", Test: "set", Clients: 50, Pipeline: 1, Requests: 1000, Keyspace: 100}},
		{"hset-c200", Workload{Name: "hset-c200", Test: "hset", Clients: 200, Pipeline: 1, Requests: 1000, Keyspace: 100}},
		{"set-c8", Workload{Name: "set-c8", Test: "set", Clients: 8, Pipeline: 1, Requests: 160, Keyspace: 100}},
		{"set-c1", Workload{Name: "set-c1", Test: "set", Clients: 1, Pipeline: 1, Requests: 50, Keyspace: 100}},
		{"set-p16", Workload{Name: "set-p16", Test: "set", Clients: 50, Pipeline: 16, Requests: 4000, Keyspace: 100}},
		{"set-c1-p20000-n20000", Workload{Name: "set-c1-p20000-n20000", Test: "set", Clients: 1, Pipeline: 20000,
			Requests: 20000, Keyspace: 100}},
		{Mixed, Workload{Name: Mixed, Test: "set", Clients: 50, Pipeline: 1, Requests: 1000, Keyspace: 100,
			Side: SideGet, SideClients: 5}},
		{ReadHeavy, Workload{Name: ReadHeavy, Test: "get", Clients: 50, Pipeline: 1, Requests: 1000, Keyspace: 10,
			Side: SideSet, SideClients: 8}},
		{"get-c200-p4-d8192-r1000", Workload{Name: "get-c200-p4-d8192-r1000", Test: "get", Clients: 200, Pipeline: 4,
			Requests: 4000, Keyspace: 1000, ValueSize: 8192}},
	} {
		got, err := ParseWorkload(tc.name, o)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"set-c", "set-c0", "set-x5", "-c5", "set-cfoo", "get-d0", "get-r-1"} {
		if _, err := ParseWorkload(bad, o); err == nil {
			t.Errorf("%s: parsed without error", bad)
		}
	}
	if w, _ := ParseWorkload("set", o); !w.plain() {
		t.Error("set is not plain")
	}
	if w, _ := ParseWorkload("set-c8", o); w.plain() {
		t.Error("set-c8 is plain")
	}
}

func TestTargetsIssue3(t *testing.T) {
	rows := []Row{
		{Volume: "loop", Mode: "everysec", Test: "set", Runs: 1, RPS: 100, CPUPer1k: 0.010, RSSMiB: 10},
		{Volume: "loop", Mode: "always", Test: "set", Runs: 1, RPS: 20},
		{Volume: "loop", Mode: "uring-fast", Test: "set", Runs: 1, RPS: 105, CPUPer1k: 0.012, RSSMiB: 13},
		{Volume: "loop", Mode: "uring-durable", Test: "set", Runs: 1, RPS: 40, BoundOpsPS: 44.4, RSSMiB: 11},
		{Volume: "loop", Mode: "none", Test: Mixed, Runs: 1, SideP99Ms: 2},
		{Volume: "loop", Mode: "uring-durable", Test: Mixed, Runs: 1, SideP99Ms: 4},
		{Volume: "root", Mode: "uring-fast", Test: "set", Runs: 2, Errors: 2, RPS: 1},
	}
	got := map[string]bool{}
	for _, tg := range targets(&Report{Options: testOptions(), Rows: rows}) {
		if tg.Volume != "loop" {
			t.Errorf("target from a volume without comparable rows: %+v", tg)
		}
		if tg.Issue != 3 {
			continue
		}
		got[tg.Test+" "+tg.Goal] = tg.Met
	}
	want := map[string]bool{
		"set ops/s uring-fast / everysec >= 1.0":    true,
		"set CPU/op uring-fast / everysec <= 1.1":   false, // 1.2
		"set ops/s uring-durable / always >= 1.5":   true,  // 2.0
		"set ops/s uring-durable / (C/L) >= 0.8":    true,  // 0.9
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

func TestTargetsIssue12(t *testing.T) {
	row := func(vol, mode, test string, rps, cpu float64) Row {
		return Row{Volume: vol, Mode: mode, Test: test, Runs: 3, RPS: rps, CPUPer1k: cpu}
	}
	rows := []Row{
		row("loop", "always", "set", 5000, 0.020),
		row("loop", "uring-durable", "set", 8000, 0.025), // 1.6x, CPU 1.25x
		row("loop", "everysec", "set", 20000, 0.010),
		row("loop", "uring-fast", "set", 21000, 0.011), // 1.05x at 1.1x the CPU: both met
		row("root", "always", "set", 10000, 0.020),
		row("root", "uring-durable", "set", 9000, 0.020), // 0.9x
		row("loop", "always", "set-c1-p20000-n20000", 100000, 0),
		row("loop", "uring-durable", "set-c1-p20000-n20000", 79000, 0), // 0.79x
		row("loop", "always", "set-p16", 50000, 0),
		row("loop", "uring-durable", "set-p16", 50000, 0), // 1.0x
		row("loop", "always", "set-c8", 1000, 0),
		row("loop", "uring-durable", "set-c8", 100, 0), // no goal for the sweep
		row("loop", "always", ReadHeavy, 3000, 0),
		row("loop", "everysec", ReadHeavy, 10000, 0),
		row("loop", "uring-durable", ReadHeavy, 9000, 0), // 3.0x always, 0.9x everysec
	}
	type res struct {
		value float64
		met   bool
	}
	got := map[string]res{}
	for _, tg := range targets(&Report{Options: testOptions(), Rows: rows}) {
		if tg.Issue == 12 {
			got[tg.Volume+" "+tg.Test+" "+tg.Goal] = res{tg.Value, tg.Met}
		}
	}
	want := map[string]res{
		"loop set-c1-p20000-n20000 ops/s uring-durable / always >= 0.8": {0.79, false},
		"loop set-p16 ops/s uring-durable / always >= 1.0":              {1.0, true},
		"loop set ops/s uring-durable / always >= 1.5":                  {1.6, true},
		"root set ops/s uring-durable / always >= 1.0":                  {0.9, false},
		"loop set CPU/op uring-durable / always <= 1.2":                 {1.25, false},
		"root set CPU/op uring-durable / always <= 1.2":                 {1.0, true},
		"loop set ops/s uring-fast / everysec >= 1.0":                   {1.05, true},
		"loop set CPU/op uring-fast / everysec <= 1.1":                  {1.1, true},
		"loop read-heavy GET ops/s uring-durable / always >= 3.0":       {3.0, true},
		"loop read-heavy GET ops/s uring-durable / everysec >= 1.0":     {0.9, false},
	}
	for g, w := range want {
		r, ok := got[g]
		if !ok || math.Abs(r.value-w.value) > 1e-9 || r.met != w.met {
			t.Errorf("%s: got %+v (present %v), want %+v", g, r, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d issue-12 targets, want %d: %v", len(got), len(want), got)
	}
}

func TestWriteTargetsOneTablePerIssue(t *testing.T) {
	var b strings.Builder
	p := &printer{w: &b}
	writeTargets(p, []Target{
		{Issue: 3, Volume: "loop", Test: "set", Goal: "ops/s uring-durable / always >= 1.5", A: 6754, B: 5649, Value: 1.2},
		{Issue: 12, Volume: "loop", Test: "set", Goal: "ops/s uring-durable / always >= 1.5", A: 6754, B: 5649, Value: 1.2},
		{Issue: 12, Volume: "loop", Test: "set", Goal: "CPU/op uring-durable / always <= 1.2", A: 24.61, B: 20.2, Value: 1.218, Met: false},
		{Issue: 12, Volume: "loop", Test: "set", Goal: "RSS", A: 0.5, B: 0.25, Value: 0.25, Met: true},
	})
	want := `
targets of issue 3 (medians of this run: a and b are the two figures compared; reported, not asserted):
volume  test  goal                                 a     b     value  met
loop    set   ops/s uring-durable / always >= 1.5  6754  5649  1.20   no

targets of issue 12 (medians of this run: a and b are the two figures compared; reported, not asserted):
volume  test  goal                                  a      b      value  met
loop    set   ops/s uring-durable / always >= 1.5   6754   5649   1.20   no
loop    set   CPU/op uring-durable / always <= 1.2  24.6   20.2   1.22   no
loop    set   RSS                                   0.500  0.250  0.25   yes
`
	if p.err != nil {
		t.Fatal(p.err)
	}
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func testOptions() Options {
	return Options{Clients: 50, Pipeline: 1, Requests: 1000, Keyspace: 100, GetClients: 5, ReadOnlyKeys: 10,
		ReadHeavySetClients: 8}
}

func TestWritePivotSweep(t *testing.T) {
	row := func(mode, test string, clients int, rps, vsAlways float64) Row {
		return Row{Volume: "loop", Mode: mode, Test: test, Clients: clients, Pipeline: 1, Runs: 3, RPS: rps, VsAlways: vsAlways}
	}
	var b strings.Builder
	p := &printer{w: &b}
	writePivots(p, []Row{
		row("always", "set", 50, 5000, 1),
		row("uring-durable", "set", 50, 7500, 1.5),
		row("always", "set-c1", 1, 400, 1),
		{Volume: "loop", Mode: "uring-durable", Test: "set-c1", Clients: 1, Pipeline: 1, Runs: 3, Errors: 3},
		{Volume: "loop", Mode: "always", Test: "set-p16", Clients: 50, Pipeline: 16, Runs: 3, RPS: 60000, VsAlways: 1},
		row("always", "hset", 50, 5000, 1), // one client count: no sweep
		{Volume: "loop", Mode: "always", Test: Mixed, Clients: 50, Pipeline: 1, SideOp: SideGet, Runs: 3, RPS: 1},
	})
	want := `
SET client sweep: ops/s and x always (medians)
  volume           mode  c=1 ops/s  x always  c=50 ops/s  x always
    loop         always        400     1.00x        5000     1.00x
    loop  uring-durable          -                  7500     1.50x

SET pipelined: ops/s and x always (medians)
  volume    mode  c=50 P=16 ops/s  x always
    loop  always            60000     1.00x
`
	if p.err != nil {
		t.Fatal(p.err)
	}
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// The replies table sets each reply-path variant against the unmodified
// server test by test, with the published figure for the pipeline depth.
func TestWriteRepliesAgainstNone(t *testing.T) {
	o := testOptions()
	o.DataSize = 3
	o.Modes = []server.Mode{server.None, server.NoneIOThreads}
	tests := []string{"get-d64-r100", "set-p16"}
	var err error
	if o.Workloads, err = ParseWorkloads(tests, o); err != nil {
		t.Fatal(err)
	}
	rep := &Report{Options: o}
	for _, tc := range []struct {
		mode, test string
		rps, cpu   []float64
	}{
		{"none", "get-d64-r100", []float64{100000, 90000, 110000}, []float64{0.004, 0.004, 0.004}},
		{"none-io-threads-2", "get-d64-r100", []float64{150000, 120000, 130000}, []float64{0.006, 0.006, 0.005}},
		{"none", "set-p16", []float64{400000}, []float64{0.002}},
		{"none-io-threads-2", "set-p16", []float64{380000}, []float64{0.002}},
	} {
		for i := range tc.rps {
			rep.Runs = append(rep.Runs, Run{Volume: "root", Mode: tc.mode, Test: tc.test, Rep: i + 1,
				Tool: benchparse.Report{OpsPerSecond: tc.rps[i]}, CPUPer1k: tc.cpu[i]})
		}
	}
	rep.Rows = summarize(rep)
	var b strings.Builder
	p := &printer{w: &b}
	rep.writeReplies(p)
	if p.err != nil {
		t.Fatal(p.err)
	}
	for _, want := range []string{
		"    root  get-d64-r100  50   1       64      100000            4.00                   130000                     1.30x                         1.50x       +31%",
		"    root       set-p16  50  16        3      400000            2.00                   380000                     0.95x                         1.00x        -5%",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("replies table lacks\n%s\ngot:\n%s", want, b.String())
		}
	}
	b.Reset()
	rep.Options.Modes = []server.Mode{server.None, server.Always}
	rep.writeReplies(p)
	if b.Len() != 0 {
		t.Errorf("replies table printed without a reply-path variant:\n%s", b.String())
	}
}

// A baseline build's modes are set against the same mode on the build under
// test, row by row and as a median per mode; the durable bound still applies
// to the baseline's durable modes.
func TestBaselineBuildSideBySide(t *testing.T) {
	o := testOptions()
	o.BaselineDir = "/opt/notls/bin"
	o.Modes = []server.Mode{server.Always, server.Always.OnBaseline()}
	var err error
	if o.Workloads, err = ParseWorkloads([]string{"set", "incr"}, o); err != nil {
		t.Fatal(err)
	}
	rep := &Report{Options: o, Server: "8.1.1", Volumes: []*Volume{{Name: "root", LMs: 10}}}
	for _, r := range []struct {
		mode, test    string
		rps, cpu, p99 float64
	}{
		{"always", "set", 4500, 0.022, 20},
		{"always@baseline", "set", 5000, 0.020, 16},
		{"always", "incr", 5000, 0.020, 10},
		{"always@baseline", "incr", 5000, 0.025, 10},
	} {
		rep.Runs = append(rep.Runs, Run{Volume: "root", Mode: r.mode, Test: r.test, Rep: 1,
			Tool: benchparse.Report{OpsPerSecond: r.rps, P99Ms: r.p99}, CPUPer1k: r.cpu})
	}
	rep.Rows = summarize(rep)
	for _, r := range rep.Rows {
		if r.Mode == "always@baseline" && (r.VsBaseline != 0 || r.BoundOpsPS != 5000) {
			t.Errorf("baseline row: %+v", r)
		}
	}
	var b strings.Builder
	p := &printer{w: &b}
	rep.writeBaseline(p)
	if p.err != nil {
		t.Fatal(p.err)
	}
	for _, want := range []string{
		"builds: this build (8.1.1) against the baseline build (/opt/notls/bin)",
		"    root   set  always   4500            5000       0.90x           1.10x           1.25x",
		"    root  incr  always   5000            5000       1.00x           0.80x           1.00x",
		"  always      2              0.95x                  0.95x                  1.12x",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("builds table lacks\n%s\ngot:\n%s", want, b.String())
		}
	}
	b.Reset()
	rep.Options.BaselineDir = ""
	rep.writeBaseline(p)
	if b.Len() != 0 {
		t.Errorf("builds table printed without a baseline build:\n%s", b.String())
	}
}

func TestLoadMovesLegacyMixedGetsToSide(t *testing.T) {
	legacy := `{"options": {"tests": ["set", "mixed"], "clients": 50, "requests": 1000, "pipeline": 1, "get_clients": 5},
		"runs": [
			{"volume": "loop", "mode": "none", "test": "mixed", "rep": 1, "benchmark": {"ops_per_second": 900},
			 "get": {"count": 4000, "p50_ms": 0.5, "p99_ms": 2, "p999_ms": 3}},
			{"volume": "loop", "mode": "uring-durable", "test": "mixed", "rep": 1, "benchmark": {"ops_per_second": 800},
			 "get": {"count": 2000, "p50_ms": 0.5, "p99_ms": 1, "p999_ms": 3}}]}`
	path := t.TempDir() + "/bench.json"
	if err := os.WriteFile(path, []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Runs[1].Side; s == nil || s.Op != SideGet || s.Count != 2000 {
		t.Fatalf("side of the legacy run: %+v", s)
	}
	if len(rep.Targets) != 1 || rep.Targets[0].Goal != "GET p99 uring-durable / none <= 1.5" || rep.Targets[0].Value != 0.5 {
		t.Errorf("targets: %+v", rep.Targets)
	}
}

// Each AOF mode on the preallocated layout is set against the same mode
// appending ("<mode>-noprealloc"), and the table is left out of runs without
// such modes.
func TestLayoutSideBySide(t *testing.T) {
	o := testOptions()
	o.Modes = []server.Mode{server.Always, server.AlwaysNoPrealloc, server.UringDurable}
	var err error
	if o.Workloads, err = ParseWorkloads([]string{"set"}, o); err != nil {
		t.Fatal(err)
	}
	rep := &Report{Options: o, Server: "8.1.1", Volumes: []*Volume{{Name: "loop", LMs: 1, OverwriteLMs: 0.5}}}
	for _, r := range []struct {
		mode          string
		rps, cpu, p99 float64
	}{
		{"always", 7200, 0.020, 8},
		{"always-noprealloc", 4800, 0.025, 16},
		{"uring-durable", 9000, 0.020, 6},
	} {
		rep.Runs = append(rep.Runs, Run{Volume: "loop", Mode: r.mode, Test: "set", Rep: 1,
			Tool: benchparse.Report{OpsPerSecond: r.rps, P99Ms: r.p99}, CPUPer1k: r.cpu})
	}
	rep.Rows = summarize(rep)
	for _, r := range rep.Rows {
		if (r.Mode == "always") != (r.VsNoPrealloc != 0) {
			t.Errorf("%s: ratio to the appending layout %v", r.Mode, r.VsNoPrealloc)
		}
		// The bound C/L takes the L of the mode's layout.
		if want := map[string]float64{"always": 100000, "always-noprealloc": 50000, "uring-durable": 100000}[r.Mode]; r.BoundOpsPS != want {
			t.Errorf("%s: C/L %v, want %v", r.Mode, r.BoundOpsPS, want)
		}
	}
	var b strings.Builder
	p := &printer{w: &b}
	rep.writeLayout(p)
	if p.err != nil {
		t.Fatal(p.err)
	}
	for _, want := range []string{
		"layout: aof-preallocate yes (the default) against no",
		"    loop   set  always   7200              4800         1.50x             0.80x             0.50x",
		"  always      1                1.50x                    0.80x                    0.50x",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("layout table lacks\n%s\ngot:\n%s", want, b.String())
		}
	}
	b.Reset()
	rep.Rows = rep.Rows[:1]
	rep.Rows[0].VsNoPrealloc = 0
	rep.writeLayout(p)
	if b.Len() != 0 {
		t.Errorf("layout table printed without noprealloc modes:\n%s", b.String())
	}
}
