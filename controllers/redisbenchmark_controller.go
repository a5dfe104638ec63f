package controllers

import (
	"context"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// RedisBenchmarkReconciler runs a RedisBenchmark: one Job per target, one at
// a time in spec order, and collects each Job's result into the status and
// the operator's metrics. A target runs only when it opted in, is Ready and
// no other benchmark drives it.
type RedisBenchmarkReconciler struct {
	client.Client
	// APIReader reads Jobs and pods from the API server where the cache may
	// be behind: whether another benchmark's Job drives a target, and the
	// result of a Job whose pod the cache does not show.
	APIReader client.Reader
	Options   specs.BenchmarkOptions
	// MaxConcurrentReconciles is how many RedisBenchmarks reconcile at once.
	MaxConcurrentReconciles int
	Recorder                record.EventRecorder
	Clock                   clock.PassiveClock

	// starting makes "is the target free?" and "start its Job" one step, so
	// two benchmarks reconciled at once never both start on one target.
	starting sync.Mutex
}

// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbenchmarks,verbs=get;list;watch
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbenchmarks/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redispersistences,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

func (r *RedisBenchmarkReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()

	rb := &v1alpha1.RedisBenchmark{}
	if err := r.Get(ctx, req.NamespacedName, rb); err != nil {
		if apierrors.IsNotFound(err) {
			forgetBenchmarkMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rb.DeletionTimestamp.IsZero() {
		forgetBenchmarkMetrics(rb.Namespace, rb.Name)
		return ctrl.Result{}, nil
	}
	if benchmarkFinished(rb) {
		exportBenchmarkMetrics(rb)
		return ctrl.Result{}, nil
	}

	original := rb.DeepCopy()
	defer func() {
		if retErr == nil {
			rb.Status.ObservedGeneration = rb.Generation
		}
		patchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusPatchTimeout)
		defer cancel()
		if err := r.Status().Patch(patchCtx, rb, client.MergeFrom(original)); err != nil && !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "patching status", "redisbenchmark", klogRef(rb))
			if retErr == nil {
				retErr = err
			}
			return
		}
		exportBenchmarkMetrics(rb)
	}()

	for int(rb.Status.CompletedRuns) < specs.Runs(rb) {
		done, err := r.advance(ctx, rb, specs.RunAt(rb, int(rb.Status.CompletedRuns)))
		if err != nil || !done {
			return ctrl.Result{}, err
		}
		if benchmarkFinished(rb) {
			return ctrl.Result{}, nil
		}
	}
	rb.Status.CurrentJob = ""
	if failed, lost := lostDurableWrites(&rb.Status); lost {
		r.setBenchmarkConditions(rb, condition{metav1.ConditionFalse, ReasonBenchmarkFailed, "every target ran, but a durable mode lost acknowledged writes"}, failed)
		return ctrl.Result{}, nil
	}
	r.setBenchmarkConditions(rb,
		condition{metav1.ConditionTrue, ReasonBenchmarkSucceeded, fmt.Sprintf("all %d targets ran %d time(s); results are in status.results", len(rb.Spec.Targets), specs.Repetitions(rb))},
		condition{metav1.ConditionFalse, ReasonNoFailure, "no target failed"})
	return ctrl.Result{}, nil
}

// advance moves run forward: it starts its Job, or waits for it, or records
// its result. done is true once the run's result is in the status (or the
// benchmark failed on it). Waiting needs no requeue: a change of the target
// or of any benchmark Job in the namespace brings the benchmark back.
func (r *RedisBenchmarkReconciler) advance(ctx context.Context, rb *v1alpha1.RedisBenchmark, run specs.BenchmarkRun) (done bool, err error) {
	target := rb.Spec.Targets[run.Target]
	name := specs.BenchmarkJobName(rb, run.Index)
	job := &batchv1.Job{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rb.Namespace, Name: name}, job); apierrors.IsNotFound(err) {
		return false, r.startRun(ctx, rb, run)
	} else if err != nil {
		return false, err
	}

	outcome, reason := benchmarkJobOutcome(job)
	switch outcome {
	case jobRunning:
		r.setRunning(rb, run)
		return false, nil
	case jobFailed:
		rb.Status.CurrentJob = ""
		r.setBenchmarkConditions(rb,
			condition{metav1.ConditionFalse, ReasonBenchmarkFailed, "a target's Job failed; no further target runs"},
			condition{metav1.ConditionTrue, ReasonJobFailed, fmt.Sprintf("Job %s for target %s failed (%s); its pod's log says why", name, target, reason)})
		r.Recorder.Eventf(rb, corev1.EventTypeWarning, "JobFailed", "Job %s for target %s failed: %s", name, target, reason)
		return true, nil
	}

	msg, found, err := r.jobResult(ctx, rb.Namespace, name)
	if err != nil {
		return false, err
	}
	if !found {
		rb.Status.CurrentJob = ""
		r.setBenchmarkConditions(rb,
			condition{metav1.ConditionFalse, ReasonBenchmarkFailed, "a target's result was lost; no further target runs"},
			condition{metav1.ConditionTrue, ReasonResultLost, fmt.Sprintf("Job %s for target %s succeeded, but its pod was deleted before the operator read the result; create the benchmark again", name, target)})
		r.Recorder.Eventf(rb, corev1.EventTypeWarning, "ResultLost", "the pod of Job %s for target %s is gone", name, target)
		return true, nil
	}
	res, err := bench.Decode(msg, target)
	if err != nil {
		rb.Status.CurrentJob = ""
		r.setBenchmarkConditions(rb,
			condition{metav1.ConditionFalse, ReasonBenchmarkFailed, "a target's result could not be read; no further target runs"},
			condition{metav1.ConditionTrue, ReasonResultInvalid, fmt.Sprintf("Job %s for target %s: %v", name, target, err)})
		return true, nil
	}
	recordRun(&rb.Status, res, run.Repetition)
	rb.Status.CompletedRuns++
	if run.Last(rb) {
		rb.Status.Results = append(rb.Status.Results, medianRepetitions(rb.Status.Runs, target)...)
		rb.Status.CompletedTargets++
	}
	r.Recorder.Eventf(rb, corev1.EventTypeNormal, "CollectedResult", "collected the result of Job %s for target %s, repetition %d", name, target, run.Repetition)
	return true, nil
}

// startRun starts the Job of run once its target exists, opted in, is Ready
// and is free; until then it says what it waits for.
func (r *RedisBenchmarkReconciler) startRun(ctx context.Context, rb *v1alpha1.RedisBenchmark, run specs.BenchmarkRun) error {
	target := rb.Spec.Targets[run.Target]
	rp := &v1alpha1.RedisPersistence{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rb.Namespace, Name: target}, rp); apierrors.IsNotFound(err) {
		r.setWaiting(rb, ReasonTargetNotFound, fmt.Sprintf("waiting for RedisPersistence %s, %s", target, runOf(rb, run)))
		return nil // a RedisPersistence that appears triggers a reconcile
	} else if err != nil {
		return err
	}
	if reason, message, ok := targetAvailable(rb, run, rp); !ok {
		r.setWaiting(rb, reason, message)
		return nil
	}

	r.starting.Lock()
	defer r.starting.Unlock()
	other, err := r.benchmarkDriving(ctx, rb, target)
	if err != nil {
		return err
	}
	if other != "" {
		r.setWaiting(rb, ReasonTargetBusy, fmt.Sprintf("RedisBenchmark %s is running against RedisPersistence %s; %s starts after it", other, target, runOf(rb, run)))
		return nil
	}
	if err := r.apply(ctx, rb, specs.BenchmarkJob(rb, run, rp, r.Options)); err != nil {
		return err
	}
	r.Recorder.Eventf(rb, corev1.EventTypeNormal, "StartedJob", "started Job %s for target %s, repetition %d", specs.BenchmarkJobName(rb, run.Index), target, run.Repetition)
	r.setRunning(rb, run)
	return nil
}

// runOf names run for a message: "run 3 of 10 (target 1 of 5, repetition 1 of 2)".
func runOf(rb *v1alpha1.RedisBenchmark, run specs.BenchmarkRun) string {
	return fmt.Sprintf("run %d of %d (target %d of %d, repetition %d of %d)",
		run.Index+1, specs.Runs(rb), run.Target+1, len(rb.Spec.Targets), run.Repetition, specs.Repetitions(rb))
}

// targetAvailable decides whether rp, the target of run, may be benchmarked
// now: it must have opted in (and allow the crash check if rb runs one), be
// Ready for its current spec and run the pod template the operator builds
// now. A template still to roll (an operator upgrade waiting for its turn)
// would restart the server under the benchmark, and may lack the
// benchmark's ACL user that the Job signs in as.
func targetAvailable(rb *v1alpha1.RedisBenchmark, run specs.BenchmarkRun, rp *v1alpha1.RedisPersistence) (reason, message string, ok bool) {
	access := rp.Spec.Benchmark
	ready := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionReady)
	upToDate := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionUpToDate)
	configApplied := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionConfigApplied)
	switch {
	case access == nil:
		return ReasonTargetNotOptedIn, fmt.Sprintf("RedisPersistence %s does not allow benchmarks: set its spec.benchmark (a benchmark writes to a database of its own, %d by default, and empties it)", rp.Name, specs.DefaultBenchmarkDatabase), false
	case rb.Spec.CrashCheck != nil && specs.Sharded(rp):
		return ReasonCrashCheckNotAllowed, fmt.Sprintf("RedisPersistence %s is a cluster: a killed primary is failed over, not restarted, so the crash check has no meaning there; run the benchmark without spec.crashCheck", rp.Name), false
	case rb.Spec.CrashCheck != nil && !access.CrashCheck:
		return ReasonCrashCheckNotAllowed, fmt.Sprintf("RedisPersistence %s does not allow the crash check, which kills its server: set its spec.benchmark.crashCheck: true, or run the benchmark without spec.crashCheck", rp.Name), false
	case ready == nil || ready.Status != metav1.ConditionTrue || rp.Status.ObservedGeneration != rp.Generation:
		return ReasonTargetNotReady, fmt.Sprintf("waiting for RedisPersistence %s to be Ready, %s", rp.Name, runOf(rb, run)), false
	case upToDate == nil || upToDate.Status != metav1.ConditionTrue:
		return ReasonTargetNotReady, fmt.Sprintf("waiting for RedisPersistence %s to roll out its pod template (UpToDate), %s", rp.Name, runOf(rb, run)), false
	case configApplied == nil || configApplied.Status != metav1.ConditionTrue:
		// Its servers would be measured with the options they had.
		return ReasonTargetNotReady, fmt.Sprintf("waiting for RedisPersistence %s's servers to take its runtime options (ConfigApplied), %s", rp.Name, runOf(rb, run)), false
	}
	return "", "", true
}

// benchmarkDriving names the other RedisBenchmark whose Job runs against
// target, or "". It asks the API server, not the cache: a Job another worker
// has just started must count.
func (r *RedisBenchmarkReconciler) benchmarkDriving(ctx context.Context, rb *v1alpha1.RedisBenchmark, target string) (string, error) {
	var jobs batchv1.JobList
	if err := r.APIReader.List(ctx, &jobs, client.InNamespace(rb.Namespace), client.MatchingLabels{specs.LabelBenchmarkTarget: target}); err != nil {
		return "", fmt.Errorf("listing the Jobs of target %s: %w", target, err)
	}
	for _, job := range jobs.Items {
		owner := metav1.GetControllerOf(&job)
		if outcome, _ := benchmarkJobOutcome(&job); outcome != jobRunning || owner == nil || owner.UID == rb.UID {
			continue
		}
		return owner.Name, nil
	}
	return "", nil
}

// jobResult is the runner's result from the succeeded pod of Job name. found
// is false when that pod is gone: deleted, or garbage-collected before the
// operator read it. The cache may not show the pod's last status yet, so a
// miss there is asked of the API server.
func (r *RedisBenchmarkReconciler) jobResult(ctx context.Context, namespace, name string) (msg string, found bool, err error) {
	for _, reader := range []client.Reader{r.Client, r.APIReader} {
		var pods corev1.PodList
		if err := reader.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{specs.LabelJobName: name}); err != nil {
			return "", false, fmt.Errorf("listing the pods of Job %s: %w", name, err)
		}
		if msg, found := terminationMessage(pods.Items); found {
			return msg, true, nil
		}
	}
	return "", false, nil
}

func (r *RedisBenchmarkReconciler) setWaiting(rb *v1alpha1.RedisBenchmark, reason, message string) {
	r.setBenchmarkConditions(rb,
		condition{metav1.ConditionFalse, reason, message},
		condition{metav1.ConditionFalse, ReasonNoFailure, "no target failed"})
}

func (r *RedisBenchmarkReconciler) setRunning(rb *v1alpha1.RedisBenchmark, run specs.BenchmarkRun) {
	rb.Status.CurrentJob = specs.BenchmarkJobName(rb, run.Index)
	r.setBenchmarkConditions(rb,
		condition{metav1.ConditionFalse, ReasonBenchmarkRunning, fmt.Sprintf("running target %s, %s", rb.Spec.Targets[run.Target], runOf(rb, run))},
		condition{metav1.ConditionFalse, ReasonNoFailure, "no target failed"})
}

func (r *RedisBenchmarkReconciler) setBenchmarkConditions(rb *v1alpha1.RedisBenchmark, complete, failed condition) {
	for t, c := range map[string]condition{v1alpha1.ConditionComplete: complete, v1alpha1.ConditionFailed: failed} {
		meta.SetStatusCondition(&rb.Status.Conditions, metav1.Condition{
			Type:               t,
			Status:             c.status,
			Reason:             c.reason,
			Message:            c.message,
			ObservedGeneration: rb.Generation,
			LastTransitionTime: metav1.NewTime(r.Clock.Now()),
		})
	}
}

func (r *RedisBenchmarkReconciler) apply(ctx context.Context, rb *v1alpha1.RedisBenchmark, obj client.Object) error {
	if err := r.Patch(ctx, obj, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		r.Recorder.Eventf(rb, corev1.EventTypeWarning, "FailedApply", "applying %s %s: %v", kind, obj.GetName(), err)
		return fmt.Errorf("applying %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}

// SetupWithManager watches RedisBenchmarks, the benchmark Jobs (a benchmark
// waits for its own and for those of other benchmarks on its targets) and the
// RedisPersistences they wait for.
func (r *RedisBenchmarkReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RedisBenchmark{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(r.benchmarksInNamespace), builder.WithPredicates(benchmarkJobs)).
		Watches(&v1alpha1.RedisPersistence{}, handler.EnqueueRequestsFromMapFunc(r.benchmarksInNamespace)).
		Complete(r)
}

var benchmarkJobs = predicate.NewPredicateFuncs(func(obj client.Object) bool {
	return obj.GetLabels()[specs.LabelBenchmarkTarget] != ""
})

func (r *RedisBenchmarkReconciler) benchmarksInNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.RedisBenchmarkList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing RedisBenchmarks for a RedisPersistence change")
		return nil
	}
	var requests []reconcile.Request
	for _, rb := range list.Items {
		if !benchmarkFinished(&rb) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rb)})
		}
	}
	return requests
}
