package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
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
	GetP50Ms        float64 `json:"get_p50_ms,omitempty"`
	GetP99Ms        float64 `json:"get_p99_ms,omitempty"`
	GetP999Ms       float64 `json:"get_p999_ms,omitempty"`
	VsEverysec      float64 `json:"throughput_vs_everysec"`
	VsAlways        float64 `json:"throughput_vs_always"`
	CPUVsEverysec   float64 `json:"cpu_per_op_vs_everysec"`
	OfBound         float64 `json:"throughput_of_c_over_l"`
	GetP99VsNone    float64 `json:"get_p99_vs_none,omitempty"`
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
	rows := map[key]*Row{}
	for _, k := range order {
		runs := group[k]
		row := &Row{Volume: k.vol, Mode: k.mode, Test: k.test}
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
		per1k := float64(rep.Options.Requests) / 1000
		row.RPS = med(func(r Run) float64 { return r.Tool.RPS })
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
			row.FsyncsPer1k = med(func(r Run) float64 { return fs(r).Count / per1k })
			row.FsyncAvgMs = med(func(r Run) float64 { return fs(r).AvgMs })
			row.FsyncP99Ms = med(func(r Run) float64 { return fs(r).P99Ms })
		}
		row.DevFlushesPer1k = med(func(r Run) float64 { return r.DevFlushes / per1k })
		row.DevFlushMs = med(func(r Run) float64 { return r.DevFlushMs })
		if k.test == Mixed {
			row.GetP50Ms = med(func(r Run) float64 { return r.Get.P50Ms })
			row.GetP99Ms = med(func(r Run) float64 { return r.Get.P99Ms })
			row.GetP999Ms = med(func(r Run) float64 { return r.Get.P999Ms })
		}
		rows[k] = row
	}
	bound := map[string]float64{}
	for _, v := range rep.Volumes {
		bound[v.Name] = v.BoundOpsPS
	}
	ratio := func(a, b float64) float64 {
		if b == 0 || a == 0 {
			return 0
		}
		return a / b
	}
	var out []Row
	for _, k := range order {
		row := rows[k]
		if e := rows[key{k.vol, "everysec", k.test}]; e != nil {
			row.VsEverysec = ratio(row.RPS, e.RPS)
			row.CPUVsEverysec = ratio(row.CPUPer1k, e.CPUPer1k)
		}
		if a := rows[key{k.vol, "always", k.test}]; a != nil {
			row.VsAlways = ratio(row.RPS, a.RPS)
		}
		if n := rows[key{k.vol, "none", k.test}]; n != nil && k.test == Mixed {
			row.GetP99VsNone = ratio(row.GetP99Ms, n.GetP99Ms)
		}
		if m, err := server.ModeByName(k.mode); err == nil && m.Durable() {
			row.OfBound = ratio(row.RPS, bound[k.vol])
		}
		out = append(out, *row)
	}
	return out
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
	rep.Rows = summarize(&rep)
	rep.CPUCheck = checkCPU(rep.Runs)
	rep.Targets = targets(rep.Rows)
	return &rep, nil
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
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	t, err := os.Create(filepath.Join(dir, "bench.txt"))
	if err != nil {
		return err
	}
	rep.WriteTable(t)
	return t.Close()
}

// WriteCSV writes one line per Row.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"volume", "mode", "test", "runs", "errors", "ops_per_second", "p50_ms", "p99_ms", "p999_ms",
		"server_cpu_s_per_1k_ops", "rss_mib", "fsyncs_per_1k_ops", "fsync_avg_ms", "fsync_p99_ms", "device_flushes_per_1k_ops",
		"device_flush_avg_ms", "get_p50_ms", "get_p99_ms", "get_p999_ms", "throughput_vs_everysec",
		"throughput_vs_always", "cpu_per_op_vs_everysec", "throughput_of_c_over_l", "get_p99_vs_none",
		"l_ms", "c_over_l_ops_per_second"})
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for _, r := range rep.Rows {
		var l, b float64
		for _, v := range rep.Volumes {
			if v.Name == r.Volume {
				l, b = v.LMs, v.BoundOpsPS
			}
		}
		cw.Write([]string{r.Volume, r.Mode, r.Test, strconv.Itoa(r.Runs), strconv.Itoa(r.Errors), f(r.RPS), f(r.P50Ms),
			f(r.P99Ms), f(r.P999Ms), f(r.CPUPer1k), f(r.RSSMiB), f(r.FsyncsPer1k), f(r.FsyncAvgMs), f(r.FsyncP99Ms), f(r.DevFlushesPer1k),
			f(r.DevFlushMs), f(r.GetP50Ms), f(r.GetP99Ms), f(r.GetP999Ms), f(r.VsEverysec), f(r.VsAlways),
			f(r.CPUVsEverysec), f(r.OfBound), f(r.GetP99VsNone), f(l), f(b)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteTable prints the human-readable report.
func (rep *Report) WriteTable(w io.Writer) {
	o := rep.Options
	fmt.Fprintf(w, "redis-uring mode benchmark — %s\n", rep.Started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "server %s; %s; %d clients, %d requests per run, pipeline %d, %d-byte values, keyspace %d, %d repetition(s), modes interleaved\n",
		rep.Server, rep.Host, o.Clients, o.Requests, o.Pipeline, o.DataSize, o.Keyspace, o.Reps)
	fmt.Fprintf(w, "command: %s\n", rep.Command)
	fmt.Fprintln(w, "note: a shared 2-core VM; figures are noisy — compare modes within this run, not across runs.")
	for _, v := range rep.Volumes {
		fmt.Fprintf(w, "volume %-4s %s (%s): 4 KiB append+fdatasync mean %.3f ms before / %.3f ms after the runs (p50 %.3f / %.3f, p99 %.3f / %.3f); L (mean of all %d probes) = %.3f ms, C/L = %.0f ops/s\n",
			v.Name, v.Dir, v.Device, ms(v.LBefore.Mean), ms(v.LAfter.Mean), ms(v.LBefore.P50), ms(v.LAfter.P50),
			ms(v.LBefore.P99), ms(v.LAfter.P99), 2+len(v.LBetween), v.LMs, v.BoundOpsPS)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", s)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "volume\ttest\tmode\tops/s\tp50 ms\tp99 ms\tp99.9 ms\tcpu ms/1k\trss MiB\tfsync/1k\tfsync ms\tfsync p99 ms\tflush/1k\tflush ms\tx everysec\tx always\tcpu x evsec\tof C/L\terr\t")
	for _, r := range rep.Rows {
		if r.Test == Mixed {
			continue
		}
		fsync, fsyncMs, fsyncP99 := "n/a", "n/a", "n/a"
		if r.FsyncsPer1k > 0 {
			fsync, fsyncMs = fmt.Sprintf("%.1f", r.FsyncsPer1k), fmt.Sprintf("%.3f", r.FsyncAvgMs)
			fsyncP99 = fmt.Sprintf("<=%g", r.FsyncP99Ms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.2f\t%.1f\t%s\t%s\t%s\t%.1f\t%.3f\t%s\t%s\t%s\t%s\t%d\t\n",
			r.Volume, r.Test, r.Mode, r.RPS, r.P50Ms, r.P99Ms, r.P999Ms, r.CPUPer1k*1000, r.RSSMiB, fsync, fsyncMs, fsyncP99,
			r.DevFlushesPer1k, r.DevFlushMs, x(r.VsEverysec), x(r.VsAlways), x(r.CPUVsEverysec), pct(r.OfBound), r.Errors)
	}
	tw.Flush()
	var mixed []Row
	for _, r := range rep.Rows {
		if r.Test == Mixed {
			mixed = append(mixed, r)
		}
	}
	if len(mixed) > 0 {
		fmt.Fprintf(w, "\nmixed: SET load (%d clients) + %d clients GETting untouched keys\n", o.Clients, o.GetClients)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "volume\tmode\tSET ops/s\tSET p99 ms\tGET p50 ms\tGET p99 ms\tGET p99.9 ms\tGET p99 x none\terr\t")
		for _, r := range mixed {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%d\t\n",
				r.Volume, r.Mode, r.RPS, r.P99Ms, r.GetP50Ms, r.GetP99Ms, r.GetP999Ms, x(r.GetP99VsNone), r.Errors)
		}
		tw.Flush()
	}
	writeTargets(w, rep.Targets)
	fmt.Fprintf(w, "\nCPU accounting: %s\n", rep.CPUCheck.Detail)
	fmt.Fprintln(w, "columns: cpu = INFO used_cpu_sys+user delta per 1k requests (mixed: SETs + GETs); fsync = uring engine INFO aof_uring_fsync_* deltas per 1k requests,")
	fmt.Fprintln(w, "mean ms and p99 bucket bound (n/a for posix modes: upstream INFO counts no fsyncs; see flush);")
	fmt.Fprintln(w, "flush = block-device flushes (/sys/dev/block/*/stat, whole device) per 1k requests and their mean time;")
	fmt.Fprintln(w, "of C/L = ops/s over clients/L, durable modes only (L = mean append+fdatasync latency measured on the volume).")
	var errs []string
	for _, r := range rep.Runs {
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("%s/%s/%s rep %d: %s", r.Volume, r.Mode, r.Test, r.Rep, r.Error))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "errors:\n  %s\n", strings.Join(errs, "\n  "))
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
