package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/benchreport"
)

// benchTarget creates an instance of mode that allows benchmarks, or not.
func benchTarget(t *testing.T, namespace, name string, mode v1alpha1.PersistenceMode, allows bool) {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: mode},
	}
	if allows {
		rp.Spec.Benchmark = &v1alpha1.BenchmarkAccessSpec{CrashCheck: name != "no-crash"}
	}
	create(t, rp, v1alpha1.RedisPersistenceStatus{})
}

// runBench runs `kubectl uring bench args...` while operate plays the
// operator on the RedisBenchmark it creates (named name), and returns what
// the command printed and its error.
func runBench(t *testing.T, namespace, name string, operate func(b *v1alpha1.RedisBenchmark), args ...string) (stdout, stderr string, err error) {
	t.Helper()
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, 1)
	go func() {
		o, e, err := run(t, append([]string{"-n", namespace, "bench", "--name", name}, args...)...)
		done <- result{o, e, err}
	}()
	b := &v1alpha1.RedisBenchmark{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, b)
		if err == nil {
			break
		}
		select {
		case r := <-done:
			return r.stdout, r.stderr, r.err
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no RedisBenchmark %s 30 s after bench started: %v", name, err)
		}
	}
	operate(b)
	r := <-done
	return r.stdout, r.stderr, r.err
}

// setBenchmarkStatus writes status as the operator would.
func setBenchmarkStatus(t *testing.T, b *v1alpha1.RedisBenchmark, status v1alpha1.RedisBenchmarkStatus) {
	t.Helper()
	b.Status = status
	if err := k8s.Status().Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// TestBenchPrintsTheDemoTable: bench creates the RedisBenchmark its flags
// describe, follows it while it runs, and prints the table benchreport
// makes of its results (the one `make demo` prints), figures included.
func TestBenchPrintsTheDemoTable(t *testing.T) {
	ns := namespace(t)
	benchTarget(t, ns, "always", v1alpha1.ModeAOF, true)
	benchTarget(t, ns, "durable", v1alpha1.ModeUring, true)
	results := []v1alpha1.BenchmarkResult{
		{Target: "always", Mode: "aof-always", Engine: "posix", Command: "set", OpsPerSecond: 12345, CPUMicrosPerKop: 20000, P99Micros: 4000, FsyncP99Micros: 1000},
		{Target: "durable", Mode: "uring-durable", Engine: "uring", Command: "set", OpsPerSecond: 18518, CPUMicrosPerKop: 15000, P99Micros: 3000, FsyncP99Micros: 900},
	}
	var specSeen v1alpha1.RedisBenchmarkSpec
	stdout, stderr, err := runBench(t, ns, "modes", func(b *v1alpha1.RedisBenchmark) {
		specSeen = b.Spec
		setBenchmarkStatus(t, b, v1alpha1.RedisBenchmarkStatus{CompletedRuns: 1, CurrentJob: "modes-durable-1",
			Conditions: []metav1.Condition{condition(v1alpha1.ConditionComplete, metav1.ConditionFalse, "Running", "", 0)}})
		time.Sleep(300 * time.Millisecond) // several of the plugin's reads
		setBenchmarkStatus(t, b, v1alpha1.RedisBenchmarkStatus{CompletedRuns: 4, Results: results,
			Conditions: []metav1.Condition{condition(v1alpha1.ConditionComplete, metav1.ConditionTrue, "Completed", "", 0)}})
	}, "always", "durable", "--commands", "set,incr", "--clients", "8", "--requests", "20000", "--repetitions", "2",
		"--crash-check", "--crash-check-seconds", "3", "--runner-cpu", "500m")
	if err != nil {
		t.Fatalf("bench: %v\n%s%s", err, stdout, stderr)
	}
	want := v1alpha1.BenchmarkWorkload{Commands: []v1alpha1.BenchmarkCommand{"set", "incr"}, Clients: 8, Requests: 20000}
	if !slices.Equal(specSeen.Targets, []string{"always", "durable"}) || !slices.Equal(specSeen.Workload.Commands, want.Commands) ||
		specSeen.Workload.Clients != want.Clients || specSeen.Workload.Requests != want.Requests || specSeen.Repetitions != 2 {
		t.Errorf("the RedisBenchmark's spec is %+v; want targets always, durable, workload %+v, 2 repetitions", specSeen, want)
	}
	if c := specSeen.CrashCheck; c == nil || c.Clients != 8 || c.WriteSeconds != 3 {
		t.Errorf("the RedisBenchmark's crashCheck is %+v, want 8 clients writing 3 s", c)
	}
	if r := specSeen.Resources; r == nil || r.Requests.Cpu().String() != "500m" {
		t.Errorf("the RedisBenchmark's runner resources are %+v, want a 500m CPU request", r)
	}
	var table bytes.Buffer
	if err := benchreport.Table(&table, results, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(stdout, table.String()) || !strings.Contains(table.String(), "18518") {
		t.Errorf("bench printed:\n%s\nwant it to end with benchreport's table:\n%s", stdout, table.String())
	}
	for _, progress := range []string{"redisbenchmark/modes created: always, durable, 2 repetition(s) of set incr, 20000 requests, 8 clients",
		"modes: 1 of 4 runs done, Job modes-durable-1 running", "modes: Complete, 4 of 4 runs"} {
		if !strings.Contains(stdout, progress) {
			t.Errorf("bench printed:\n%s\nwithout %q", stdout, progress)
		}
	}

	// -o json: the RedisBenchmark itself, the progress on stderr.
	stdout, stderr, err = runBench(t, ns, "modes-json", func(b *v1alpha1.RedisBenchmark) {
		setBenchmarkStatus(t, b, v1alpha1.RedisBenchmarkStatus{CompletedRuns: 2, Results: results,
			Conditions: []metav1.Condition{condition(v1alpha1.ConditionComplete, metav1.ConditionTrue, "Completed", "", 0)}})
	}, "always", "durable", "-o", "json")
	if err != nil {
		t.Fatalf("bench -o json: %v\n%s", err, stderr)
	}
	var printed v1alpha1.RedisBenchmark
	if err := json.Unmarshal([]byte(stdout), &printed); err != nil || len(printed.Status.Results) != 2 || printed.Status.Results[1].OpsPerSecond != 18518 {
		t.Errorf("bench -o json printed %q (%v); want the RedisBenchmark with its 2 results", stdout, err)
	}
	if !strings.Contains(stderr, "Complete, 2 of 2 runs") {
		t.Errorf("bench -o json: progress %q on stderr, want Complete", stderr)
	}
}

// TestBenchFails: a benchmark that Failed exits non-zero with the
// operator's reason and message; a target that does not allow benchmarks,
// or does not exist, is refused before anything is created; the API
// server's validation of the workload reaches the user.
func TestBenchFails(t *testing.T) {
	ns := namespace(t)
	benchTarget(t, ns, "open", v1alpha1.ModeUring, true)
	benchTarget(t, ns, "closed", v1alpha1.ModeUring, false)
	benchTarget(t, ns, "no-crash", v1alpha1.ModeUring, true)

	stdout, _, err := runBench(t, ns, "failing", func(b *v1alpha1.RedisBenchmark) {
		setBenchmarkStatus(t, b, v1alpha1.RedisBenchmarkStatus{Conditions: []metav1.Condition{
			condition(v1alpha1.ConditionFailed, metav1.ConditionTrue, "JobFailed", "the Job failing-open-1 failed: crash check lost 3 acknowledged keys", 0)}})
	}, "open")
	if err == nil || !strings.Contains(err.Error(), "JobFailed") || !strings.Contains(err.Error(), "lost 3 acknowledged keys") {
		t.Errorf("bench of a Failed benchmark: %v; want the condition's reason and message", err)
	}
	if strings.Contains(stdout, "ops/s") {
		t.Errorf("bench of a Failed benchmark printed a table:\n%s", stdout)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"open", "closed"}, "closed does not allow benchmarks: set spec.benchmark"},
		{[]string{"open", "missing"}, `no RedisPersistence "missing"`},
		{[]string{"open", "--commands", "flushall"}, "Unsupported value: \"flushall\""},
		{[]string{"open", "--clients", "5000"}, "workload.clients"},
		{[]string{"open", "--runner-cpu", "half"}, "--runner-cpu half"},
		{[]string{"open", "no-crash", "--crash-check"}, "no-crash does not allow the crash check"},
	} {
		name := fmt.Sprintf("refused-%d", len(tc.want))
		_, _, err := run(t, append([]string{"-n", ns, "bench", "--name", name}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: %v; want an error with %q", tc.args, err, tc.want)
		}
		list := &v1alpha1.RedisBenchmarkList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, b := range list.Items {
			if b.Name == name {
				t.Errorf("bench %v created the RedisBenchmark %s though it refused", tc.args, name)
			}
		}
	}
}
