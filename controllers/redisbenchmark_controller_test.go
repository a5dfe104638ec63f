package controllers

import (
	"context"
	"fmt"
	"path/filepath"
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
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// createTarget creates a RedisPersistence that allows benchmarks (and their
// crash check) and brings it to Ready: the real scheduler binds its pod to a
// volume of its own, a real server runs behind it and the test reports the
// pod running, as a kubelet would.
func createTarget(t *testing.T, ns, name string, spec v1alpha1.RedisPersistenceSpec) {
	t.Helper()
	if spec.Benchmark == nil {
		spec.Benchmark = &v1alpha1.BenchmarkAccessSpec{CrashCheck: true}
	}
	createRP(t, ns, name, spec)
	makeReady(t, ns, name)
}

// makeReady runs a real server behind the RedisPersistence's pod and reports
// the pod running once it is scheduled.
func makeReady(t *testing.T, ns, name string) {
	t.Helper()
	ensureNodes(t)
	waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	serverAddrs.Store(ns+"/"+name+"-0", testenv.StartServer(t, renderedConfig(t, ns, name)))
	actAsKubelet(t, ns, name+"-0", "ext4")
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
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
	finishJobPodOf(t, ns, job, specs.ContainerBench, exitCode, message)
}

// finishJobPodOf finishes the Job's pod that has not finished yet, its
// container terminated with exitCode and message.
func finishJobPodOf(t *testing.T, ns, job, container string, exitCode int32, message string) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		var pods corev1.PodList
		if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{specs.LabelJobName: job}); err != nil {
			return err
		}
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				running = append(running, p)
			}
		}
		if len(running) != 1 {
			return fmt.Errorf("Job %s has %d unfinished pods, want 1", job, len(running))
		}
		pod := running[0]
		now := metav1.Now()
		phase, reason := corev1.PodSucceeded, "Completed"
		if exitCode != 0 {
			phase, reason = corev1.PodFailed, "Error"
		}
		pod.Status.Phase = phase
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: container, Image: pod.Spec.Containers[0].Image, ImageID: "bench@sha256:0",
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
	if d := first.Spec.ActiveDeadlineSeconds; d == nil || *d != 3600 {
		t.Errorf("the Job's activeDeadlineSeconds = %v, want the default 3600", d)
	}
	if !strings.Contains(args, "--db=15") {
		t.Errorf("first Job's args %q do not write to the target's benchmark database 15", args)
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

// TestBenchmarkRepetitionsInterleave: with repetitions every target runs
// once per repetition, round by round, so that a slow spell of the node falls
// on every target; each command's result is its median repetition, and the
// crash check, which restarts the server, runs only in the last one.
func TestBenchmarkRepetitionsInterleave(t *testing.T) {
	ns := newNamespace(t)
	createTarget(t, ns, "always", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}})
	createTarget(t, ns, "durable", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	createBenchmark(t, ns, "rounds", v1alpha1.RedisBenchmarkSpec{
		Targets:     []string{"always", "durable"},
		Workload:    v1alpha1.BenchmarkWorkload{Commands: []v1alpha1.BenchmarkCommand{"set", "incr"}, Requests: 2000},
		Repetitions: 3,
		CrashCheck:  &v1alpha1.CrashCheckSpec{},
	})

	// Run order and each run's throughput: always's set runs 1000, 3000 and
	// 2000 ops/s in its three repetitions, durable's 500, 400 and 600.
	runs := []struct {
		target, mode string
		base         float64
	}{
		{"always", "aof-always", 1000}, {"durable", "uring-durable", 500},
		{"always", "aof-always", 3000}, {"durable", "uring-durable", 400},
		{"always", "aof-always", 2000}, {"durable", "uring-durable", 600},
	}
	for i, run := range runs {
		name := fmt.Sprintf("rounds-%d", i)
		job := waitJob(t, ns, name)
		args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
		if !strings.Contains(args, "--target="+run.target) {
			t.Fatalf("Job %s has args %q, want target %s (repetitions interleave)", name, args, run.target)
		}
		last := i >= 4
		if got := strings.Contains(args, "--crash-check"); got != last {
			t.Errorf("Job %s runs the crash check: %v, want %v (only in the last repetition)", name, got, last)
		}
		waitBenchmark(t, ns, "rounds", func(rb *v1alpha1.RedisBenchmark) error {
			if rb.Status.CurrentJob != name {
				return fmt.Errorf("currentJob = %q, want %s", rb.Status.CurrentJob, name)
			}
			return nil
		})
		if i+1 < len(runs) {
			assertNoJob(t, ns, fmt.Sprintf("rounds-%d", i+1))
		}
		var crash *bench.CrashResult
		if last {
			crash = &bench.CrashResult{Acknowledged: 100}
		}
		finishJobPod(t, ns, name, 0, runnerResult(t, run.target, run.mode, []string{"set", "incr"}, run.base, crash))
		if i == 1 {
			// After one repetition of each, no target has all of its.
			rb := waitBenchmark(t, ns, "rounds", func(rb *v1alpha1.RedisBenchmark) error {
				if rb.Status.CompletedRuns != 2 {
					return fmt.Errorf("completedRuns %d, want 2", rb.Status.CompletedRuns)
				}
				return nil
			})
			if rb.Status.CompletedTargets != 0 || len(rb.Status.Results) != 0 || len(rb.Status.Runs) != 4 {
				t.Errorf("after the first repetition: completedTargets %d, %d results, %d runs; want 0, 0, 4",
					rb.Status.CompletedTargets, len(rb.Status.Results), len(rb.Status.Runs))
			}
		}
	}

	rb := waitBenchmark(t, ns, "rounds", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonBenchmarkSucceeded)
	})
	var got []string
	for _, r := range rb.Status.Results {
		got = append(got, fmt.Sprintf("%s/%s=%d@%d", r.Target, r.Command, r.OpsPerSecond, r.Repetition))
	}
	want := []string{"always/set=2000@3", "always/incr=2001@3", "durable/set=500@1", "durable/incr=501@1"}
	if !slices.Equal(got, want) {
		t.Errorf("results %v, want the median repetitions %v", got, want)
	}
	if len(rb.Status.Runs) != 12 || rb.Status.CompletedRuns != 6 || rb.Status.CompletedTargets != 2 {
		t.Errorf("%d runs, completedRuns %d, completedTargets %d; want 12, 6, 2", len(rb.Status.Runs), rb.Status.CompletedRuns, rb.Status.CompletedTargets)
	}
	if len(rb.Status.CrashChecks) != 2 {
		t.Errorf("%d crash checks, want one per target", len(rb.Status.CrashChecks))
	}
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
	// The runner kills the server over the Redis protocol: it gets no
	// Kubernetes credentials, and the operator makes no RBAC objects.
	pod := job.Spec.Template.Spec
	if pod.ServiceAccountName != "" || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("runner ServiceAccount %q, automount %v: the crash check needs no API access", pod.ServiceAccountName, pod.AutomountServiceAccountToken)
	}
	if args := strings.Join(pod.Containers[0].Args, " "); !strings.Contains(args, "--crash-check") || strings.Contains(args, "--crash-pod") {
		t.Errorf("runner args %q", args)
	}
	var roles rbacv1.RoleList
	if err := k8s.List(context.Background(), &roles, client.InNamespace(ns)); err != nil || len(roles.Items) != 0 {
		t.Errorf("the benchmark made %d Roles (err %v)", len(roles.Items), err)
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

// TestBenchmarkNeedsTheTargetsConsent: a RedisPersistence without
// spec.benchmark is not benchmarked, and one that allows benchmarks but not
// the crash check is not killed; each benchmark says why it waits, and goes
// on once the owner allows it.
func TestBenchmarkNeedsTheTargetsConsent(t *testing.T) {
	ns := newNamespace(t)
	createRP(t, ns, "private", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF})
	makeReady(t, ns, "private")
	createBenchmark(t, ns, "uninvited", v1alpha1.RedisBenchmarkSpec{Targets: []string{"private"}})
	waitBenchmark(t, ns, "uninvited", func(rb *v1alpha1.RedisBenchmark) error {
		c := meta.FindStatusCondition(rb.Status.Conditions, v1alpha1.ConditionComplete)
		if c == nil || !strings.Contains(c.Message, "set its spec.benchmark") {
			return fmt.Errorf("Complete = %+v, want a message naming spec.benchmark", c)
		}
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionFalse, ReasonTargetNotOptedIn)
	})
	assertNoJob(t, ns, "uninvited-0")

	updateRP(t, ns, "private", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Benchmark = &v1alpha1.BenchmarkAccessSpec{} })
	waitJob(t, ns, "uninvited-0")
	finishJobPod(t, ns, "uninvited-0", 0, runnerResult(t, "private", "aof-everysec", []string{"set"}, 10, nil))
	waitBenchmark(t, ns, "uninvited", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonBenchmarkSucceeded)
	})

	createBenchmark(t, ns, "killer", v1alpha1.RedisBenchmarkSpec{Targets: []string{"private"}, CrashCheck: &v1alpha1.CrashCheckSpec{}})
	waitBenchmark(t, ns, "killer", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionFalse, ReasonCrashCheckNotAllowed)
	})
	assertNoJob(t, ns, "killer-0")
	if config := renderedConfig(t, ns, "private"); !strings.Contains(config, "enable-debug-command no\n") {
		t.Errorf("a server that does not allow the crash check runs DEBUG:\n%s", config)
	}
}

// TestBenchmarkWaitsForAReadyTarget: a target that exists but does not serve
// yet gets no Job (whose backoffLimit 0 would fail the benchmark at once).
func TestBenchmarkWaitsForAReadyTarget(t *testing.T) {
	ns := newNamespace(t)
	createRP(t, ns, "starting", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, Benchmark: &v1alpha1.BenchmarkAccessSpec{}})
	createBenchmark(t, ns, "eager", v1alpha1.RedisBenchmarkSpec{Targets: []string{"starting"}})
	waitBenchmark(t, ns, "eager", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionFalse, ReasonTargetNotReady)
	})
	assertNoJob(t, ns, "eager-0")
	makeReady(t, ns, "starting")
	waitJob(t, ns, "eager-0")
}

// TestOneBenchmarkPerTarget: a second benchmark of a target waits, naming
// the one that runs, and starts when it is done.
func TestOneBenchmarkPerTarget(t *testing.T) {
	ns := newNamespace(t)
	createTarget(t, ns, "shared", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	createBenchmark(t, ns, "first", v1alpha1.RedisBenchmarkSpec{Targets: []string{"shared"}})
	waitJob(t, ns, "first-0")
	createBenchmark(t, ns, "second", v1alpha1.RedisBenchmarkSpec{Targets: []string{"shared"}})
	waitBenchmark(t, ns, "second", func(rb *v1alpha1.RedisBenchmark) error {
		c := meta.FindStatusCondition(rb.Status.Conditions, v1alpha1.ConditionComplete)
		if c == nil || !strings.Contains(c.Message, "RedisBenchmark first") {
			return fmt.Errorf("Complete = %+v, want a message naming the running benchmark", c)
		}
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionFalse, ReasonTargetBusy)
	})
	assertNoJob(t, ns, "second-0")
	finishJobPod(t, ns, "first-0", 0, runnerResult(t, "shared", "none", []string{"set"}, 10, nil))
	waitJob(t, ns, "second-0")
}

// TestBenchmarkWhoseResultIsGoneFails: a Job that succeeded but whose pod is
// gone (garbage-collected, deleted by hand) fails the benchmark with a reason
// instead of waiting for the pod forever.
func TestBenchmarkWhoseResultIsGoneFails(t *testing.T) {
	ns := newNamespace(t)
	createBenchmark(t, ns, "lost", v1alpha1.RedisBenchmarkSpec{Targets: []string{"gone"}})
	rb := waitBenchmark(t, ns, "lost", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionFalse, ReasonTargetNotFound)
	})
	// The Job of the first target, finished, its pod gone: suspended, the real
	// Job controller never makes one.
	job := specs.BenchmarkJob(rb, specs.RunAt(rb, 0), &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns}}, specs.BenchmarkOptions{Image: "uring-redis-bench:test"})
	job.Spec.Suspend = ptr.To(true)
	if err := k8s.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, job, ns, job.Name); err != nil {
			return err
		}
		now := metav1.Now()
		job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		}
		return k8s.Status().Update(context.Background(), job)
	})
	waitBenchmark(t, ns, "lost", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionFailed, metav1.ConditionTrue, ReasonResultLost)
	})
}

// TestBenchmarkReconcilesAreBounded: RedisBenchmarks reconcile on several
// workers, and every call a reconcile makes carries a deadline, as the
// RedisPersistence controller's do.
func TestBenchmarkReconcilesAreBounded(t *testing.T) {
	if got := workersOf(t, "redisbenchmark"); got < 2 {
		t.Errorf("the RedisBenchmark controller runs %v workers, want more than one", got)
	}
	var deadlines []time.Duration
	admin, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	bounded := &RedisBenchmarkReconciler{
		Client: interceptor.NewClient(admin, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			deadline, ok := ctx.Deadline()
			if !ok {
				deadlines = append(deadlines, -1)
			} else {
				deadlines = append(deadlines, time.Until(deadline))
			}
			return c.Get(ctx, key, obj, opts...)
		}}),
		APIReader: k8s,
		Recorder:  &record.FakeRecorder{},
	}
	if _, err := bounded.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: "absent"}}); err != nil {
		t.Fatal(err)
	}
	if len(deadlines) == 0 || deadlines[0] <= 0 || deadlines[0] > reconcileTimeout {
		t.Errorf("the reconcile's API calls ran with deadlines %v, want at most %s", deadlines, reconcileTimeout)
	}
}

// workersOf reads controller-runtime's controller_runtime_max_concurrent_reconciles of a controller.
func workersOf(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "controller_runtime_max_concurrent_reconciles" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no controller_runtime_max_concurrent_reconciles for controller %s", name)
	return 0
}

// TestBenchmarkSignsInAsItsUser: the runner's Job signs in as the benchmark
// user with the password of the Secret <target>-acl. The real runner, with
// the Job's environment resolved, claims its database, measures and cleans
// up on the target's real server (its users rendered by the prepare
// script); the server refuses it nothing but valkey-benchmark's CONFIG GET,
// and lets it kill the server for the crash check the target allows.
func TestBenchmarkSignsInAsItsUser(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createTarget(t, ns, "target", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	createBenchmark(t, ns, "signed", v1alpha1.RedisBenchmarkSpec{
		Targets:    []string{"target"},
		Workload:   v1alpha1.BenchmarkWorkload{Commands: []v1alpha1.BenchmarkCommand{"set", "incr"}, Requests: 2000},
		CrashCheck: &v1alpha1.CrashCheckSpec{},
	})
	job := waitJob(t, ns, "signed-0")
	env := resolveEnv(t, ns, job.Spec.Template.Spec.Containers[0].Env)
	if envValue(env, "REDIS_USER") != bench.User {
		t.Fatalf("the runner signs in with %q, want the user %s", env, bench.User)
	}

	addr, _ := serverAddrs.Load(ns + "/target-0")
	r := bench.Runner{Tool: filepath.Join(filepath.Dir(testenv.ServerBin()), "valkey-benchmark"), Addr: addr.(string),
		User: envValue(env, "REDIS_USER"), Password: envValue(env, "REDIS_PASSWORD"), DB: 15}
	if err := r.ClaimDatabase(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx, bench.Workload{Target: "target", Mode: "uring-durable", Commands: []string{"set", "incr"},
		Requests: 2000, Clients: 4, Pipeline: 1, ValueSize: 32, Keyspace: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteKeys(ctx); err != nil {
		t.Fatal(err)
	}
	admin := newClient(addr.(string), instancePassword(t, ns, "target"))
	defer func() { _ = admin.Close() }()
	if got := testenv.ACLRefusals(t, admin); !slices.Equal(got, []string{bench.User + " config|get"}) {
		t.Errorf("ACL LOG %q, want only valkey-benchmark's CONFIG GET refused", got)
	}
	if got := admin.Do(ctx, "ACL", "DRYRUN", bench.User, "DEBUG", "SEGFAULT").Val(); got != "OK" {
		t.Errorf("ACL DRYRUN %s DEBUG SEGFAULT on a target that allows the crash check: %v", bench.User, got)
	}

	res.Crash = &bench.CrashResult{Acknowledged: 100}
	msg, err := bench.Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	finishJobPod(t, ns, "signed-0", 0, string(msg))
	waitBenchmark(t, ns, "signed", func(rb *v1alpha1.RedisBenchmark) error {
		return hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonBenchmarkSucceeded)
	})
}

// A target whose servers have not taken its runtime options (an appendfsync
// change that did not reach them) would be measured with the old ones.
func TestTargetWaitsForItsRuntimeOptions(t *testing.T) {
	rb := &v1alpha1.RedisBenchmark{Spec: v1alpha1.RedisBenchmarkSpec{Targets: []string{"cache"}}}
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "cache", Generation: 2},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Benchmark: &v1alpha1.BenchmarkAccessSpec{}}}
	rp.Status.ObservedGeneration = 2
	rp.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReady},
		{Type: v1alpha1.ConditionUpToDate, Status: metav1.ConditionTrue, Reason: ReasonUpToDate},
		{Type: v1alpha1.ConditionConfigApplied, Status: metav1.ConditionFalse, Reason: ReasonServerUnreachable},
	}
	if reason, msg, ok := targetAvailable(rb, specs.BenchmarkRun{Repetition: 1}, rp); ok || reason != ReasonTargetNotReady || !strings.Contains(msg, "ConfigApplied") {
		t.Errorf("ConfigApplied False: available %v, %s: %s", ok, reason, msg)
	}
	meta.SetStatusCondition(&rp.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionConfigApplied, Status: metav1.ConditionTrue, Reason: ReasonConfigApplied})
	if reason, msg, ok := targetAvailable(rb, specs.BenchmarkRun{Repetition: 1}, rp); !ok {
		t.Errorf("every condition True: not available, %s: %s", reason, msg)
	}
}
