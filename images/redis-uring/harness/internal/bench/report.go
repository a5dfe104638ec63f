package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/stats"
)

// Row is the median over repetitions of one (volume, mode, test), with
// ratios against everysec and always on the same volume and test.
type Row struct {
	Volume          string  `json:"volume"`
	Mode            string  `json:"mode"`
	Test            string  `json:"test"`
	Clients         int     `json:"clients"`
	Pipeline        int     `json:"pipeline"`
	Requests        int     `json:"requests"`
	Runs            int     `json:"runs"`
	Errors          int     `json:"errors"`
	RPS             float64 `json:"ops_per_second"`
	P50Ms           float64 `json:"p50_ms"`
	P99Ms           float64 `json:"p99_ms"`
	P999Ms          float64 `json:"p999_ms"`
	CPUPer1k        float64 `json:"server_cpu_s_per_1k_ops"`
	RSSMiB          float64 `json:"rss_mib"`
	FsyncsPer1k     float64 `json:"fsyncs_per_1k_ops"`
	FsyncAvgMs      float64 `json:"fsync_avg_ms"`
	FsyncP99Ms      float64 `json:"fsync_p99_ms"`
	DevFlushesPer1k float64 `json:"device_flushes_per_1k_ops"`
	DevFlushMs      float64 `json:"device_flush_avg_ms"`
	// AOFBytesPerOp is the AOF's growth per request (INFO aof_current_size):
	// what the log costs in disk, padding of direct writes included.
	AOFBytesPerOp  float64 `json:"aof_bytes_per_op"`
	SideOp         string  `json:"side_op,omitempty"`
	SideClients    int     `json:"side_clients,omitempty"`
	SideRPS        float64 `json:"side_ops_per_second,omitempty"`
	SideP50Ms      float64 `json:"side_p50_ms,omitempty"`
	SideP99Ms      float64 `json:"side_p99_ms,omitempty"`
	SideP999Ms     float64 `json:"side_p999_ms,omitempty"`
	VsEverysec     float64 `json:"throughput_vs_everysec"`
	VsAlways       float64 `json:"throughput_vs_always"`
	CPUVsEverysec  float64 `json:"cpu_per_op_vs_everysec"`
	CPUVsAlways    float64 `json:"cpu_per_op_vs_always"`
	BoundOpsPS     float64 `json:"c_over_l_ops_per_second,omitempty"`
	OfBound        float64 `json:"throughput_of_c_over_l"`
	SideVsEverysec float64 `json:"side_throughput_vs_everysec,omitempty"`
	SideVsAlways   float64 `json:"side_throughput_vs_always,omitempty"`
	SideP99VsNone  float64 `json:"side_p99_vs_none,omitempty"`
	// VsNone and CPUVsNone compare with the unmodified server without
	// persistence: the baseline of the reply-path variants.
	VsNone    float64 `json:"throughput_vs_none,omitempty"`
	CPUVsNone float64 `json:"cpu_per_op_vs_none,omitempty"`
	// VsBaseline, CPUVsBaseline and P99VsBaseline compare the build under
	// test with the baseline build, same mode (-baseline-bin-dir).
	VsBaseline    float64 `json:"throughput_vs_baseline,omitempty"`
	CPUVsBaseline float64 `json:"cpu_per_op_vs_baseline,omitempty"`
	P99VsBaseline float64 `json:"p99_vs_baseline,omitempty"`
	// VsNoPrealloc, CPUVsNoPrealloc and P99VsNoPrealloc compare an AOF mode
	// on the preallocated layout with the same mode on upstream's appending
	// one ("<mode>-noprealloc").
	VsNoPrealloc    float64 `json:"throughput_vs_noprealloc,omitempty"`
	CPUVsNoPrealloc float64 `json:"cpu_per_op_vs_noprealloc,omitempty"`
	P99VsNoPrealloc float64 `json:"p99_vs_noprealloc,omitempty"`
}

// workload returns the workload a test name of the report stands for.
// Reports written before workloads were stored get them re-parsed from
// their options.
func (rep *Report) workload(name string) Workload {
	for _, w := range rep.Options.Workloads {
		if w.Name == name {
			return w
		}
	}
	w, err := ParseWorkload(name, rep.Options)
	if err != nil {
		return Workload{Name: name, Test: name, Clients: rep.Options.Clients, Pipeline: rep.Options.Pipeline,
			Requests: rep.Options.Requests}
	}
	return w
}

func summarize(rep *Report) []Row {
	type key struct{ vol, mode, test string }
	group := map[key][]Run{}
	var order []key
	for _, r := range rep.Runs {
		k := key{r.Volume, r.Mode, r.Test}
		if _, ok := group[k]; !ok {
			order = append(order, k)
		}
		group[k] = append(group[k], r)
	}
	volumes := map[string]*Volume{}
	for _, v := range rep.Volumes {
		volumes[v.Name] = v
	}
	rows := map[key]*Row{}
	for _, k := range order {
		runs := group[k]
		w := rep.workload(k.test)
		row := &Row{Volume: k.vol, Mode: k.mode, Test: k.test, Clients: w.Clients, Pipeline: w.Pipeline, Requests: w.Requests}
		med := func(f func(Run) float64) float64 {
			var xs []float64
			for _, r := range runs {
				if r.Error == "" {
					xs = append(xs, f(r))
				}
			}
			return stats.Median(xs)
		}
		for _, r := range runs {
			row.Runs++
			if r.Error != "" {
				row.Errors++
			}
		}
		per1k := func(r Run) float64 { return runOps(w, r) / 1000 }
		row.RPS = med(func(r Run) float64 { return r.Tool.OpsPerSecond })
		row.P50Ms = med(func(r Run) float64 { return r.Tool.P50Ms })
		row.P99Ms = med(func(r Run) float64 { return r.Tool.P99Ms })
		row.P999Ms = med(func(r Run) float64 { return r.Tool.P999Ms })
		row.CPUPer1k = med(func(r Run) float64 { return r.CPUPer1k })
		row.RSSMiB = med(func(r Run) float64 { return float64(r.RSSBytes) / (1 << 20) })
		if runs[0].Fsync != nil {
			fs := func(r Run) *FsyncFigures {
				if r.Fsync == nil {
					return &FsyncFigures{}
				}
				return r.Fsync
			}
			row.FsyncsPer1k = med(func(r Run) float64 { return fs(r).Count / per1k(r) })
			row.FsyncAvgMs = med(func(r Run) float64 { return fs(r).AvgMs })
			row.FsyncP99Ms = med(func(r Run) float64 { return fs(r).P99Ms })
		}
		row.DevFlushesPer1k = med(func(r Run) float64 { return r.DevFlushes / per1k(r) })
		row.DevFlushMs = med(func(r Run) float64 { return r.DevFlushMs })
		row.AOFBytesPerOp = med(func(r Run) float64 { return max(r.InfoDelta["aof_current_size"], 0) / (per1k(r) * 1000) })
		if w.Side != "" {
			side := func(r Run) SideStats {
				if r.Side == nil {
					return SideStats{}
				}
				return *r.Side
			}
			row.SideOp, row.SideClients = w.Side, w.SideClients
			row.SideRPS = med(func(r Run) float64 { return side(r).RPS })
			row.SideP50Ms = med(func(r Run) float64 { return side(r).P50Ms })
			row.SideP99Ms = med(func(r Run) float64 { return side(r).P99Ms })
			row.SideP999Ms = med(func(r Run) float64 { return side(r).P999Ms })
		}
		// With perfect group commit each of C clients completes one write
		// per fdatasync; pipelines and reads have no such bound.
		if m, err := server.ModeByName(k.mode); err == nil && m.Durable() && w.writes() && w.Pipeline <= 1 && volumes[k.vol] != nil {
			if l := volumes[k.vol].LFor(m); l > 0 {
				row.BoundOpsPS = float64(w.Clients) / (l / 1000)
			}
		}
		rows[k] = row
	}
	var out []Row
	for _, k := range order {
		row := rows[k]
		if e := rows[key{k.vol, "everysec", k.test}]; e != nil {
			row.VsEverysec = ratio(row.RPS, e.RPS)
			row.CPUVsEverysec = ratio(row.CPUPer1k, e.CPUPer1k)
			row.SideVsEverysec = ratio(row.SideRPS, e.SideRPS)
		}
		if a := rows[key{k.vol, "always", k.test}]; a != nil {
			row.VsAlways = ratio(row.RPS, a.RPS)
			row.CPUVsAlways = ratio(row.CPUPer1k, a.CPUPer1k)
			row.SideVsAlways = ratio(row.SideRPS, a.SideRPS)
		}
		if n := rows[key{k.vol, "none", k.test}]; n != nil {
			row.SideP99VsNone = ratio(row.SideP99Ms, n.SideP99Ms)
			row.VsNone = ratio(row.RPS, n.RPS)
			row.CPUVsNone = ratio(row.CPUPer1k, n.CPUPer1k)
		}
		if b := rows[key{k.vol, k.mode + "@" + server.BaselineBuild, k.test}]; b != nil {
			row.VsBaseline = ratio(row.RPS, b.RPS)
			row.CPUVsBaseline = ratio(row.CPUPer1k, b.CPUPer1k)
			row.P99VsBaseline = ratio(row.P99Ms, b.P99Ms)
		}
		if s := rows[key{k.vol, k.mode + server.NoPreallocSuffix, k.test}]; s != nil {
			row.VsNoPrealloc = ratio(row.RPS, s.RPS)
			row.CPUVsNoPrealloc = ratio(row.CPUPer1k, s.CPUPer1k)
			row.P99VsNoPrealloc = ratio(row.P99Ms, s.P99Ms)
		}
		row.OfBound = ratio(row.RPS, row.BoundOpsPS)
		out = append(out, *row)
	}
	return out
}

// ratio is a/b, or 0 when either side was not measured.
func ratio(a, b float64) float64 {
	if b == 0 || a == 0 {
		return 0
	}
	return a / b
}

// CPUCheck verifies that INFO's used_cpu_* (getrusage RUSAGE_SELF) covers the
// io_uring kernel-side threads, by comparing it with /proc's per-thread times.
type CPUCheck struct {
	RunsWithUringThreads int     `json:"runs_with_io_uring_threads"`
	UringThreadSec       float64 `json:"io_uring_threads_cpu_s"`
	MaxAbsDiffSec        float64 `json:"max_abs_info_minus_proc_s"`
	Holds                bool    `json:"info_includes_io_uring_threads"`
	Detail               string  `json:"detail"`
}

func checkCPU(runs []Run) CPUCheck {
	var c CPUCheck
	c.Holds = true
	for _, r := range runs {
		if r.Error != "" {
			continue
		}
		// /proc has 10 ms ticks and the two snapshots are taken a few
		// milliseconds apart: allow 30 ms plus 5%.
		tol := 0.03 + 0.05*r.Threads.ProcessSec
		c.MaxAbsDiffSec = math.Max(c.MaxAbsDiffSec, math.Abs(r.CPUSec-r.Threads.ProcessSec))
		if r.Threads.UringThreads == 0 {
			continue
		}
		c.RunsWithUringThreads++
		c.UringThreadSec += r.Threads.UringSec
		if math.Abs(r.CPUSec-r.Threads.ProcessSec) > tol || r.CPUSec+tol < r.Threads.MainSec+r.Threads.UringSec {
			c.Holds = false
		}
	}
	switch {
	case c.RunsWithUringThreads == 0:
		c.Holds = false
		c.Detail = "no io_uring threads (iou-wrk-*/iou-sqp-*) were seen in any run; the claim was not exercised"
	case c.Holds:
		c.Detail = fmt.Sprintf("in %d runs with io_uring threads (%.2f s of their CPU seen in /proc), INFO used_cpu_sys+user matched the /proc process total and covered main thread + io_uring threads (max |INFO-/proc| %.3f s)",
			c.RunsWithUringThreads, c.UringThreadSec, c.MaxAbsDiffSec)
	default:
		c.Detail = fmt.Sprintf("INFO used_cpu deltas did NOT cover the io_uring threads in some of %d runs (max |INFO-/proc| %.3f s); see runs[].threads",
			c.RunsWithUringThreads, c.MaxAbsDiffSec)
	}
	return c
}

// Load reads a bench.json written by WriteFiles and recomputes the derived
// rows, targets and CPU check, so older results render with today's report.
func Load(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Reports from before the side loads were generalised kept the mixed
	// run's GETs under "get".
	var legacy struct {
		Runs []struct {
			Get *SideStats `json:"get"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &legacy); err == nil && len(legacy.Runs) == len(rep.Runs) {
		for i, r := range legacy.Runs {
			if r.Get != nil && rep.Runs[i].Side == nil {
				g := *r.Get
				g.Op, g.Clients = SideGet, rep.Options.GetClients
				rep.Runs[i].Side = &g
			}
		}
	}
	rep.finish()
	return &rep, nil
}

// finish derives the rows, the CPU accounting check and the targets from
// the runs.
func (rep *Report) finish() {
	rep.Rows = summarize(rep)
	rep.CPUCheck = checkCPU(rep.Runs)
	rep.Targets = targets(rep)
}

// WriteFiles stores bench.json, bench.csv and bench.txt in dir.
func (rep *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "bench.csv"))
	if err != nil {
		return err
	}
	if err := rep.WriteCSV(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	t, err := os.Create(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return err
	}
	if err := rep.WriteTable(t); err != nil {
		_ = t.Close()
		return err
	}
	return t.Close()
}

// WriteCSV writes one line per Row.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"volume", "mode", "test", "clients", "pipeline", "requests", "runs", "errors",
		"ops_per_second", "p50_ms", "p99_ms", "p999_ms", "server_cpu_s_per_1k_ops", "rss_mib", "fsyncs_per_1k_ops",
		"fsync_avg_ms", "fsync_p99_ms", "device_flushes_per_1k_ops", "device_flush_avg_ms", "aof_bytes_per_op",
		"side_op", "side_clients", "side_ops_per_second", "side_p50_ms", "side_p99_ms", "side_p999_ms",
		"throughput_vs_everysec", "throughput_vs_always", "cpu_per_op_vs_everysec", "cpu_per_op_vs_always",
		"c_over_l_ops_per_second", "throughput_of_c_over_l", "side_throughput_vs_everysec",
		"side_throughput_vs_always", "side_p99_vs_none", "l_ms", "throughput_vs_baseline", "cpu_per_op_vs_baseline",
		"p99_vs_baseline", "throughput_vs_noprealloc", "cpu_per_op_vs_noprealloc", "p99_vs_noprealloc"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	d := strconv.Itoa
	for _, r := range rep.Rows {
		var l float64
		for _, v := range rep.Volumes {
			if v.Name == r.Volume {
				l = v.LMs
			}
		}
		_ = cw.Write([]string{r.Volume, r.Mode, r.Test, d(r.Clients), d(r.Pipeline), d(r.Requests), d(r.Runs),
			d(r.Errors), f(r.RPS), f(r.P50Ms), f(r.P99Ms), f(r.P999Ms), f(r.CPUPer1k), f(r.RSSMiB), f(r.FsyncsPer1k),
			f(r.FsyncAvgMs), f(r.FsyncP99Ms), f(r.DevFlushesPer1k), f(r.DevFlushMs), f(r.AOFBytesPerOp),
			r.SideOp, d(r.SideClients), f(r.SideRPS), f(r.SideP50Ms), f(r.SideP99Ms), f(r.SideP999Ms),
			f(r.VsEverysec), f(r.VsAlways), f(r.CPUVsEverysec), f(r.CPUVsAlways),
			f(r.BoundOpsPS), f(r.OfBound), f(r.SideVsEverysec), f(r.SideVsAlways), f(r.SideP99VsNone), f(l),
			f(r.VsBaseline), f(r.CPUVsBaseline), f(r.P99VsBaseline),
			f(r.VsNoPrealloc), f(r.CPUVsNoPrealloc), f(r.P99VsNoPrealloc)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable prints the human-readable report.
func (rep *Report) WriteTable(w io.Writer) error {
	p := &printer{w: w}
	o := rep.Options
	p.printf("redis-uring mode benchmark — %s, %.0f min\n", rep.Started.Format("2006-01-02 15:04 UTC"), rep.Seconds/60)
	p.printf("server %s; %s; %d-byte values, %d repetition(s), modes interleaved (median per row)\n",
		rep.Server, rep.Host, o.DataSize, o.Reps)
	p.printf("command: %s\n", rep.Command)
	if o.TLS {
		p.printf("clients: TLS (client certificates required), the servers serve TLS only\n")
	}
	p.printf("note: a shared 2-core VM; figures are noisy — compare modes within this run, not across runs.\n")
	var tests []string
	for _, name := range rep.testNames() {
		tests = append(tests, describe(rep.workload(name)))
	}
	p.printf("tests: %s\n", strings.Join(tests, "; "))
	for _, v := range rep.Volumes {
		p.printf("volume %-4s %s (%s): 4 KiB append+fdatasync mean %.3f ms before / %.3f ms after the runs (p50 %.3f / %.3f, p99 %.3f / %.3f); L (mean of all %d probes) = %.3f ms, C/L = %.0f ops/s for C = %d\n",
			v.Name, v.Dir, v.Device, ms(v.LBefore.Mean), ms(v.LAfter.Mean), ms(v.LBefore.P50), ms(v.LAfter.P50),
			ms(v.LBefore.P99), ms(v.LAfter.P99), 2+len(v.LBetween), v.LMs, v.BoundOpsPS, o.Clients)
		if v.OverwriteLMs > 0 {
			p.printf("volume %-4s preallocated (4 KiB overwrite+fdatasync): mean %.3f ms before / %.3f ms after (p50 %.3f / %.3f, p99 %.3f / %.3f); L = %.3f ms, C/L = %.0f ops/s: the bound of every mode but -noprealloc\n",
				v.Name, ms(v.OverwriteBefore.Mean), ms(v.OverwriteAfter.Mean), ms(v.OverwriteBefore.P50), ms(v.OverwriteAfter.P50),
				ms(v.OverwriteBefore.P99), ms(v.OverwriteAfter.P99), v.OverwriteLMs, v.OverwriteBoundOpsPS)
		}
	}
	for _, s := range rep.Skipped {
		p.printf("skipped: %s\n", s)
	}
	p.printf("\n")
	tw := p.table(tabwriter.AlignRight)
	tw.printf("volume\ttest\tc\tP\tmode\tops/s\tp50 ms\tp99 ms\tp99.9 ms\tcpu ms/1k\trss MiB\tfsync/1k\tfsync ms\tfsync p99 ms\tflush/1k\tflush ms\taof B/op\tx everysec\tx always\tcpu x evsec\tcpu x always\tof C/L\terr\t\n")
	for _, r := range rep.Rows {
		if r.SideOp != "" {
			continue
		}
		fsync, fsyncMs, fsyncP99 := "n/a", "n/a", "n/a"
		if r.FsyncsPer1k > 0 {
			fsync, fsyncMs = fmt.Sprintf("%.1f", r.FsyncsPer1k), fmt.Sprintf("%.3f", r.FsyncAvgMs)
			fsyncP99 = fmt.Sprintf("<=%g", r.FsyncP99Ms)
		}
		tw.printf("%s\t%s\t%d\t%d\t%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.2f\t%.1f\t%s\t%s\t%s\t%.1f\t%.3f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t\n",
			r.Volume, r.Test, r.Clients, r.Pipeline, r.Mode, r.RPS, r.P50Ms, r.P99Ms, r.P999Ms, r.CPUPer1k*1000, r.RSSMiB,
			fsync, fsyncMs, fsyncP99, r.DevFlushesPer1k, r.DevFlushMs, r.AOFBytesPerOp, x(r.VsEverysec), x(r.VsAlways),
			x(r.CPUVsEverysec), x(r.CPUVsAlways), pct(r.OfBound), r.Errors)
	}
	tw.flush()
	for _, name := range rep.testNames() {
		if wl := rep.workload(name); wl.Side != "" {
			writeSideTable(p, wl, rep.Rows)
		}
	}
	writePivots(p, rep.Rows)
	rep.writeReplies(p)
	rep.writeBaseline(p)
	rep.writeLayout(p)
	writeTargets(p, rep.Targets)
	p.printf("\nCPU accounting: %s\n", rep.CPUCheck.Detail)
	p.printf("columns: c, P = valkey-benchmark clients and pipeline; cpu = INFO used_cpu_sys+user delta per 1k requests;\n")
	p.printf("fsync = INFO aof_fsync_* deltas (every engine's AOF fdatasyncs) per 1k requests, mean ms and p99 bucket bound;\n")
	p.printf("flush = block-device flushes (/sys/dev/block/*/stat, whole device) per 1k requests and their mean time;\n")
	p.printf("aof B/op = INFO aof_current_size growth per request (direct writes' padding included);\n")
	p.printf("per 1k requests counts the side load's requests too; x = throughput (cpu x: CPU per request) over the mode's;\n")
	p.printf("of C/L = ops/s over clients/L, durable modes in unpipelined write tests only (L = mean append+fdatasync latency measured on the volume).\n")
	var errs []string
	for _, r := range rep.Runs {
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("%s/%s/%s rep %d: %s", r.Volume, r.Mode, r.Test, r.Rep, r.Error))
		}
	}
	if len(errs) > 0 {
		p.printf("errors:\n  %s\n", strings.Join(errs, "\n  "))
	}
	return p.err
}

// testNames lists the report's tests in run order.
func (rep *Report) testNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		if !seen[r.Test] {
			seen[r.Test] = true
			names = append(names, r.Test)
		}
	}
	return names
}

// describe renders a workload as the valkey-benchmark arguments it runs.
func describe(w Workload) string {
	s := fmt.Sprintf("%s = -t %s -c %d -P %d -n %d -r %d", w.Name, w.Test, w.Clients, w.Pipeline, w.Requests, w.Keyspace)
	if w.ValueSize > 0 {
		s += fmt.Sprintf(" -d %d", w.ValueSize)
	}
	if w.Side != "" {
		s += fmt.Sprintf(" + %d %s clients", w.SideClients, w.Side)
	}
	return s
}

// writeSideTable prints the tests with a side load: the tool's figures and
// the side load's, each against always and everysec.
func writeSideTable(p *printer, wl Workload, rows []Row) {
	tool := strings.ToUpper(wl.Test)
	what := map[string]string{SideGet: "GETting preloaded keys nothing writes", SideSet: "SETting keys nothing reads"}[wl.Side]
	p.printf("\n%s: %s load (%d clients, valkey-benchmark) + %d clients %s (the harness, one request at a time)\n",
		wl.Name, tool, wl.Clients, wl.SideClients, what)
	tw := p.table(tabwriter.AlignRight)
	t, s := tool, wl.Side
	tw.printf("volume\tmode\t%[1]s ops/s\t%[1]s p99 ms\t%[2]s ops/s\t%[2]s p50 ms\t%[2]s p99 ms\t%[2]s p99.9 ms\t%[1]s x always\t%[1]s x evsec\t%[2]s x always\t%[2]s x evsec\t%[2]s p99 x none\tcpu ms/1k\terr\t\n", t, s)
	for _, r := range rows {
		if r.Test != wl.Name {
			continue
		}
		tw.printf("%s\t%s\t%.0f\t%.3f\t%.0f\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%d\t\n",
			r.Volume, r.Mode, r.RPS, r.P99Ms, r.SideRPS, r.SideP50Ms, r.SideP99Ms, r.SideP999Ms, x(r.VsAlways),
			x(r.VsEverysec), x(r.SideVsAlways), x(r.SideVsEverysec), x(r.SideP99VsNone), r.CPUPer1k*1000, r.Errors)
	}
	tw.flush()
}

// publishedReplies is the reference of issue 13: the AOFUring thesis'
// asynchronous, batched reply writes through io_uring against the unmodified
// server, maximum throughput by pipeline depth (64 B-1 KiB replies).
var publishedReplies = map[int]string{1: "+31%", 4: "+19%", 16: "-5%"}

// writeReplies prints the reply-path variants (modes without persistence
// other than "none") against the unmodified server, test by test.
func (rep *Report) writeReplies(p *printer) {
	var variants []string
	for _, m := range rep.Options.Modes {
		if m.Persistence == "none" && m.Name != "none" && !slices.Contains(variants, m.Name) {
			variants = append(variants, m.Name)
		}
	}
	if len(variants) == 0 {
		return
	}
	p.printf("\nreplies: each variant against the unmodified server (none), medians; published = the AOFUring thesis' io_uring replies vs unmodified, by pipeline depth\n")
	tw := p.table(tabwriter.AlignRight)
	tw.printf("volume\ttest\tc\tP\tvalue B\tnone ops/s\tnone cpu ms/1k\t")
	for _, v := range variants {
		tw.printf("%[1]s ops/s\t%[1]s x none\t%[1]s cpu x none\t", v)
	}
	tw.printf("published\t\n")
	type key struct{ vol, mode, test string }
	rows := map[key]Row{}
	for _, r := range rep.Rows {
		rows[key{r.Volume, r.Mode, r.Test}] = r
	}
	for _, r := range rep.Rows {
		if r.Mode != "none" || r.SideOp != "" {
			continue
		}
		size := rep.workload(r.Test).ValueSize
		if size == 0 {
			size = rep.Options.DataSize
		}
		tw.printf("%s\t%s\t%d\t%d\t%d\t%.0f\t%.2f\t", r.Volume, r.Test, r.Clients, r.Pipeline, size, r.RPS, r.CPUPer1k*1000)
		for _, v := range variants {
			if vr, ok := rows[key{r.Volume, v, r.Test}]; ok && vr.Errors < vr.Runs {
				tw.printf("%.0f\t%s\t%s\t", vr.RPS, x(vr.VsNone), x(vr.CPUVsNone))
			} else {
				tw.printf("-\t\t\t")
			}
		}
		published := publishedReplies[r.Pipeline]
		if published == "" {
			published = "-"
		}
		tw.printf("%s\t\n", published)
	}
	tw.flush()
}

// writeBaseline prints, when the run had a baseline build, each mode on the
// build under test against the same mode on the baseline, test by test, and
// the median of those ratios per mode.
func (rep *Report) writeBaseline(p *printer) {
	if rep.Options.BaselineDir == "" {
		return
	}
	p.printf("\nbuilds: this build (%s) against the baseline build (%s), same mode, medians; x = this over baseline\n",
		rep.Server, rep.Options.BaselineDir)
	writeVersus(p, rep.Rows, "baseline", func(r Row) [3]float64 { return [3]float64{r.VsBaseline, r.CPUVsBaseline, r.P99VsBaseline} })
}

// writeLayout prints, when the run had "<mode>-noprealloc" modes, each AOF
// mode on the preallocated layout against the same mode appending, as
// upstream's does: what the layout alone gives each mode.
func (rep *Report) writeLayout(p *printer) {
	pick := func(r Row) [3]float64 { return [3]float64{r.VsNoPrealloc, r.CPUVsNoPrealloc, r.P99VsNoPrealloc} }
	if !slices.ContainsFunc(rep.Rows, func(r Row) bool { return pick(r)[0] != 0 }) {
		return
	}
	p.printf("\nlayout: aof-preallocate yes (the default) against no (upstream's appending file), same mode, medians; x = preallocated over appending\n")
	writeVersus(p, rep.Rows, "noprealloc", pick)
}

// writeVersus prints the rows that have a ratio to the mode they are set
// against (named label), test by test, then the median of each ratio per mode.
func writeVersus(p *printer, rows []Row, label string, pick func(Row) [3]float64) {
	tw := p.table(tabwriter.AlignRight)
	tw.printf("volume\ttest\tmode\tops/s\t%[1]s ops/s\tx %[1]s\tcpu x %[1]s\tp99 x %[1]s\t\n", label)
	var modes []string
	byMode := map[string][][3]float64{}
	for _, r := range rows {
		v := pick(r)
		if v[0] == 0 || r.SideOp != "" {
			continue
		}
		tw.printf("%s\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t\n", r.Volume, r.Test, r.Mode, r.RPS, r.RPS/v[0],
			x(v[0]), x(v[1]), x(v[2]))
		if _, ok := byMode[r.Mode]; !ok {
			modes = append(modes, r.Mode)
		}
		byMode[r.Mode] = append(byMode[r.Mode], v)
	}
	tw.flush()
	tw = p.table(tabwriter.AlignRight)
	tw.printf("mode\ttests\tmedian x %[1]s\tmedian cpu x %[1]s\tmedian p99 x %[1]s\t\n", label)
	for _, m := range modes {
		var col [3][]float64
		for _, r := range byMode[m] {
			for i := range col {
				if r[i] > 0 {
					col[i] = append(col[i], r[i])
				}
			}
		}
		tw.printf("%s\t%d\t%s\t%s\t%s\t\n", m, len(byMode[m]), x(stats.Median(col[0])), x(stats.Median(col[1])),
			x(stats.Median(col[2])))
	}
	tw.flush()
}

// writePivots prints, per tool test run at several client counts or
// pipelined, ops/s and the ratio to always side by side: the client sweep
// (unpipelined, by clients) and the pipelined runs.
func writePivots(p *printer, rows []Row) {
	var tests []string
	byTest := map[string][]Row{}
	for _, r := range rows {
		if r.SideOp != "" {
			continue
		}
		tool := strings.SplitN(r.Test, "-", 2)[0]
		if _, ok := byTest[tool]; !ok {
			tests = append(tests, tool)
		}
		byTest[tool] = append(byTest[tool], r)
	}
	for _, t := range tests {
		var sweep, piped []Row
		clients := map[int]bool{}
		for _, r := range byTest[t] {
			if r.Pipeline > 1 {
				piped = append(piped, r)
			} else {
				sweep = append(sweep, r)
				clients[r.Clients] = true
			}
		}
		if len(clients) > 1 {
			writePivot(p, fmt.Sprintf("%s client sweep: ops/s and x always (medians)", strings.ToUpper(t)), sweep)
		}
		if len(piped) > 0 {
			writePivot(p, fmt.Sprintf("%s pipelined: ops/s and x always (medians)", strings.ToUpper(t)), piped)
		}
	}
}

func writePivot(p *printer, title string, rows []Row) {
	type shape struct{ clients, pipeline int }
	label := func(s shape) string {
		if s.pipeline > 1 {
			return fmt.Sprintf("c=%d P=%d", s.clients, s.pipeline)
		}
		return fmt.Sprintf("c=%d", s.clients)
	}
	var cols []shape
	var lines [][2]string // volume, mode
	cell := map[[2]string]map[shape]Row{}
	for _, r := range rows {
		s, vm := shape{r.Clients, r.Pipeline}, [2]string{r.Volume, r.Mode}
		if !slices.Contains(cols, s) {
			cols = append(cols, s)
		}
		if cell[vm] == nil {
			cell[vm] = map[shape]Row{}
			lines = append(lines, vm)
		}
		cell[vm][s] = r
	}
	sort.Slice(cols, func(i, j int) bool {
		if cols[i].pipeline != cols[j].pipeline {
			return cols[i].pipeline < cols[j].pipeline
		}
		return cols[i].clients < cols[j].clients
	})
	p.printf("\n%s\n", title)
	tw := p.table(tabwriter.AlignRight)
	tw.printf("volume\tmode\t")
	for _, c := range cols {
		tw.printf("%s ops/s\tx always\t", label(c))
	}
	tw.printf("\n")
	for _, vm := range lines {
		tw.printf("%s\t%s\t", vm[0], vm[1])
		for _, c := range cols {
			if r, ok := cell[vm][c]; ok && r.Errors < r.Runs {
				tw.printf("%.0f\t%s\t", r.RPS, x(r.VsAlways))
			} else {
				tw.printf("-\t\t")
			}
		}
		tw.printf("\n")
	}
	tw.flush()
}

// printer writes the report and keeps the first write error, so the code
// that renders it reads as a list of lines.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// table starts an aligned table (cells end with a tab) on p.
func (p *printer) table(flags uint) *table {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', flags)
	return &table{printer: printer{w: tw}, tw: tw, out: p}
}

type table struct {
	printer
	tw  *tabwriter.Writer
	out *printer
}

func (t *table) flush() {
	if t.err == nil {
		t.err = t.tw.Flush()
	}
	if t.out.err == nil {
		t.out.err = t.err
	}
}

func ms(d interface{ Nanoseconds() int64 }) float64 { return float64(d.Nanoseconds()) / 1e6 }

func x(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

func pct(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", r*100)
}
