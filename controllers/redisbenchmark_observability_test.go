package controllers

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/dashboards"
	"github.com/uring-redis/uring-redis-operator/internal/promtest"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestDashboardQueriesReturnData runs every panel's and variable's PromQL
// against a real Prometheus that scraped real redis_exporters (with the
// chart's Lua script) attached to real servers in uring and posix mode (the
// uring one a primary whose replies wait for its replica's fsync), and
// the operator's metrics after this envtest's RedisBenchmark collected the
// real runner's results from both servers and the real storage probe's
// measurement of a directory. A third server asks for io_uring
// under a seccomp filter that denies it: the chart's fallback alert must go
// pending for it, and only for it. The backup panel's queries need a
// backup and an archive: TestRecoverFromArchive runs them.
func TestDashboardQueriesReturnData(t *testing.T) {
	ctx := context.Background()
	script := filepath.Join(testenv.RepoRoot(), "internal", "specs", specs.ExporterScriptFile)
	const uring = "save \"\"\nappendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n"
	servers := map[string]string{ // pod -> server address
		"uring-0": testenv.StartServer(t, uring+"aof-uring-ack-replicas 1\n"),
		"posix-0": testenv.StartServer(t, "save \"\"\nappendonly yes\nappendfsync always\n"),
	}
	// uring-0's replica, for the replication panels (it takes no writes).
	replica := testenv.StartReplica(t, servers["uring-0"], uring)
	fallback := testenv.StartServerWithoutIOUring(t, "save \"\"\nappendonly yes\nappendfsync always\nappendfsync-engine uring\n")
	var targets []string
	for pod, addr := range servers {
		targets = append(targets, fmt.Sprintf("{targets: [%q], labels: {namespace: obs, pod: %q}}", promtest.Exporter(t, addr, script), pod))
	}
	targets = append(targets, fmt.Sprintf("{targets: [%q], labels: {namespace: obs, pod: uring-1}}", promtest.Exporter(t, replica, script)))
	targets = append(targets, fmt.Sprintf("{targets: [%q], labels: {namespace: obs, pod: fallback-0}}", promtest.Exporter(t, fallback, script)))
	sort.Strings(targets)

	rules := filepath.Join(testenv.RepoRoot(), "charts", "uring-redis-operator", "files", "prometheus-rules.yaml")
	prom := promtest.Prometheus(t, fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: redis
    static_configs: [%s]
  - job_name: operator
    static_configs: [{targets: [%q]}]
`, rules, strings.Join(targets, ", "), operatorMetrics(t)))

	// Steady writes keep the rates and the fsync buckets moving while Prometheus scrapes.
	for _, addr := range servers {
		testenv.WriteSteadily(t, addr)
	}

	// A RedisBenchmark of both servers, run by the real runner, collected by the reconciler.
	tool := filepath.Join(filepath.Dir(testenv.ServerBin()), "valkey-benchmark")
	ns := newNamespace(t)
	createTarget(t, ns, "uring", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	createTarget(t, ns, "posix", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}})
	createBenchmark(t, ns, "dash", v1alpha1.RedisBenchmarkSpec{
		Targets:    []string{"uring", "posix"},
		Workload:   v1alpha1.BenchmarkWorkload{Commands: []v1alpha1.BenchmarkCommand{"set", "incr"}, Requests: 3000},
		CrashCheck: &v1alpha1.CrashCheckSpec{},
	})
	for i, target := range []struct{ name, mode, pod string }{{"uring", "uring-durable", "uring-0"}, {"posix", "aof-always", "posix-0"}} {
		r := bench.Runner{Tool: tool, Addr: servers[target.pod]}
		res, err := r.Run(ctx, bench.Workload{Target: target.name, Mode: target.mode, Commands: []string{"set", "incr"},
			Requests: 3000, Clients: 8, Pipeline: 1, ValueSize: 32, Keyspace: 1000})
		if err != nil {
			t.Fatal(err)
		}
		// The crash check itself is tested in internal/bench; here its figure only has to reach the metrics.
		res.Crash = &bench.CrashResult{Acknowledged: 1000}
		msg, err := bench.Encode(res)
		if err != nil {
			t.Fatal(err)
		}
		job := specs.BenchmarkJobName(&v1alpha1.RedisBenchmark{ObjectMeta: metav1.ObjectMeta{Name: "dash"}}, i)
		waitJob(t, ns, job)
		finishJobPod(t, ns, job, 0, string(msg))
	}
	waitBenchmark(t, ns, "dash", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonBenchmarkSucceeded)
	})

	// The uring target's pod reports what the real storage probe measured on a real directory.
	probe, err := exec.Command(fsprobeBin(), "-t", "200", t.TempDir()).Output()
	if err != nil {
		t.Fatalf("%s: %v", fsprobeBin(), err)
	}
	actAsKubeletReporting(t, ns, "uring-0", "filesystem=ext4\n"+string(probe), metav1.Now())

	queries, err := dashboards.AllQueries("5s")
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) < 15 {
		t.Fatalf("only %d queries found in the dashboards", len(queries))
	}
	for desc := range queries {
		switch {
		case dashboards.NeedsBackups(desc):
			delete(queries, desc) // TestRecoverFromArchive runs them, on an instance with a backup and an archive
		case dashboards.NeedsCluster(desc):
			delete(queries, desc) // TestClusterFormsAndScales runs them, on a sharded instance
		}
	}
	waitQueriesReturnData(t, prom, queries)

	// The engines are told apart: configured (aof_engine_uring) and running (aof_uring_active).
	for key, want := range map[string]map[string]float64{
		"aof_engine_uring": {"uring-0": 1, "uring-1": 1, "posix-0": 0, "fallback-0": 1},
		"aof_uring_active": {"uring-0": 1, "uring-1": 1, "posix-0": 0, "fallback-0": 0},
	} {
		samples, err := promtest.Query(ctx, prom, `redis_script_values{key="`+key+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, s := range samples {
			got[string(s.Metric["pod"])] = float64(s.Value)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s per server = %v, want %v", key, got, want)
		}
	}
	// The rules loaded into the real Prometheus: the fallback alert is pending (for: 5m) for the denied server only.
	eventually(t, 30*time.Second, func() error {
		alerts, err := promtest.Query(ctx, prom, `ALERTS{alertname="RedisUringFallback"}`)
		if err != nil {
			return err
		}
		if len(alerts) != 1 || alerts[0].Metric["pod"] != "fallback-0" || alerts[0].Metric["alertstate"] != "pending" {
			return fmt.Errorf("RedisUringFallback alerts: %v", alerts)
		}
		return nil
	})
	reason, err := promtest.Query(ctx, prom, `redis_script_values{pod="fallback-0", key=~"aof_uring_fallback_reason_.*"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(reason) != 1 || reason[0].Metric["key"] == "aof_uring_fallback_reason_none" {
		t.Errorf("the fallback server's reason: %v", reason)
	} else {
		t.Logf("fallback reported as %s", reason[0].Metric["key"])
	}
	fsyncs, err := promtest.Query(ctx, prom, `uringredis_benchmark_fsync_seconds{namespace="`+ns+`", quantile="0.99"}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range fsyncs {
		if s.Value <= 0 {
			t.Errorf("fsync p99 series %v = %v", s.Metric, s.Value)
		}
	}
	if len(fsyncs) != 4 {
		t.Errorf("%d fsync p99 series, want set and incr of both targets: posix always reports its fsyncs too", len(fsyncs))
	}
}

// operatorMetrics serves the operator's metrics (controller-runtime's
// registry) for this test, and returns their address.
func operatorMetrics(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// waitQueriesReturnData runs each query against the Prometheus at prom
// until it returns a number, for 90 s, and fails the test with those that
// never did.
func waitQueriesReturnData(t *testing.T, prom string, queries map[string]string) {
	t.Helper()
	pending, err := promtest.AwaitData(context.Background(), prom, queries, 2*time.Second, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for desc, q := range pending {
		t.Errorf("%s returned no data: %s", desc, q)
	}
}
