package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
)

// resultWait is how long a succeeded Job's pod may be missing from the cache
// before the operator looks again.
const resultWait = 2 * time.Second

// RedisBenchmarkReconciler runs a RedisBenchmark: one Job per target, one at
// a time in spec order, and collects each Job's result into the status and
// the operator's metrics.
type RedisBenchmarkReconciler struct {
	client.Client
	Options  BenchmarkOptions
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
}

// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbenchmarks,verbs=get;list;watch
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbenchmarks/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redispersistences,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;patch
// The crash check's Role grants exec into the target pods; the operator must hold what it grants.
// +kubebuilder:rbac:groups="",resources=pods/exec,verbs=create

func (r *RedisBenchmarkReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
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
		if err := r.Status().Patch(ctx, rb, client.MergeFrom(original)); err != nil && !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "patching status", "redisbenchmark", klogRef(rb))
			if retErr == nil {
				retErr = err
			}
			return
		}
		exportBenchmarkMetrics(rb)
	}()

	if rb.Spec.CrashCheck != nil {
		for _, obj := range buildCrashCheckAccess(rb) {
			if err := r.apply(ctx, rb, obj); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	for int(rb.Status.CompletedTargets) < len(rb.Spec.Targets) {
		index := int(rb.Status.CompletedTargets)
		done, err := r.runTarget(ctx, rb, index)
		if err != nil || !done {
			return ctrl.Result{RequeueAfter: requeueFor(err)}, ignoreWaiting(err)
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
		condition{metav1.ConditionTrue, ReasonBenchmarkSucceeded, fmt.Sprintf("all %d targets ran; results are in status.results", len(rb.Spec.Targets))},
		condition{metav1.ConditionFalse, ReasonNoFailure, "no target failed"})
	return ctrl.Result{}, nil
}

// errWaiting means the step cannot go on until something outside changes;
// it is not an error to back off from.
var errWaiting = errors.New("waiting")

func requeueFor(err error) time.Duration {
	if errors.Is(err, errWaiting) {
		return resultWait
	}
	return 0
}

func ignoreWaiting(err error) error {
	if errors.Is(err, errWaiting) {
		return nil
	}
	return err
}

// runTarget advances target number index: it creates its Job, or waits for
// it, or records its result. done is true once the target's result is in the
// status (or the benchmark failed on it).
func (r *RedisBenchmarkReconciler) runTarget(ctx context.Context, rb *v1alpha1.RedisBenchmark, index int) (done bool, err error) {
	target := rb.Spec.Targets[index]
	name := benchmarkJobName(rb, index)
	job := &batchv1.Job{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rb.Namespace, Name: name}, job); apierrors.IsNotFound(err) {
		rp := &v1alpha1.RedisPersistence{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: rb.Namespace, Name: target}, rp); apierrors.IsNotFound(err) {
			r.setBenchmarkConditions(rb,
				condition{metav1.ConditionFalse, ReasonTargetNotFound, fmt.Sprintf("waiting for RedisPersistence %s, target %d of %d", target, index+1, len(rb.Spec.Targets))},
				condition{metav1.ConditionFalse, ReasonNoFailure, "no target failed"})
			return false, nil // a RedisPersistence that appears triggers a reconcile
		} else if err != nil {
			return false, err
		}
		if err := r.apply(ctx, rb, buildBenchmarkJob(rb, index, rp, r.Options)); err != nil {
			return false, err
		}
		r.Recorder.Eventf(rb, corev1.EventTypeNormal, "StartedJob", "started Job %s for target %s", name, target)
		r.setRunning(rb, index)
		return false, nil
	} else if err != nil {
		return false, err
	}

	outcome, reason := benchmarkJobOutcome(job)
	switch outcome {
	case jobRunning:
		r.setRunning(rb, index)
		return false, nil
	case jobFailed:
		rb.Status.CurrentJob = ""
		r.setBenchmarkConditions(rb,
			condition{metav1.ConditionFalse, ReasonBenchmarkFailed, "a target's Job failed; no further target runs"},
			condition{metav1.ConditionTrue, ReasonJobFailed, fmt.Sprintf("Job %s for target %s failed (%s); its pod's log says why", name, target, reason)})
		r.Recorder.Eventf(rb, corev1.EventTypeWarning, "JobFailed", "Job %s for target %s failed: %s", name, target, reason)
		return true, nil
	}

	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(rb.Namespace), client.MatchingLabels{labelJobName: name}); err != nil {
		return false, err
	}
	msg := terminationMessage(pods.Items)
	if msg == "" {
		return false, fmt.Errorf("%w for the result of Job %s", errWaiting, name)
	}
	res, err := bench.Decode(msg, target)
	if err != nil {
		rb.Status.CurrentJob = ""
		r.setBenchmarkConditions(rb,
			condition{metav1.ConditionFalse, ReasonBenchmarkFailed, "a target's result could not be read; no further target runs"},
			condition{metav1.ConditionTrue, ReasonResultInvalid, fmt.Sprintf("Job %s for target %s: %v", name, target, err)})
		return true, nil
	}
	recordResult(&rb.Status, res)
	rb.Status.CompletedTargets++
	r.Recorder.Eventf(rb, corev1.EventTypeNormal, "CollectedResult", "collected the result of Job %s for target %s", name, target)
	return true, nil
}

func (r *RedisBenchmarkReconciler) setRunning(rb *v1alpha1.RedisBenchmark, index int) {
	rb.Status.CurrentJob = benchmarkJobName(rb, index)
	r.setBenchmarkConditions(rb,
		condition{metav1.ConditionFalse, ReasonBenchmarkRunning, fmt.Sprintf("running target %s, %d of %d", rb.Spec.Targets[index], index+1, len(rb.Spec.Targets))},
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
	if err := r.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		r.Recorder.Eventf(rb, corev1.EventTypeWarning, "FailedApply", "applying %s %s: %v", kind, obj.GetName(), err)
		return fmt.Errorf("applying %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}

// SetupWithManager watches RedisBenchmarks, their Jobs and the RedisPersistences they wait for.
func (r *RedisBenchmarkReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RedisBenchmark{}).
		Owns(&batchv1.Job{}).
		Watches(&v1alpha1.RedisPersistence{}, handler.EnqueueRequestsFromMapFunc(r.benchmarksInNamespace)).
		Complete(r)
}

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
