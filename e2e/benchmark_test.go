//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestBenchmarkComparesModes runs the product's main job on the cluster: a
// RedisBenchmark across aof always, aof everysec, uring durable and uring fast
// on the same node and volume class, with the mixed read run and the crash
// check. Every target must report every command, the uring targets their
// fsyncs, and the durable modes lose no acknowledged write when the server is
// killed. The figures are printed; their size is not asserted (see
// `make bench-server` for the measured comparison). The benchmark is safe
// next to real data: it waits for a target that has not opted in, refuses a
// second benchmark of a busy target, and leaves an application's keys in db 0
// as they were and its own database empty.
func TestBenchmarkComparesModes(t *testing.T) {
	ctx := context.Background()
	targets := []struct {
		name, mode string
		spec       v1alpha1.RedisPersistenceSpec
	}{
		{"cmp-always", "aof-always", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}}},
		{"cmp-everysec", "aof-everysec", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}}},
		{"cmp-durable", "uring-durable", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}}},
		{"cmp-fast", "uring-fast", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckFast}}},
	}
	var names []string
	for i, target := range targets {
		// The first target opts in only once the benchmark waits for it.
		if i > 0 {
			target.spec.Benchmark = &v1alpha1.BenchmarkAccessSpec{CrashCheck: true}
		}
		create(t, target.name, target.spec)
		names = append(names, target.name)
	}
	for _, target := range targets {
		waitReady(t, target.name)
	}
	if got := cli(t, "cmp-always", "CONFIG", "GET", "enable-debug-command"); !strings.HasSuffix(got, "no") {
		t.Errorf("a server that did not allow the crash check has enable-debug-command %q", got)
	}
	// An application's keys, two named like valkey-benchmark's own.
	appKeys := map[string]string{"key:000000000001": "app-1", "key:000000000002": "app-2", "counter:000000000001": "7", "session:a": "s", "user:1": "u"}
	for k, v := range appKeys {
		cli(t, "cmp-always", "SET", k, v)
	}

	commands := []v1alpha1.BenchmarkCommand{v1alpha1.CommandSet, v1alpha1.CommandHSet, v1alpha1.CommandLPush, v1alpha1.CommandIncr}
	rb := &v1alpha1.RedisBenchmark{
		ObjectMeta: metav1.ObjectMeta{Name: "modes", Namespace: namespace},
		Spec: v1alpha1.RedisBenchmarkSpec{
			Targets: names,
			Workload: v1alpha1.BenchmarkWorkload{
				Commands:   commands,
				Requests:   int32(envInt(t, "E2E_BENCH_REQUESTS", 20000)),
				Clients:    50,
				MixedReads: true,
			},
			CrashCheck: &v1alpha1.CrashCheckSpec{Clients: 20, WriteSeconds: 3},
		},
	}
	if err := k8s.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	waitBenchmark(t, rb, time.Minute, "TargetNotOptedIn")
	updateRP(t, "cmp-always", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Benchmark = &v1alpha1.BenchmarkAccessSpec{CrashCheck: true}
	})
	// Allowing the crash check restarts the server with DEBUG on; the
	// benchmark waits for it to be Ready again.
	waitBenchmark(t, rb, 5*time.Minute, "Running")
	if got := cli(t, "cmp-always", "CONFIG", "GET", "enable-debug-command"); !strings.HasSuffix(got, "yes") {
		t.Errorf("after spec.benchmark.crashCheck: true, enable-debug-command is %q", got)
	}
	job := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: rb.Status.CurrentJob}, job); err != nil {
		t.Fatal(err)
	}
	if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d != 3600 {
		t.Errorf("the benchmark Job's activeDeadlineSeconds is %v, want 3600", d)
	}
	// A second benchmark of the busy target waits for the first.
	second := &v1alpha1.RedisBenchmark{
		ObjectMeta: metav1.ObjectMeta{Name: "modes-again", Namespace: namespace},
		Spec:       v1alpha1.RedisBenchmarkSpec{Targets: []string{"cmp-always"}},
	}
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitBenchmark(t, second, time.Minute, "TargetBusy")
	if err := k8s.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}

	waitBenchmarkComplete(t, rb, 20*time.Minute)

	var table strings.Builder
	w := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(w, "target\tmode\tengine\tcommand\tops/s\tp50 µs\tp99 µs\tCPU µs/kop\tfsyncs\tfsync p99 µs\t")
	for _, r := range rb.Status.Results {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Target, r.Mode, r.Engine, r.Command,
			r.OpsPerSecond, r.P50Micros, r.P99Micros, r.CPUMicrosPerKop, r.FsyncCount, r.FsyncP99Micros)
	}
	_ = w.Flush()
	t.Logf("RedisBenchmark %s results (%d requests per command, 50 clients):\n%s", rb.Name, rb.Spec.Workload.Requests, table.String())

	if len(rb.Status.Results) != len(targets)*(len(commands)+1) {
		t.Errorf("%d results, want %d (every command plus get-during-set on every target)", len(rb.Status.Results), len(targets)*(len(commands)+1))
	}
	for _, target := range targets {
		seen := map[string]bool{}
		for _, r := range rb.Status.Results {
			if r.Target != target.name {
				continue
			}
			seen[r.Command] = true
			if r.Mode != target.mode || r.OpsPerSecond <= 0 || r.P99Micros <= 0 || r.CPUMicrosPerKop <= 0 {
				t.Errorf("%s %s: mode %q (want %q), %d ops/s, p99 %d µs, %d CPU µs/kop", target.name, r.Command, r.Mode, target.mode, r.OpsPerSecond, r.P99Micros, r.CPUMicrosPerKop)
			}
			uring := strings.HasPrefix(target.mode, "uring")
			if uring && r.Engine != "uring" {
				t.Errorf("%s %s: engine %q, want uring", target.name, r.Command, r.Engine)
			}
			if uring && r.Command != "get-during-set" && r.FsyncCount == 0 {
				t.Errorf("%s %s: the uring engine reported no fsync during a write workload", target.name, r.Command)
			}
		}
		for _, c := range append(commands, "get-during-set") {
			if !seen[string(c)] {
				t.Errorf("%s: no result for %s", target.name, c)
			}
		}
	}

	if len(rb.Status.CrashChecks) != len(targets) {
		t.Fatalf("%d crash checks, want %d: %+v", len(rb.Status.CrashChecks), len(targets), rb.Status.CrashChecks)
	}
	for _, cc := range rb.Status.CrashChecks {
		t.Logf("crash check %s (%s): %d acknowledged, %d lost, durable=%v", cc.Target, cc.Mode, cc.AcknowledgedKeys, cc.LostKeys, cc.Durable)
		durable := cc.Mode == "aof-always" || cc.Mode == "uring-durable"
		if cc.AcknowledgedKeys == 0 || cc.Durable != durable || (durable && cc.LostKeys != 0) {
			t.Errorf("crash check %s: %+v (a durable mode must lose nothing)", cc.Target, cc)
		}
	}

	// The application's keys are untouched, and the benchmark's are gone.
	if got := cli(t, "cmp-always", "DBSIZE"); got != fmt.Sprint(len(appKeys)) {
		t.Errorf("db 0 of cmp-always holds %s keys after the benchmark, want the application's %d", got, len(appKeys))
	}
	for k, v := range appKeys {
		if got := cli(t, "cmp-always", "GET", k); got != v {
			t.Errorf("%s = %q after the benchmark, want %q", k, got, v)
		}
	}
	for _, target := range targets {
		if got := cli(t, target.name, "-n", "15", "DBSIZE"); got != "0" {
			t.Errorf("%s: the benchmark left %s keys in its database 15", target.name, got)
		}
	}

	// The operator exports the results for the "Persistence modes compared"
	// dashboard; read them where Prometheus would.
	metrics := operatorMetrics(t)
	for _, target := range targets {
		want := fmt.Sprintf(`uringredis_benchmark_ops_per_second{benchmark="modes",command="set",mode="%s",namespace="%s",target="%s"}`, target.mode, namespace, target.name)
		if !strings.Contains(metrics, want) {
			t.Errorf("the operator's metrics lack %s", want)
		}
	}
}

// waitBenchmark waits until the benchmark's Complete condition has reason.
func waitBenchmark(t *testing.T, rb *v1alpha1.RedisBenchmark, timeout time.Duration, reason string) {
	t.Helper()
	var c *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(rb), rb); err != nil {
			return false, err
		}
		c = meta.FindStatusCondition(rb.Status.Conditions, v1alpha1.ConditionComplete)
		return c != nil && c.Reason == reason, nil
	})
	if wait.Interrupted(err) {
		t.Fatalf("RedisBenchmark %s: Complete is %+v after %s, want reason %s", rb.Name, c, timeout, reason)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("RedisBenchmark %s: %s: %s", rb.Name, c.Reason, c.Message)
}

// waitBenchmarkComplete waits until the benchmark is Complete, and fails
// with the runner's log when it fails or runs out of time.
func waitBenchmarkComplete(t *testing.T, rb *v1alpha1.RedisBenchmark, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(rb), rb); err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(rb.Status.Conditions, v1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
			return false, fmt.Errorf("benchmark failed: %s: %s", c.Reason, c.Message)
		}
		return meta.IsStatusConditionTrue(rb.Status.Conditions, v1alpha1.ConditionComplete), nil
	})
	if wait.Interrupted(err) {
		t.Fatalf("benchmark %s not complete after %s: %+v\n%s", rb.Name, timeout, rb.Status, benchmarkLogs(rb))
	} else if err != nil {
		t.Fatalf("%v\n%s", err, benchmarkLogs(rb))
	}
}

// benchmarkLogs is the end of every runner's log of rb: a failed Job is no
// longer status.currentJob.
func benchmarkLogs(rb *v1alpha1.RedisBenchmark) string {
	cmd := append(append([]string{}, kubectl[1:]...), "-n", namespace, "logs", "--prefix", "--tail", "30",
		"-l", "app.kubernetes.io/name=redis-benchmark,app.kubernetes.io/instance="+rb.Name)
	out, err := execOutput(kubectl[0], cmd...)
	if err != nil {
		return fmt.Sprintf("the runners' logs: %v\n%s", err, out)
	}
	return out
}

func envInt(t *testing.T, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil {
		t.Fatalf("%s=%q: %v", key, v, err)
	}
	return n
}

// operatorMetrics reads the operator's /metrics as an authorized reader.
func operatorMetrics(t *testing.T) string {
	t.Helper()
	code, body := scrapeOperator(t, metricsReaderToken(t))
	if code != http.StatusOK {
		t.Fatalf("the operator's metrics: status %d: %.300s", code, body)
	}
	return body
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
