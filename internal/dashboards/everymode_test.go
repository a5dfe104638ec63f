package dashboards

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/uring-redis/uring-redis-operator/internal/promtest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestEveryModeFillsTheFsyncPanels scrapes real servers in every AOF mode
// that fsyncs, through the real redis_exporter with the chart's Lua script,
// into a real Prometheus: the instance dashboard's fsync panels and its
// preallocated region's panel have a series for each of them, posix always and
// everysec as well as the io_uring engine. (controllers.TestDashboardQueriesReturnData
// runs every query of every panel; this one checks them per mode.)
func TestEveryModeFillsTheFsyncPanels(t *testing.T) {
	ctx := context.Background()
	script := filepath.Join(testenv.RepoRoot(), "internal", "specs", "uring-info.lua")
	modes := map[string]string{ // pod -> the server's AOF settings
		"always-0":   "appendfsync always\n",
		"everysec-0": "appendfsync everysec\n",
		"durable-0":  "appendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n",
		"fast-0":     "appendfsync always\nappendfsync-engine uring\naof-uring-ack fast\n",
	}
	var targets []string
	for pod, config := range modes {
		addr := testenv.StartServer(t, "save \"\"\nappendonly yes\n"+config)
		targets = append(targets, fmt.Sprintf("{targets: [%q], labels: {namespace: modes, pod: %q}}", promtest.Exporter(t, addr, script), pod))
		// Steady writes keep every mode's fsyncs coming while Prometheus scrapes.
		testenv.WriteSteadily(t, addr)
	}
	sort.Strings(targets)
	prom := promtest.Prometheus(t, fmt.Sprintf(`global: {scrape_interval: 1s}
scrape_configs:
  - job_name: redis
    static_configs: [%s]
`, strings.Join(targets, ", ")))

	queries, err := AllQueries("5s")
	if err != nil {
		t.Fatal(err)
	}
	// Each query with what every mode's series must show.
	positive := func(v float64) bool { return v > 0 }
	number := func(v float64) bool { return !math.IsNaN(v) }
	want := map[string]func(float64) bool{
		"uring-instance.json / fsync latency #0":                 positive, // p99 of the interval's fsyncs
		"uring-instance.json / fsync latency #1":                 positive, // p50, p99, max since start
		"uring-instance.json / fsyncs and batches per second #0": positive,
		"uring-instance.json / Preallocated log region #0":       positive, // bytes ahead
		"uring-instance.json / Preallocated log region #1":       number,
		"uring-instance.json / Preallocated log region #2":       number,
		"uring-instance.json / Preallocated log region #3":       number,
	}
	var last []string
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 60*time.Second, true, func(context.Context) (bool, error) {
		last = nil
		for desc, ok := range want {
			q, found := queries[desc]
			if !found {
				return false, fmt.Errorf("no query %q in the dashboards", desc)
			}
			samples, err := promtest.Query(ctx, prom, q)
			if err != nil {
				return false, err
			}
			shown := map[string]bool{}
			for _, s := range samples {
				shown[string(s.Metric["pod"])] = shown[string(s.Metric["pod"])] || ok(float64(s.Value))
			}
			for pod := range modes {
				if !shown[pod] {
					last = append(last, fmt.Sprintf("%s: nothing for %s in %v", desc, pod, samples))
				}
			}
		}
		return len(last) == 0, nil
	})
	if err != nil && !wait.Interrupted(err) {
		t.Fatal(err)
	}
	for _, miss := range last {
		t.Error(miss)
	}

	// The last extension error arrives as a 0/1 series named after it.
	samples, err := promtest.Query(ctx, prom, `redis_script_values{key=~"aof_prealloc_last_error_.*"}`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range samples {
		got[string(s.Metric["pod"])] = fmt.Sprintf("%s=%v", s.Metric["key"], s.Value)
	}
	for pod := range modes {
		if got[pod] != "aof_prealloc_last_error_none=1" {
			t.Errorf("%s: last preallocation error %q, want aof_prealloc_last_error_none=1", pod, got[pod])
		}
	}

	// Durable mode writes its batches as direct writes (the server's
	// default over the preallocated log): the panel's third series shows
	// them, and the reason none says the last batch was one.
	samples, err = promtest.Query(ctx, prom, queries["uring-instance.json / fsyncs and batches per second #2"])
	if err != nil {
		t.Fatal(err)
	}
	direct := map[string]float64{}
	for _, s := range samples {
		direct[string(s.Metric["pod"])] = float64(s.Value)
	}
	if direct["durable-0"] <= 0 {
		t.Errorf("durable-0: no direct writes per second in %v", samples)
	}
	for _, pod := range []string{"always-0", "everysec-0", "fast-0"} {
		if direct[pod] > 0 {
			t.Errorf("%s: %v direct writes per second, want none", pod, direct[pod])
		}
	}
	samples, err = promtest.Query(ctx, prom, `redis_script_values{pod="durable-0", key=~"aof_uring_direct_declined_reason_.*"}`)
	if err != nil {
		t.Fatal(err)
	}
	reasonNone := false
	for _, s := range samples {
		reasonNone = reasonNone || s.Metric["key"] == "aof_uring_direct_declined_reason_none" && s.Value == 1
	}
	if !reasonNone {
		t.Errorf("durable-0: direct write reason %v, want aof_uring_direct_declined_reason_none 1", samples)
	}
}
