// Package benchparse reads valkey-benchmark's report. The benchmark runner
// (internal/bench) and the server's harness (images/redis-uring/harness, a
// module of its own whose path lies under this one's, so it may import an
// internal package) both drive valkey-benchmark and read its output here.
package benchparse

import (
	"fmt"
	"strconv"
	"strings"
)

// Report is what one valkey-benchmark test printed, latencies in
// milliseconds as printed. The JSON names are those of the harness' report.
type Report struct {
	OpsPerSecond float64 `json:"ops_per_second"`
	AvgMs        float64 `json:"avg_ms"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	// P999Ms is the latency of the first line of the "Latency by percentile
	// distribution" at or above 99.9%: an upper bound with HDR histogram
	// precision.
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Parse reads valkey-benchmark's default report (not --csv, which lacks
// p99.9): throughput, avg, p50, p99 and max from the closing summary, p99.9
// from the latency distribution.
func Parse(out string) (Report, error) {
	var r Report
	lines := strings.Split(strings.ReplaceAll(out, "\r", "\n"), "\n")
	inDist, sawDist, sawP999, sawSummary := false, false, false, false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(line, "Latency by percentile distribution"):
			inDist = true
		case inDist && strings.Contains(line, "% <= "):
			var pct, ms float64
			if _, err := fmt.Sscanf(line, "%f%% <= %f milliseconds", &pct, &ms); err == nil {
				sawDist = true
				if pct >= 99.9 && !sawP999 {
					r.P999Ms, sawP999 = ms, true
				}
			}
		case inDist && line == "":
			inDist = false
		case strings.HasPrefix(line, "throughput summary:"):
			f := strings.Fields(line)
			if len(f) < 3 {
				return r, fmt.Errorf("bad throughput line %q", line)
			}
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				return r, fmt.Errorf("bad throughput line %q", line)
			}
			r.OpsPerSecond = v
		case strings.HasPrefix(line, "avg") && strings.Contains(line, "p99"):
			if i+1 >= len(lines) {
				return r, fmt.Errorf("latency summary header without values")
			}
			names, vals := strings.Fields(line), strings.Fields(lines[i+1])
			if len(names) != len(vals) {
				return r, fmt.Errorf("latency summary %q / %q", line, lines[i+1])
			}
			for j, n := range names {
				v, err := strconv.ParseFloat(vals[j], 64)
				if err != nil {
					return r, fmt.Errorf("latency summary value %q", vals[j])
				}
				switch n {
				case "avg":
					r.AvgMs = v
				case "p50":
					r.P50Ms = v
				case "p99":
					r.P99Ms = v
				case "max":
					r.MaxMs = v
				}
			}
			sawSummary = true
			i++
		}
	}
	switch {
	case r.OpsPerSecond <= 0 || !sawSummary:
		return r, fmt.Errorf("no summary in valkey-benchmark's output")
	case !sawDist:
		return r, fmt.Errorf("no latency distribution in valkey-benchmark's output")
	}
	return r, nil
}
