package bench

import (
	"fmt"
	"math"
)

// Target is one goal of an issue evaluated on one volume and test: a ratio
// (for RSS a difference) of two medians of the run, a and b, against a limit.
// They are figures to report, not pass/fail checks of the harness.
type Target struct {
	Issue  int     `json:"issue"`
	Volume string  `json:"volume"`
	Test   string  `json:"test"`
	Goal   string  `json:"goal"`
	A      float64 `json:"a"`
	B      float64 `json:"b"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Met    bool    `json:"met"`
}

// operand is one side of a goal: a figure of one mode's row.
type operand struct {
	mode   string
	metric func(Row) float64
}

type goal struct {
	issue   int
	text    string
	applies func(w Workload, volume string) bool
	a, b    operand
	diff    bool // a - b instead of a / b
	atLeast bool
	limit   float64
}

const (
	durable  = "uring-durable"
	fast     = "uring-fast"
	always   = "always"
	everysec = "everysec"
)

var (
	opsPerSec  = func(r Row) float64 { return r.RPS }
	cpuPer1kMs = func(r Row) float64 { return r.CPUPer1k * 1000 }
	rssMiB     = func(r Row) float64 { return r.RSSMiB }
	cOverL     = func(r Row) float64 { return r.BoundOpsPS }
	sideP99Ms  = func(r Row) float64 { return r.SideP99Ms }
)

func plainTests(w Workload, _ string) bool { return w.plain() }

func plainOn(volume string) func(Workload, string) bool {
	return func(w Workload, v string) bool { return w.plain() && v == volume }
}

func pipelinedSet(singleClient bool) func(Workload, string) bool {
	return func(w Workload, _ string) bool {
		return w.Test == "set" && w.Side == "" && w.Pipeline > 1 && (w.Clients == 1) == singleClient
	}
}

func named(name string) func(Workload, string) bool {
	return func(w Workload, _ string) bool { return w.Name == name }
}

// goals are issue 3's and issue 12's benchmark targets. Plain tests are the
// bare valkey-benchmark tests (SET, HSET, LPUSH, INCR at 50 clients).
var goals = []goal{
	{issue: 3, text: "ops/s uring-fast / everysec >= 1.0", applies: plainTests,
		a: operand{fast, opsPerSec}, b: operand{everysec, opsPerSec}, atLeast: true, limit: 1.0},
	{issue: 3, text: "CPU/op uring-fast / everysec <= 1.1", applies: plainTests,
		a: operand{fast, cpuPer1kMs}, b: operand{everysec, cpuPer1kMs}, limit: 1.1},
	{issue: 3, text: "ops/s uring-durable / always >= 1.5", applies: plainTests,
		a: operand{durable, opsPerSec}, b: operand{always, opsPerSec}, atLeast: true, limit: 1.5},
	{issue: 3, text: "ops/s uring-durable / (C/L) >= 0.8", applies: plainTests,
		a: operand{durable, opsPerSec}, b: operand{durable, cOverL}, atLeast: true, limit: 0.8},
	{issue: 3, text: "RSS MiB uring-durable - everysec <= 2", applies: plainTests,
		a: operand{durable, rssMiB}, b: operand{everysec, rssMiB}, diff: true, limit: 2},
	{issue: 3, text: "RSS MiB uring-fast - everysec <= 2", applies: plainTests,
		a: operand{fast, rssMiB}, b: operand{everysec, rssMiB}, diff: true, limit: 2},
	{issue: 3, text: "GET p99 uring-durable / none <= 1.5", applies: named(Mixed),
		a: operand{durable, sideP99Ms}, b: operand{"none", sideP99Ms}, limit: 1.5},

	{issue: 12, text: "ops/s uring-durable / always >= 0.8", applies: pipelinedSet(true),
		a: operand{durable, opsPerSec}, b: operand{always, opsPerSec}, atLeast: true, limit: 0.8},
	{issue: 12, text: "ops/s uring-durable / always >= 1.0", applies: pipelinedSet(false),
		a: operand{durable, opsPerSec}, b: operand{always, opsPerSec}, atLeast: true, limit: 1.0},
	{issue: 12, text: "ops/s uring-durable / always >= 1.5", applies: plainOn("loop"),
		a: operand{durable, opsPerSec}, b: operand{always, opsPerSec}, atLeast: true, limit: 1.5},
	{issue: 12, text: "ops/s uring-durable / always >= 1.0", applies: plainOn("root"),
		a: operand{durable, opsPerSec}, b: operand{always, opsPerSec}, atLeast: true, limit: 1.0},
	{issue: 12, text: "CPU/op uring-durable / always <= 1.2", applies: plainTests,
		a: operand{durable, cpuPer1kMs}, b: operand{always, cpuPer1kMs}, limit: 1.2},
	{issue: 12, text: "ops/s uring-fast / everysec >= 1.0", applies: plainTests,
		a: operand{fast, opsPerSec}, b: operand{everysec, opsPerSec}, atLeast: true, limit: 1.0},
	{issue: 12, text: "CPU/op uring-fast / everysec <= 1.1", applies: plainTests,
		a: operand{fast, cpuPer1kMs}, b: operand{everysec, cpuPer1kMs}, limit: 1.1},
	{issue: 12, text: "GET ops/s uring-durable / always >= 3.0", applies: named(ReadHeavy),
		a: operand{durable, opsPerSec}, b: operand{always, opsPerSec}, atLeast: true, limit: 3.0},
	{issue: 12, text: "GET ops/s uring-durable / everysec >= 1.0", applies: named(ReadHeavy),
		a: operand{durable, opsPerSec}, b: operand{everysec, opsPerSec}, atLeast: true, limit: 1.0},
}

// targets evaluates the goals, issue by issue, for every volume and test
// where both sides were measured (a row with at least one run that did not
// fail, and for a ratio a non-zero b).
func targets(rep *Report) []Target {
	type key struct{ vol, mode, test string }
	idx := map[key]Row{}
	var pairs [][2]string // volume, test in report order
	seen := map[[2]string]bool{}
	for _, r := range rep.Rows {
		if r.Errors < r.Runs {
			idx[key{r.Volume, r.Mode, r.Test}] = r
		}
		if vt := [2]string{r.Volume, r.Test}; !seen[vt] {
			seen[vt] = true
			pairs = append(pairs, vt)
		}
	}
	var issues []int
	for _, g := range goals {
		if len(issues) == 0 || issues[len(issues)-1] != g.issue {
			issues = append(issues, g.issue)
		}
	}
	var out []Target
	for _, issue := range issues {
		for _, vt := range pairs {
			w := rep.workload(vt[1])
			for _, g := range goals {
				if g.issue != issue || !g.applies(w, vt[0]) {
					continue
				}
				ra, okA := idx[key{vt[0], g.a.mode, vt[1]}]
				rb, okB := idx[key{vt[0], g.b.mode, vt[1]}]
				if !okA || !okB {
					continue
				}
				t := Target{Issue: g.issue, Volume: vt[0], Test: vt[1], Goal: g.text, A: g.a.metric(ra),
					B: g.b.metric(rb), Limit: g.limit}
				if g.diff {
					t.Value = t.A - t.B
				} else {
					if t.B == 0 {
						continue
					}
					t.Value = t.A / t.B
				}
				t.Met = t.Value <= g.limit
				if g.atLeast {
					t.Met = t.Value >= g.limit
				}
				out = append(out, t)
			}
		}
	}
	return out
}

func writeTargets(p *printer, ts []Target) {
	var tw *table
	for i, t := range ts {
		if i == 0 || ts[i-1].Issue != t.Issue {
			if tw != nil {
				tw.flush()
			}
			p.printf("\ntargets of issue %d (medians of this run: a and b are the two figures compared; reported, not asserted):\n", t.Issue)
			tw = p.table(0)
			tw.printf("volume\ttest\tgoal\ta\tb\tvalue\tmet\n")
		}
		met := "no"
		if t.Met {
			met = "yes"
		}
		tw.printf("%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n", t.Volume, t.Test, t.Goal, num(t.A), num(t.B), t.Value, met)
	}
	if tw != nil {
		tw.flush()
	}
}

// num prints a figure with the precision its size needs.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
