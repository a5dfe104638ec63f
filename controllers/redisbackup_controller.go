package controllers

import (
	"context"
	"fmt"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// Reasons of a RedisBackup's Completed condition.
const (
	ReasonBackupInstanceNotFound = "InstanceNotFound"
	ReasonBackupNoDestination    = "NoDestination"
	ReasonBackupNoAgentImage     = "NoAgentImage"
	ReasonBackupCredentials      = "CredentialsMissing"
	ReasonBackupNoServerReady    = "NoServerReady"
	ReasonBackupPreviousJob      = "PreviousJobPresent"
	ReasonBackupRunning          = "Running"
	ReasonBackupAttemptFailed    = "AttemptFailed"
	ReasonBackupCompleted        = "Completed"
	ReasonBackupFailed           = "Failed"
)

// previousJobRequeue is how soon a backup whose Job name is still taken by
// an earlier backup's Job looks again.
const previousJobRequeue = 2 * time.Second

// RedisBackupReconciler takes a RedisBackup: it picks the server to read
// from (a ready replica whose link is up, unless spec.target says Primary),
// starts the Job whose agent streams the snapshot into the instance's
// object store, and copies the agent's result into the status. The
// operator itself never talks to the store: the Job holds the credentials.
// A backup waits (Pending) while its instance, destination, credentials or
// a ready server is missing, and is retried by a new pod when one fails; it
// fails for good when its Job does. A completed backup with an expiry
// (status.expiresAt) is deleted when it passes, its objects first.
type RedisBackupReconciler struct {
	client.Client
	// APIReader reads the object store's credentials Secret, which the
	// cache (the operator's Secrets only) does not hold.
	APIReader client.Reader
	Options   specs.BackupOptions
	Recorder  record.EventRecorder
	Clock     clock.PassiveClock
}

// patch: adds the finalizer to a backup that expires, and removes it once its
// objects are deleted; delete: a backup whose expiry passed.
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbackups,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbackups/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redispersistences,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

func (r *RedisBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	defer cancel()

	b := &v1alpha1.RedisBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			forgetBackupMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		forgetBackupMetrics(b.Namespace, b.Name)
		return ctrl.Result{}, r.release(ctx, b)
	}
	if backupFinished(b) {
		exportBackupMetrics(b)
		return r.expire(ctx, b)
	}
	original := b.DeepCopy()
	defer func() {
		patchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusPatchTimeout)
		defer cancel()
		if err := r.Status().Patch(patchCtx, b, client.MergeFrom(original)); err != nil && !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "patching status", "redisbackup", klogRef(b))
			if retErr == nil {
				retErr = err
			}
			return
		}
		exportBackupMetrics(b)
	}()

	job := &batchv1.Job{}
	err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: specs.BackupJobName(b)}, job)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.start(ctx, b)
	case err != nil:
		return ctrl.Result{}, err
	case !metav1.IsControlledBy(job, b):
		// A RedisBackup of the same name, deleted and made again, finds the
		// old one's Job until the garbage collector removes it: its result
		// is not this backup's.
		r.pending(b, ReasonBackupPreviousJob, "the Job "+job.Name+" belongs to an earlier RedisBackup of this name and is not deleted yet")
		return ctrl.Result{RequeueAfter: previousJobRequeue}, nil
	}
	return ctrl.Result{}, r.follow(ctx, b, job)
}

// start creates the backup's Job once everything it needs is there, or
// says in the status what it waits for.
func (r *RedisBackupReconciler) start(ctx context.Context, b *v1alpha1.RedisBackup) error {
	rp := &v1alpha1.RedisPersistence{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.RedisPersistence.Name}, rp); apierrors.IsNotFound(err) {
		r.pending(b, ReasonBackupInstanceNotFound, "the RedisPersistence "+b.Spec.RedisPersistence.Name+" does not exist in this namespace")
		return nil
	} else if err != nil {
		return err
	}
	if rp.Spec.Backup == nil {
		r.pending(b, ReasonBackupNoDestination, "the RedisPersistence "+rp.Name+" has no spec.backup.destination: add one, and this backup starts")
		return nil
	}
	if r.Options.Image == "" {
		r.pending(b, ReasonBackupNoAgentImage, "the operator runs without --backup-image (chart: image), so it has no backup agent to run")
		return nil
	}
	if msg, err := r.checkCredentials(ctx, rp); err != nil {
		return err
	} else if msg != "" {
		r.pending(b, ReasonBackupCredentials, msg)
		return nil
	}
	source, err := r.source(ctx, b, rp)
	if err != nil {
		return err
	}
	if source == "" {
		r.pending(b, ReasonBackupNoServerReady, "no server of "+rp.Name+" is ready to take the snapshot from")
		return nil
	}
	job := specs.BackupJob(b, rp, source, r.Options)
	if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		r.Recorder.Eventf(b, corev1.EventTypeWarning, "FailedCreate", "creating the Job %s: %v", job.Name, err)
		return fmt.Errorf("creating the Job %s: %w", job.Name, err)
	}
	now := metav1.NewTime(r.Clock.Now())
	b.Status.Phase, b.Status.Job, b.Status.SourcePod, b.Status.StartedAt = v1alpha1.BackupRunning, job.Name, source, &now
	b.Status.Mode = rp.Spec.Mode
	b.Status.Message = ""
	r.setCondition(b, metav1.ConditionFalse, ReasonBackupRunning, "the Job "+job.Name+" streams a snapshot of "+source+" to "+specs.BackupLocation(rp, b))
	r.Recorder.Eventf(b, corev1.EventTypeNormal, "Started", "the Job %s takes a snapshot of %s", job.Name, source)
	return nil
}

// checkCredentials says what is wrong with the destination's Secrets, ""
// when nothing: a pod whose Secret is missing would wait forever in
// CreateContainerConfigError instead of failing.
func (r *RedisBackupReconciler) checkCredentials(ctx context.Context, rp *v1alpha1.RedisPersistence) (string, error) {
	s3 := rp.Spec.Backup.Destination.S3
	idKey, secretKey := s3.Credentials.Keys()
	want := map[string][]string{s3.Credentials.SecretName: {idKey, secretKey}}
	if s3.CASecret != nil {
		want[s3.CASecret.Name] = append(want[s3.CASecret.Name], s3.CASecret.KeyOrDefault())
	}
	var problems []string
	for name, keys := range want {
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, secret)
		if apierrors.IsNotFound(err) {
			problems = append(problems, "the Secret "+name+" does not exist")
			continue
		} else if err != nil {
			return "", fmt.Errorf("reading the Secret %s: %w", name, err)
		}
		for _, key := range keys {
			if len(secret.Data[key]) == 0 {
				problems = append(problems, fmt.Sprintf("the Secret %s has no key %q", name, key))
			}
		}
	}
	return strings.Join(problems, "; "), nil
}

// source is the server pod the snapshot is taken from, "" when none is
// ready: with PreferReplica a ready replica whose replication link is up (the
// primary does not fork for the snapshot), else the ready primary.
func (r *RedisBackupReconciler) source(ctx context.Context, b *v1alpha1.RedisBackup, rp *v1alpha1.RedisPersistence) (string, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SelectorLabels(rp))); err != nil {
		return "", fmt.Errorf("listing the server pods: %w", err)
	}
	ready := map[string]bool{}
	for i := range pods.Items {
		ready[pods.Items[i].Name] = podReady(&pods.Items[i]) && pods.Items[i].Status.PodIP != ""
	}
	if !specs.Replicated(rp) {
		if name := rp.Name + "-0"; ready[name] {
			return name, nil
		}
		return "", nil
	}
	if b.Spec.Target != v1alpha1.TargetPrimary {
		for _, replica := range rp.Status.Replicas {
			if replica.Role == v1alpha1.RoleReplica && replica.LinkUp && ready[replica.Pod] {
				return replica.Pod, nil
			}
		}
	}
	if ready[rp.Status.Primary] {
		return rp.Status.Primary, nil
	}
	return "", nil
}

// follow copies where the Job stands into the status.
func (r *RedisBackupReconciler) follow(ctx context.Context, b *v1alpha1.RedisBackup, job *batchv1.Job) error {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{specs.LabelJobName: job.Name}); err != nil {
		return fmt.Errorf("listing the pods of the Job %s: %w", job.Name, err)
	}
	b.Status.Job = job.Name
	switch outcome, reason := benchmarkJobOutcome(job); outcome {
	case jobSucceeded:
		msg, _ := terminationMessageOf(pods.Items, corev1.PodSucceeded, specs.ContainerBackup)
		m, err := backup.DecodeMetadata([]byte(msg))
		if err != nil {
			r.fail(b, err.Error())
			return nil
		}
		rp, err := r.instance(ctx, b)
		if err != nil {
			return err
		}
		r.complete(b, m, specs.DefaultExpiresAfter(b, rp))
	case jobFailed:
		msg, _ := terminationMessageOf(pods.Items, corev1.PodFailed, specs.ContainerBackup)
		r.fail(b, fmt.Sprintf("the Job %s failed (%s) after %d attempt(s): %s", job.Name, reason, job.Status.Failed, lastLine(msg)))
	default:
		b.Status.Phase = v1alpha1.BackupRunning
		if msg, found := terminationMessageOf(pods.Items, corev1.PodFailed, specs.ContainerBackup); found && job.Status.Failed > 0 {
			text := fmt.Sprintf("attempt %d failed, retrying: %s", job.Status.Failed, lastLine(msg))
			if b.Status.Message != text {
				r.Recorder.Event(b, corev1.EventTypeWarning, ReasonBackupAttemptFailed, text)
			}
			b.Status.Message = text
			r.setCondition(b, metav1.ConditionFalse, ReasonBackupAttemptFailed, text)
		}
	}
	return nil
}

// complete records the agent's result; expiresAfter is the instance's
// default expiry for a backup without its own (specs.DefaultExpiresAfter).
func (r *RedisBackupReconciler) complete(b *v1alpha1.RedisBackup, m backup.Metadata, expiresAfter *metav1.Duration) {
	completed := metav1.NewTime(m.CompletedAt)
	point := metav1.NewTime(m.Point)
	st := &b.Status
	st.Phase, st.Message = v1alpha1.BackupCompleted, ""
	st.CompletedAt, st.Point = &completed, &point
	st.Location, st.Size, st.SHA256, st.ServerVersion = m.Location, m.Size, m.SHA256, m.ServerVersion
	if m.SourcePod != "" {
		st.SourcePod = m.SourcePod
	}
	st.ExpiresAt = specs.BackupExpiry(b, expiresAfter)
	if m.Keyspace != nil {
		keys := m.Keyspace.Keys()
		st.Keys = &keys
	}
	text := fmt.Sprintf("%d bytes at %s, consistent at %s", m.Size, m.Location, m.Point.UTC().Format("2006-01-02T15:04:05Z"))
	r.setCondition(b, metav1.ConditionTrue, ReasonBackupCompleted, text)
	r.Recorder.Event(b, corev1.EventTypeNormal, ReasonBackupCompleted, text)
}

func (r *RedisBackupReconciler) fail(b *v1alpha1.RedisBackup, message string) {
	b.Status.Phase, b.Status.Message = v1alpha1.BackupFailed, message
	r.setCondition(b, metav1.ConditionFalse, ReasonBackupFailed, message)
	r.Recorder.Event(b, corev1.EventTypeWarning, ReasonBackupFailed, message)
}

// pending says what the backup waits for; a change of the instance or of
// the backup brings it back.
func (r *RedisBackupReconciler) pending(b *v1alpha1.RedisBackup, reason, message string) {
	if b.Status.Message != message {
		r.Recorder.Event(b, corev1.EventTypeWarning, reason, message)
	}
	b.Status.Phase, b.Status.Message = v1alpha1.BackupPending, message
	r.setCondition(b, metav1.ConditionFalse, reason, message)
}

func (r *RedisBackupReconciler) setCondition(b *v1alpha1.RedisBackup, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionComplete, Status: status, Reason: reason, Message: message,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now()),
	})
}

func backupFinished(b *v1alpha1.RedisBackup) bool {
	return b.Status.Phase == v1alpha1.BackupCompleted || b.Status.Phase == v1alpha1.BackupFailed
}

// lastLine is the last non-empty line of a log tail: the agent's error.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return "no message"
}

// instance is b's RedisPersistence, nil when it does not exist.
func (r *RedisBackupReconciler) instance(ctx context.Context, b *v1alpha1.RedisBackup) (*v1alpha1.RedisPersistence, error) {
	rp := &v1alpha1.RedisPersistence{}
	err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.RedisPersistence.Name}, rp)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return rp, err
}

// release deletes the objects of a RedisBackup that holds
// FinalizerBackupObjects (the scheduled ones, and those that expire), then
// its finalizer. The objects are deleted with the instance's destination;
// when the instance, its destination or its credentials are gone they stay
// in the store, and an event says where.
func (r *RedisBackupReconciler) release(ctx context.Context, b *v1alpha1.RedisBackup) error {
	if !controllerutil.ContainsFinalizer(b, specs.FinalizerBackupObjects) {
		return nil
	}
	rp := &v1alpha1.RedisPersistence{}
	err := r.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.RedisPersistence.Name}, rp)
	switch {
	case apierrors.IsNotFound(err) || err == nil && rp.Spec.Backup == nil:
		r.Recorder.Eventf(b, corev1.EventTypeWarning, "ObjectsLeft", "the RedisPersistence %s or its spec.backup is gone: the backup's objects stay in the store at %s", b.Spec.RedisPersistence.Name, b.Status.Location)
	case err != nil:
		return err
	default:
		if err := r.deleteObjects(ctx, b, rp); err != nil {
			r.Recorder.Eventf(b, corev1.EventTypeWarning, "FailedDeleteObjects", "%v", err)
			return err
		}
	}
	patch := client.MergeFrom(b.DeepCopy())
	controllerutil.RemoveFinalizer(b, specs.FinalizerBackupObjects)
	return client.IgnoreNotFound(r.Patch(ctx, b, patch))
}

// deleteObjects deletes b's snapshot and metadata from rp's store.
func (r *RedisBackupReconciler) deleteObjects(ctx context.Context, b *v1alpha1.RedisBackup, rp *v1alpha1.RedisPersistence) error {
	store, err := openStore(ctx, r.APIReader, rp, specs.BackupPrefix(rp))
	if err != nil {
		return fmt.Errorf("deleting the backup's objects: %w", err)
	}
	return backup.DeleteBackup(ctx, store, b.Name)
}

// SetupWithManager watches RedisBackups, their Jobs and pods, and the
// RedisPersistences a backup waits for.
func (r *RedisBackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RedisBackup{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(backupOfPod), builder.WithPredicates(backupPods)).
		Watches(&v1alpha1.RedisPersistence{}, handler.EnqueueRequestsFromMapFunc(r.backupsOfInstance)).
		Complete(r)
}

var backupPods = predicate.NewPredicateFuncs(func(obj client.Object) bool {
	return obj.GetLabels()[specs.LabelBackupOf] != ""
})

func backupOfPod(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetLabels()[specs.LabelInstance]}}}
}

func (r *RedisBackupReconciler) backupsOfInstance(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.RedisBackupList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing RedisBackups for a RedisPersistence change")
		return nil
	}
	var requests []reconcile.Request
	for _, b := range list.Items {
		if b.Spec.RedisPersistence.Name == obj.GetName() && b.Status.Phase != v1alpha1.BackupRunning && !backupFinished(&b) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&b)})
		}
	}
	return requests
}
