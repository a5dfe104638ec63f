package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
)

// createTarget creates a RedisPersistence for a benchmark to drive. Its
// volume claim names a class no volume has, so it never takes one of the
// volumes the RedisPersistence tests schedule onto.
func createTarget(t *testing.T, ns, name string, spec v1alpha1.RedisPersistenceSpec) {
	t.Helper()
	spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "benchmark-targets-unbound"}
	createRP(t, ns, name, spec)
}

func createBenchmark(t *testing.T, ns, name string, spec v1alpha1.RedisBenchmarkSpec) {
	t.Helper()
	rb := &v1alpha1.RedisBenchmark{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if err := k8s.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
}

// waitJob waits for the benchmark Job and returns it.
func waitJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	eventually(t, 30*time.Second, func() error { return get(t, job, ns, name) })
	return job
}

// finishJobPod plays the kubelet for the pod the real Job controller created:
// the runner container terminated with exitCode and message.
func finishJobPod(t *testing.T, ns, job string, exitCode int32, message string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		var pods corev1.PodList
		if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{labelJobName: job}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("Job %s has %d pods, want 1", job, len(pods.Items))
		}
		pod := pods.Items[0]
		now := metav1.Now()
		phase, reason := corev1.PodSucceeded, "Completed"
		if exitCode != 0 {
			phase, reason = corev1.PodFailed, "Error"
		}
		pod.Status.Phase = phase
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: containerBench, Image: pod.Spec.Containers[0].Image, ImageID: "bench@sha256:0",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Reason: reason, Message: message, StartedAt: now, FinishedAt: now,
			}},
		}}
		return k8s.Status().Update(context.Background(), &pod)
	})
}

func runnerResult(t *testing.T, target, mode string, commands []string, base float64, crash *bench.CrashResult) string {
	t.Helper()
	r := bench.Result{Target: target, Mode: mode, Engine: "posix", Crash: crash}
	for i, c := range commands {
		r.Commands = append(r.Commands, bench.CommandResult{
			Command: c, OpsPerSecond: base + float64(i), P50Micros: 100, P99Micros: 900, P999Micros: 2000,
			CPUMicrosPerKop: 15000, FsyncCount: 40, FsyncP50Micros: 500, FsyncP99Micros: 2500, RSSBytes: 1 << 20,
		})
	}
	b, err := bench.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitBenchmark(t *testing.T, ns, name string, check func(*v1alpha1.RedisBenchmark) error) *v1alpha1.RedisBenchmark {
	t.Helper()
	rb := &v1alpha1.RedisBenchmark{}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rb, ns, name); err != nil {
			return err
		}
		return check(rb)
	})
	return rb
}

func hasCondition(rb *v1alpha1.RedisBenchmark, condType string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(rb.Status.Conditions, condType)
	if c == nil || c.Status != status || c.Reason != reason {
		return fmt.Errorf("condition %s = %+v, want %s/%s", condType, c, status, reason)
	}
	return nil
}

// assertNoJob checks the Job stays absent for a while: targets must not overlap.
func assertNoJob(t *testing.T, ns, name string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := get(t, &batchv1.Job{}, ns, name); !apierrors.IsNotFound(err) {
			t.Fatalf("Job %s exists (err %v) while an earlier target still runs", name, err)
		}
	}
}

func TestBenchmarkRunsTargetsOneAfterAnother(t *testing.T) {
	ns := newNamespace(t)
	createTarget(t, ns, "always", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}})
	createTarget(t, ns, "durable", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	createBenchmark(t, ns, "compare", v1alpha1.RedisBenchmarkSpec{
		Targets:  []string{"always", "durable"},
		Workload: v1alpha1.BenchmarkWorkload{Commands: []v1alpha1.BenchmarkCommand{"set", "incr"}, Requests: 2000},
	})

	first := waitJob(t, ns, "compare-0")
	args := strings.Join(first.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--addr=always." + ns + ".svc:6379", "--target=always", "--mode=aof-always", "--commands=set,incr", "--requests=2000", "--clients=50"} {
		if !strings.Contains(args, want) {
			t.Errorf("first Job's args %q lack %q", args, want)
		}
	}
	if img := first.Spec.Template.Spec.Containers[0].Image; img != "uring-redis-bench:test" {
		t.Errorf("runner image = %q, want the operator's --bench-image", img)
	}
	waitBenchmark(t, ns, "compare", func(rb *v1alpha1.RedisBenchmark) error {
		if rb.Status.CurrentJob != "compare-0" {
			return fmt.Errorf("currentJob = %q", rb.Status.CurrentJob)
		}
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionFalse, ReasonBenchmarkRunning)
	})
	assertNoJob(t, ns, "compare-1")

	finishJobPod(t, ns, "compare-0", 0, runnerResult(t, "always", "aof-always", []string{"set", "incr"}, 1000, nil))
	second := waitJob(t, ns, "compare-1")
	if args := strings.Join(second.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--mode=uring-durable") {
		t.Errorf("second Job's args %q lack --mode=uring-durable", args)
	}
	rb := waitBenchmark(t, ns, "compare", func(rb *v1alpha1.RedisBenchmark) error {
		if rb.Status.CompletedTargets != 1 || len(rb.Status.Results) != 2 {
			return fmt.Errorf("completedTargets %d, %d results", rb.Status.CompletedTargets, len(rb.Status.Results))
		}
		return nil
	})
	if got := rb.Status.Results[1]; got.Target != "always" || got.Command != "incr" || got.OpsPerSecond != 1001 || got.FsyncP99Micros != 2500 {
		t.Errorf("second result = %+v", got)
	}

	finishJobPod(t, ns, "compare-1", 0, runnerResult(t, "durable", "uring-durable", []string{"set", "incr"}, 3000, nil))
	rb = waitBenchmark(t, ns, "compare", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonBenchmarkSucceeded)
	})
	if err := hasCondition(rb, v1alpha1.ConditionFailed, metav1.ConditionFalse, ReasonNoFailure); err != nil {
		t.Error(err)
	}
	var order []string
	for _, r := range rb.Status.Results {
		order = append(order, r.Target+"/"+r.Command)
	}
	if want := []string{"always/set", "always/incr", "durable/set", "durable/incr"}; !slices.Equal(order, want) {
		t.Errorf("results in order %v, want %v", order, want)
	}
	if rb.Status.CurrentJob != "" || rb.Status.ObservedGeneration != rb.Generation {
		t.Errorf("currentJob %q, observedGeneration %d (generation %d)", rb.Status.CurrentJob, rb.Status.ObservedGeneration, rb.Generation)
	}
	// The metrics follow the status patch: the reconcile exports them once
	// the patch has succeeded, a moment after the status shows Complete.
	eventually(t, 10*time.Second, func() error {
		if got := testutil.ToFloat64(benchmarkOpsPerSecond.WithLabelValues(ns, "compare", "durable", "uring-durable", "set")); got != 3000 {
			return fmt.Errorf("uringredis_benchmark_ops_per_second for durable/set = %v, want 3000", got)
		}
		return nil
	})

	// Deleting the benchmark drops its series.
	if err := k8s.Delete(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if n := countSeries(t, ns, "uringredis_benchmark_ops_per_second"); n != 0 {
			return fmt.Errorf("%d series of the deleted benchmark remain", n)
		}
		return nil
	})
}

func TestBenchmarkStopsAtAFailedJob(t *testing.T) {
	ns := newNamespace(t)
	createTarget(t, ns, "a", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	createTarget(t, ns, "b", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	createBenchmark(t, ns, "fails", v1alpha1.RedisBenchmarkSpec{Targets: []string{"a", "b"}})
	waitJob(t, ns, "fails-0")
	finishJobPod(t, ns, "fails-0", 1, "valkey-benchmark: connection refused")
	rb := waitBenchmark(t, ns, "fails", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionFailed, metav1.ConditionTrue, ReasonJobFailed)
	})
	if err := hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionFalse, ReasonBenchmarkFailed); err != nil {
		t.Error(err)
	}
	assertNoJob(t, ns, "fails-1")
	eventually(t, 10*time.Second, func() error {
		if got := testutil.ToFloat64(benchmarkFailed.WithLabelValues(ns, "fails")); got != 1 {
			return fmt.Errorf("uringredis_benchmark_failed = %v, want 1", got)
		}
		return nil
	})
}

func TestBenchmarkRejectsAResultForAnotherTarget(t *testing.T) {
	ns := newNamespace(t)
	createTarget(t, ns, "a", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	createBenchmark(t, ns, "mixup", v1alpha1.RedisBenchmarkSpec{Targets: []string{"a"}})
	waitJob(t, ns, "mixup-0")
	finishJobPod(t, ns, "mixup-0", 0, runnerResult(t, "someone-else", "none", []string{"set"}, 10, nil))
	rb := waitBenchmark(t, ns, "mixup", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionFailed, metav1.ConditionTrue, ReasonResultInvalid)
	})
	if len(rb.Status.Results) != 0 {
		t.Errorf("results from a foreign result: %+v", rb.Status.Results)
	}
}

func TestBenchmarkWaitsForItsTarget(t *testing.T) {
	ns := newNamespace(t)
	createBenchmark(t, ns, "early", v1alpha1.RedisBenchmarkSpec{Targets: []string{"later"}})
	waitBenchmark(t, ns, "early", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionFalse, ReasonTargetNotFound)
	})
	assertNoJob(t, ns, "early-0")
	createTarget(t, ns, "later", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	waitJob(t, ns, "early-0")
}

func TestBenchmarkCrashCheck(t *testing.T) {
	ns := newNamespace(t)
	createTarget(t, ns, "always", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}})
	createTarget(t, ns, "fast", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckFast}})
	createBenchmark(t, ns, "crash", v1alpha1.RedisBenchmarkSpec{
		Targets:    []string{"fast", "always"},
		CrashCheck: &v1alpha1.CrashCheckSpec{},
	})
	job := waitJob(t, ns, "crash-0")
	if sa := job.Spec.Template.Spec.ServiceAccountName; sa != "crash-crash-check" {
		t.Errorf("runner ServiceAccount = %q", sa)
	}
	role := &rbacv1.Role{}
	if err := get(t, role, ns, "crash-crash-check"); err != nil {
		t.Fatal(err)
	}
	if pods := role.Rules[1].ResourceNames; !slices.Equal(pods, []string{"fast-0", "always-0"}) {
		t.Errorf("the Role lets the runner exec into %v, want exactly the target pods", pods)
	}
	// A fast ack may lose writes: reported, not a failure.
	finishJobPod(t, ns, "crash-0", 0, runnerResult(t, "fast", "uring-fast", []string{"set"}, 10, &bench.CrashResult{Acknowledged: 5000, Lost: 12}))
	waitJob(t, ns, "crash-1")
	// A durable mode that loses an acknowledged write fails the benchmark.
	finishJobPod(t, ns, "crash-1", 0, runnerResult(t, "always", "aof-always", []string{"set"}, 10, &bench.CrashResult{Acknowledged: 5000, Lost: 1}))
	rb := waitBenchmark(t, ns, "crash", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionFailed, metav1.ConditionTrue, ReasonAcknowledgedLost)
	})
	want := []v1alpha1.CrashCheckResult{
		{Target: "fast", Mode: "uring-fast", AcknowledgedKeys: 5000, LostKeys: 12, Durable: false},
		{Target: "always", Mode: "aof-always", AcknowledgedKeys: 5000, LostKeys: 1, Durable: true},
	}
	if !slices.Equal(rb.Status.CrashChecks, want) {
		t.Errorf("crashChecks = %+v, want %+v", rb.Status.CrashChecks, want)
	}
}
