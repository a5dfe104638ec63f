package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Target is one of issue 3's benchmark goals evaluated on one volume and
// test. They are figures to report, not pass/fail checks of the harness.
type Target struct {
	Volume string  `json:"volume"`
	Test   string  `json:"test"`
	Goal   string  `json:"goal"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Met    bool    `json:"met"`
}

// targets evaluates the goals for every volume and test where both sides of
// the comparison were measured.
func targets(rows []Row) []Target {
	type key struct{ vol, mode, test string }
	idx := map[key]Row{}
	for _, r := range rows {
		if r.Errors < r.Runs {
			idx[key{r.Volume, r.Mode, r.Test}] = r
		}
	}
	var out []Target
	add := func(vol, test, goal string, value, limit float64, atLeast bool) {
		met := value <= limit
		if atLeast {
			met = value >= limit
		}
		out = append(out, Target{Volume: vol, Test: test, Goal: goal, Value: value, Limit: limit, Met: met})
	}
	seen := map[[2]string]bool{}
	for _, r := range rows {
		vt := [2]string{r.Volume, r.Test}
		if seen[vt] {
			continue
		}
		seen[vt] = true
		get := func(mode string) (Row, bool) { x, ok := idx[key{r.Volume, mode, r.Test}]; return x, ok }
		fast, okF := get("uring-fast")
		dur, okD := get("uring-durable")
		ev, okE := get("everysec")
		al, okA := get("always")
		none, okN := get("none")
		if r.Test == Mixed {
			if okD && okN && none.GetP99Ms > 0 {
				add(r.Volume, r.Test, "GET p99 uring-durable / none <= 1.5", dur.GetP99Ms/none.GetP99Ms, 1.5, false)
			}
			continue
		}
		if okF && okE && ev.RPS > 0 && ev.CPUPer1k > 0 {
			add(r.Volume, r.Test, "ops/s uring-fast / everysec >= 1.0", fast.RPS/ev.RPS, 1.0, true)
			add(r.Volume, r.Test, "CPU/op uring-fast / everysec <= 1.1", fast.CPUPer1k/ev.CPUPer1k, 1.1, false)
		}
		if okD && okA && al.RPS > 0 {
			add(r.Volume, r.Test, "ops/s uring-durable / always >= 1.5", dur.RPS/al.RPS, 1.5, true)
		}
		if okD && dur.OfBound > 0 {
			add(r.Volume, r.Test, "ops/s uring-durable / (C/L) >= 0.8", dur.OfBound, 0.8, true)
		}
		for _, m := range []Row{dur, fast} {
			if m.Mode != "" && okE {
				add(r.Volume, r.Test, "RSS MiB "+m.Mode+" - everysec <= 2", m.RSSMiB-ev.RSSMiB, 2, false)
			}
		}
	}
	return out
}

func writeTargets(w io.Writer, ts []Target) {
	if len(ts) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntargets of issue 3 (figures to report, measured in this run):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "volume\ttest\tgoal\tvalue\tmet\t")
	for _, t := range ts {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t\n", t.Volume, t.Test, t.Goal, t.Value, met)
	}
	tw.Flush()
}
