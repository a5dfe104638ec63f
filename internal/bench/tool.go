package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ToolResult is what one valkey-benchmark test reported.
type ToolResult struct {
	OpsPerSecond float64
	P50Micros    int64
	P99Micros    int64
	P999Micros   int64
}

// ParseTool reads valkey-benchmark's default report (not --csv, which lacks
// p99.9): throughput and p50/p99 from the summary, p99.9 from the first line
// of the "Latency by percentile distribution" at or above 99.9%.
func ParseTool(out string) (ToolResult, error) {
	var r ToolResult
	lines := strings.Split(strings.ReplaceAll(out, "\r", "\n"), "\n")
	inDist, sawSummary, sawDist := false, false, false
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(line, "Latency by percentile distribution"):
			inDist = true
		case inDist && strings.Contains(line, "% <= "):
			var pct, ms float64
			if _, err := fmt.Sscanf(line, "%f%% <= %f milliseconds", &pct, &ms); err == nil {
				sawDist = true
				if pct >= 99.9 && r.P999Micros == 0 {
					r.P999Micros = millisToMicros(ms)
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
				case "p50":
					r.P50Micros = millisToMicros(v)
				case "p99":
					r.P99Micros = millisToMicros(v)
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

func millisToMicros(ms float64) int64 { return int64(ms*1000 + 0.5) }

// ToolArgs are valkey-benchmark's arguments for one test.
type ToolArgs struct {
	Host string
	Port int
	// DB is the database the test SELECTs (--dbnum).
	DB                  int
	Clients, Requests   int
	Keyspace, ValueSize int
	Pipeline            int
	// User (--user, empty for the default user) and Password (-a:
	// valkey-benchmark reads no environment variable for it; only the
	// runner's own container sees its command line).
	User, Password string
	// TLS are the flags that reach a TLS server, nil for plain TCP.
	TLS []string
	// Test is a valkey-benchmark test name (-t), or empty with Command set.
	Test string
	// Command is a custom command line, e.g. GET untouched:__rand_int__.
	Command []string
}

// Argv is valkey-benchmark's command line without the program name.
func (a ToolArgs) Argv() []string {
	argv := []string{"-h", a.Host, "-p", strconv.Itoa(a.Port), "-c", strconv.Itoa(a.Clients), "-n", strconv.Itoa(a.Requests),
		"-r", strconv.Itoa(a.Keyspace), "-d", strconv.Itoa(a.ValueSize), "-P", strconv.Itoa(a.Pipeline), "--dbnum", strconv.Itoa(a.DB)}
	if a.Password != "" {
		argv = append(argv, "-a", a.Password)
		if a.User != "" {
			argv = append(argv, "--user", a.User)
		}
	}
	argv = append(argv, a.TLS...)
	if a.Test != "" {
		return append(argv, "-t", a.Test)
	}
	return append(argv, a.Command...)
}
