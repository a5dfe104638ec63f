package benchreport

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// writeCommands are the commands whose throughput a mode's row averages: the
// writes, which are what persistence costs.
var writeCommands = []string{"set", "hset", "lpush", "incr"}

// row is one target's summary over the write commands.
type row struct {
	target, mode, engine  string
	storage               string
	replicas, ackReplicas int32
	ops                   float64 // mean ops/s over the write commands
	cpu, p99              float64 // means, µs
	fsyncP99              float64 // mean over the write commands that fsynced, µs
	readP99               int64   // get-during-set p99, µs; 0 when not run
	commands, fsynced     int
}

// Table writes the comparison a person reads first: one row per target with
// the mean throughput of the write commands, its ratio to the aof-everysec
// and aof-always targets on the same storage (when the benchmark has them),
// mean server CPU per
// 1000 operations, mean p99, mean fsync p99 (of the commands during which
// the server fsynced the AOF, in every mode that does), the p99 of GETs of
// untouched keys during SET load, and the crash check. When a target has replicas, two
// more columns say how many and how many acknowledged each write, and the
// throughput of one with ackReplicas k > 0 against a target of the same mode
// and replicas with k = 0: the cost of waiting for the replicas' disks. When
// the targets are on more than one storage (a StorageClass, or a profile), a
// column names each one's, and every ratio compares targets on the same.
// Ratios are of figures measured in the same benchmark, one target after
// another on the same node.
func Table(w io.Writer, results []v1alpha1.BenchmarkResult, crashes []v1alpha1.CrashCheckResult) error {
	var rows []*row
	byTarget := map[string]*row{}
	for _, r := range results {
		x := byTarget[r.Target]
		if x == nil {
			x = &row{target: r.Target, mode: r.Mode, engine: r.Engine, storage: r.Storage, replicas: r.Replicas, ackReplicas: r.AckReplicas}
			byTarget[r.Target] = x
			rows = append(rows, x)
		}
		if r.Command == "get-during-set" {
			x.readP99 = r.P99Micros
			continue
		}
		if !slices.Contains(writeCommands, r.Command) {
			continue
		}
		x.commands++
		x.ops += float64(r.OpsPerSecond)
		x.cpu += float64(r.CPUMicrosPerKop)
		x.p99 += float64(r.P99Micros)
		if r.FsyncP99Micros > 0 {
			// everysec syncs once a second: a short command may see none.
			x.fsynced++
			x.fsyncP99 += float64(r.FsyncP99Micros)
		}
	}
	var summarized []*row
	for _, x := range rows {
		if x.commands == 0 {
			continue
		}
		n := float64(x.commands)
		x.ops, x.cpu, x.p99 = x.ops/n, x.cpu/n, x.p99/n
		if x.fsynced > 0 {
			x.fsyncP99 /= float64(x.fsynced)
		}
		summarized = append(summarized, x)
	}
	if len(summarized) == 0 {
		return fmt.Errorf("no results of a write command (%v)", writeCommands)
	}
	// opsOf is the throughput of the first target that matches, 0 if none does.
	opsOf := func(match func(*row) bool) float64 {
		if i := slices.IndexFunc(summarized, match); i >= 0 {
			return summarized[i].ops
		}
		return 0
	}
	// baseline is the throughput of the first target of mode on y's storage.
	baseline := func(mode string, y *row) float64 {
		return opsOf(func(x *row) bool { return x.mode == mode && x.storage == y.storage })
	}
	replicated := slices.ContainsFunc(summarized, func(x *row) bool { return x.replicas > 0 })
	storages := slices.ContainsFunc(summarized, func(x *row) bool { return x.storage != summarized[0].storage })
	withoutAcks := func(y *row) float64 {
		return opsOf(func(x *row) bool {
			return x.mode == y.mode && x.storage == y.storage && x.replicas == y.replicas && x.ackReplicas == 0
		})
	}
	ratio := func(ops, base float64) string {
		if base == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", ops/base)
	}
	crash := map[string]v1alpha1.CrashCheckResult{}
	for _, c := range crashes {
		crash[c.Target] = c
	}

	// The tabwriter buffers every row; what fails to reach w fails Flush.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "target\tmode\tengine\t"
	if storages {
		header += "storage\t"
	}
	header += "write ops/s\tvs everysec\tvs always\tCPU ms/kop\tp99 ms\tfsync p99 ms\tGET p99 ms during SET\tcrash: lost/acked\t"
	if replicated {
		header += "replicas\tackReplicas\tvs ackReplicas 0\t"
	}
	_, _ = fmt.Fprintln(tw, header)
	for _, x := range summarized {
		read, lost := "-", "-"
		if x.readP99 > 0 {
			read = fmt.Sprintf("%.2f", float64(x.readP99)/1000)
		}
		if c, ok := crash[x.target]; ok {
			lost = fmt.Sprintf("%d/%d", c.LostKeys, c.AcknowledgedKeys)
		}
		fsync := "-"
		if x.fsyncP99 > 0 {
			fsync = fmt.Sprintf("%.2f", x.fsyncP99/1000)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t", x.target, x.mode, orDash(x.engine))
		if storages {
			_, _ = fmt.Fprintf(tw, "%s\t", orDash(x.storage))
		}
		_, _ = fmt.Fprintf(tw, "%.0f\t%s\t%s\t%.1f\t%.2f\t%s\t%s\t%s\t", x.ops, ratio(x.ops, baseline("aof-everysec", x)),
			ratio(x.ops, baseline("aof-always", x)), x.cpu/1000, x.p99/1000, fsync, read, lost)
		if replicated {
			cost := "-"
			if x.ackReplicas > 0 {
				cost = ratio(x.ops, withoutAcks(x))
			}
			_, _ = fmt.Fprintf(tw, "%d\t%d\t%s\t", x.replicas, x.ackReplicas, cost)
		}
		_, _ = fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
