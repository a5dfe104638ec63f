package controllers

// Verified backups (spec.backup.verify): at each run of the schedule the
// newest Completed RedisBackup of the instance is restored into a temporary
// instance, <name>-verify, through the same bootstrap.recovery a user's
// restore takes; its restore container checks the snapshot's SHA-256 and
// the RDB's CRC-64 before the server starts. Once the temporary instance is
// Ready, what its server holds is compared with what the backup recorded
// when it was taken (backup.json's keyspace: the keys of each database and
// a sample of keys, backup.CheckRestore). The result goes to the backup's
// status.verification, its Verified condition, an event and the backup's
// metrics; then the temporary instance and its volume claims are deleted.
//
// Nothing is kept in memory. The temporary instance's name is one per
// instance, so two verifications of an instance cannot run at once; it
// names the backup it restores (AnnotationVerifies), and its creation time
// is the start the deadline counts from. The runs taken are read from the
// backups' status.verification.startedAt. An operator restarted in the
// middle of a run finds the temporary instance and goes on with it.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// Reasons of a RedisBackup's Verified condition and events.
const (
	ReasonVerifying          = "Verifying"
	ReasonVerified           = "Verified"
	ReasonVerificationFailed = "VerificationFailed"
)

// verifyPoll is how often a running verification looks at its temporary
// instance: its restore container's failure changes no object the
// verifier watches.
const verifyPoll = 5 * time.Second

// BackupVerifier runs the verifications of spec.backup.verify.
type BackupVerifier struct {
	client.Client
	// APIReader reads the temporary instance's password and the volume
	// claims, which the cache does not hold.
	APIReader client.Reader
	Recorder  record.EventRecorder
	Clock     clock.PassiveClock
	// ServerAddress is where the operator reaches a server pod (pod IP and
	// port by default).
	ServerAddress func(*corev1.Pod) string
}

// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redispersistences,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbackups/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;delete

func (r *BackupVerifier) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rp := &v1alpha1.RedisPersistence{}
	if err := r.Get(ctx, req.NamespacedName, rp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	temp := &v1alpha1.RedisPersistence{}
	err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: specs.VerifyInstanceName(rp)}, temp)
	switch {
	case err == nil && temp.Labels[specs.LabelVerifyOf] == rp.Name && metav1.IsControlledBy(temp, rp):
		// A run under way finishes, even if spec.backup.verify went since.
		return r.follow(ctx, rp, temp)
	case err == nil:
		if verifies(rp) {
			r.Recorder.Eventf(rp, corev1.EventTypeWarning, "VerifyNameTaken", "the RedisPersistence %s, which the backups' verification restores into, exists and is not this instance's: rename it, or rename this instance", temp.Name)
		}
		return ctrl.Result{}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	if !verifies(rp) || !rp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	return r.schedule(ctx, rp)
}

func verifies(rp *v1alpha1.RedisPersistence) bool {
	return rp.Spec.Backup != nil && rp.Spec.Backup.Verify != nil
}

// schedule starts a verification of rp's newest Completed backup when a
// run is due since the last one started, and says when to look again.
func (r *BackupVerifier) schedule(ctx context.Context, rp *v1alpha1.RedisPersistence) (ctrl.Result, error) {
	schedule, err := specs.ParseSchedule(rp.Spec.Backup.Verify.Schedule)
	if err != nil {
		r.Recorder.Event(rp, corev1.EventTypeWarning, "InvalidVerifySchedule", err.Error())
		return ctrl.Result{}, nil
	}
	var list v1alpha1.RedisBackupList
	if err := r.List(ctx, &list, client.InNamespace(rp.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the RedisBackups: %w", err)
	}
	last := rp.CreationTimestamp.Time
	var newest *v1alpha1.RedisBackup
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.RedisPersistence.Name != rp.Name {
			continue
		}
		if err := r.failLost(ctx, rp, b); err != nil {
			return ctrl.Result{}, err
		}
		if v := b.Status.Verification; v != nil && v.StartedAt != nil && v.StartedAt.After(last) {
			last = v.StartedAt.Time
		}
		if b.Status.Phase == v1alpha1.BackupCompleted && b.Status.Point != nil && b.DeletionTimestamp.IsZero() &&
			(newest == nil || b.Status.Point.After(newest.Status.Point.Time)) {
			newest = b
		}
	}
	now := r.Clock.Now()
	due, next := specs.DueBackup(schedule, last, now)
	later := ctrl.Result{RequeueAfter: max(next.Sub(now), time.Second)}
	if due.IsZero() {
		return later, nil
	}
	if newest == nil {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "NoBackupToVerify", "the verification due at %s found no Completed RedisBackup of this instance", rfc3339(due))
		return later, nil
	}
	temp := specs.VerifyInstance(rp, newest)
	if err := r.Create(ctx, temp); err != nil && !apierrors.IsAlreadyExists(err) {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedCreate", "creating the RedisPersistence %s to verify the backup %s: %v", temp.Name, newest.Name, err)
		return ctrl.Result{}, fmt.Errorf("creating the RedisPersistence %s: %w", temp.Name, err)
	}
	r.Recorder.Eventf(newest, corev1.EventTypeNormal, "VerificationStarted", "restoring the backup into the temporary instance %s to verify it", temp.Name)
	return ctrl.Result{RequeueAfter: verifyPoll}, r.markRunning(ctx, newest, temp.Name, metav1.NewTime(now))
}

// failLost fails the verification b records as running when its temporary
// instance is gone (someone deleted it): no run would end it.
func (r *BackupVerifier) failLost(ctx context.Context, rp *v1alpha1.RedisPersistence, b *v1alpha1.RedisBackup) error {
	v := b.Status.Verification
	if v == nil || v.Result != v1alpha1.VerificationRunning {
		return nil
	}
	// Uncached: an instance created an instant ago may not be in the cache.
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: v.Instance}, &v1alpha1.RedisPersistence{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	return r.finish(ctx, rp, b, v.Instance, failedVerification("the temporary instance %s was deleted before the verification ended", v.Instance))
}

// follow carries a verification forward: it records it as running, checks
// the temporary instance once it is Ready (or fails the verification at its
// deadline, or when the restore refused the backup), records the result,
// and deletes the temporary instance.
func (r *BackupVerifier) follow(ctx context.Context, rp, temp *v1alpha1.RedisPersistence) (ctrl.Result, error) {
	name := temp.Annotations[specs.AnnotationVerifies]
	// Uncached: the run recorded an instant ago may not be in the cache.
	b := &v1alpha1.RedisBackup{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, b); apierrors.IsNotFound(err) {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "VerificationAbandoned", "the RedisBackup %s went during its verification: deleting the temporary instance %s", name, temp.Name)
		return r.cleanup(ctx, temp)
	} else if err != nil {
		return ctrl.Result{}, err
	}
	v := b.Status.Verification
	if v != nil && v.Instance == temp.Name && v.FinishedAt != nil && !v.FinishedAt.Before(&temp.CreationTimestamp) {
		// The result is recorded; what is left is the deletion.
		return r.cleanup(ctx, temp)
	}
	if v == nil || v.Result != v1alpha1.VerificationRunning || v.Instance != temp.Name || v.StartedAt == nil {
		// The operator stopped between creating the instance and recording
		// the run: the deadline counts from now.
		if err := r.markRunning(ctx, b, temp.Name, metav1.NewTime(r.Clock.Now())); err != nil {
			return ctrl.Result{}, err
		}
	}
	started := *b.Status.Verification.StartedAt
	timeout := v1alpha1.DefaultVerifyTimeout
	if verifies(rp) {
		timeout = rp.Spec.Backup.Verify.VerifyTimeout()
	}
	outcome, waiting, err := r.check(ctx, rp, temp, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if outcome == nil {
		left := started.Add(timeout).Sub(r.Clock.Now())
		if left > 0 {
			return ctrl.Result{RequeueAfter: min(verifyPoll, left)}, nil
		}
		outcome = &verification{result: v1alpha1.VerificationFailed,
			message: fmt.Sprintf("the temporary instance %s did not restore the backup within %s: %s", temp.Name, timeout, waiting)}
	}
	if err := r.finish(ctx, rp, b, temp.Name, outcome); err != nil {
		return ctrl.Result{}, err
	}
	return r.cleanup(ctx, temp)
}

// cleanup deletes the temporary instance's volume claims, then the
// instance: its StatefulSet goes before its pods, and a claim being
// deleted outlives the pod that uses it, so no pod comes back to make the
// claim again. A claim the StatefulSet keeps (its retention policy is
// Retain) would otherwise stay, with its volume, after every run.
func (r *BackupVerifier) cleanup(ctx context.Context, temp *v1alpha1.RedisPersistence) (ctrl.Result, error) {
	var claims corev1.PersistentVolumeClaimList
	if err := r.APIReader.List(ctx, &claims, client.InNamespace(temp.Namespace), client.MatchingLabels(specs.SelectorLabels(temp))); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the volume claims of %s: %w", temp.Name, err)
	}
	for i := range claims.Items {
		if claims.Items[i].DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, &claims.Items[i]); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting the volume claim %s: %w", claims.Items[i].Name, err)
			}
		}
	}
	if temp.DeletionTimestamp.IsZero() {
		if err := r.Delete(ctx, temp, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting the temporary instance %s: %w", temp.Name, err)
		}
	}
	return ctrl.Result{}, nil
}

// markRunning records on b that its verification restores into instance
// since started.
func (r *BackupVerifier) markRunning(ctx context.Context, b *v1alpha1.RedisBackup, instance string, started metav1.Time) error {
	patch := client.MergeFrom(b.DeepCopy())
	b.Status.Verification = &v1alpha1.BackupVerification{Result: v1alpha1.VerificationRunning, Instance: instance, StartedAt: &started}
	r.setVerified(b, metav1.ConditionFalse, ReasonVerifying, "restoring the backup into the temporary instance "+instance)
	if err := r.Status().Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("recording the verification of %s: %w", b.Name, err)
	}
	return nil
}

// finish records the outcome on b, with an event on b and, when it failed,
// on its instance.
func (r *BackupVerifier) finish(ctx context.Context, rp *v1alpha1.RedisPersistence, b *v1alpha1.RedisBackup, instance string, o *verification) error {
	patch := client.MergeFrom(b.DeepCopy())
	now := metav1.NewTime(r.Clock.Now())
	v := b.Status.Verification
	v.Result, v.Instance, v.FinishedAt, v.Keys, v.Message = o.result, instance, &now, o.keys, o.message
	if o.result == v1alpha1.VerificationVerified {
		r.setVerified(b, metav1.ConditionTrue, ReasonVerified, o.message)
	} else {
		r.setVerified(b, metav1.ConditionFalse, ReasonVerificationFailed, o.message)
	}
	if err := r.Status().Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("recording the verification of %s: %w", b.Name, err)
	}
	if o.result == v1alpha1.VerificationVerified {
		r.Recorder.Event(b, corev1.EventTypeNormal, ReasonVerified, o.message)
		return nil
	}
	r.Recorder.Event(b, corev1.EventTypeWarning, ReasonVerificationFailed, o.message)
	r.Recorder.Eventf(rp, corev1.EventTypeWarning, ReasonVerificationFailed, "the backup %s: %s", b.Name, o.message)
	return nil
}

func (r *BackupVerifier) setVerified(b *v1alpha1.RedisBackup, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionVerified, Status: status, Reason: reason, Message: message,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now()),
	})
}

// SetupWithManager watches the instances with spec.backup.verify and the
// temporary instances, whose changes come to their source.
func (r *BackupVerifier) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.ServerAddress == nil {
		r.ServerAddress = func(pod *corev1.Pod) string {
			return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(specs.RedisPort))
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("backupverify").
		For(&v1alpha1.RedisPersistence{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
			rp, ok := obj.(*v1alpha1.RedisPersistence)
			return ok && verifies(rp)
		}))).
		Watches(&v1alpha1.RedisPersistence{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			if source := obj.GetLabels()[specs.LabelVerifyOf]; source != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: source}}}
			}
			return nil
		})).
		Complete(r)
}
