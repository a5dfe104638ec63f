package bench

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
)

// ToolResult is what one valkey-benchmark test printed.
type ToolResult struct {
	RPS    float64 `json:"ops_per_second"`
	AvgMs  float64 `json:"avg_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// ParseTool reads valkey-benchmark's default (non --csv) report: throughput,
// p50 and p99 from the closing summary, p99.9 from the "Latency by percentile
// distribution" lines (the latency of the first listed percentile >= 99.9,
// an upper bound with HDR histogram precision).
func ParseTool(out string) (ToolResult, error) {
	var r ToolResult
	var dist [][2]float64 // percentile, ms
	inDist, sawSummary := false, false
	lines := strings.Split(strings.ReplaceAll(out, "\r", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(line, "Latency by percentile distribution"):
			inDist = true
		case inDist && strings.Contains(line, "% <= "):
			var pct, ms float64
			if _, err := fmt.Sscanf(line, "%f%% <= %f milliseconds", &pct, &ms); err == nil {
				dist = append(dist, [2]float64{pct, ms})
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
			r.RPS = v
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
	if r.RPS == 0 || !sawSummary {
		return r, fmt.Errorf("no summary in valkey-benchmark output")
	}
	for _, d := range dist {
		if d[0] >= 99.9 {
			r.P999Ms = d[1]
			break
		}
	}
	if len(dist) == 0 {
		return r, fmt.Errorf("no latency distribution in valkey-benchmark output")
	}
	return r, nil
}

// ToolArgs are valkey-benchmark's arguments for one test.
type ToolArgs struct {
	Addr               string // host:port
	Clients, Requests  int
	Keyspace, DataSize int
	Pipeline           int
	Test               string
	TLS                *server.TLS // nil: plain TCP
}

func (a ToolArgs) argv() []string {
	host, port, _ := strings.Cut(a.Addr, ":")
	argv := []string{"-h", host, "-p", port, "-c", strconv.Itoa(a.Clients), "-n", strconv.Itoa(a.Requests),
		"-r", strconv.Itoa(a.Keyspace), "-d", strconv.Itoa(a.DataSize), "-P", strconv.Itoa(a.Pipeline), "-t", a.Test}
	if a.TLS != nil {
		argv = append(argv, "--tls", "--cacert", a.TLS.CA, "--cert", a.TLS.ClientCert, "--key", a.TLS.ClientKey)
	}
	return argv
}

// RunTool runs valkey-benchmark and parses its report.
func RunTool(path string, a ToolArgs) (ToolResult, string, error) {
	argv := a.argv()
	cmdline := path + " " + strings.Join(argv, " ")
	out, err := exec.Command(path, argv...).Output()
	if err != nil {
		return ToolResult{}, cmdline, fmt.Errorf("%s: %w: %s", cmdline, err, lastLines(string(out), 5))
	}
	r, err := ParseTool(string(out))
	if err != nil {
		return r, cmdline, fmt.Errorf("%s: %w: %s", cmdline, err, lastLines(string(out), 5))
	}
	return r, cmdline, nil
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(s, "\r", "\n")))
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			lines = append(lines, t)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
