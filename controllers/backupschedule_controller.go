package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// BackupScheduler takes the backups of spec.backup.schedule: at each run it
// creates a RedisBackup (RedisBackupReconciler takes it), and it deletes the
// scheduled ones spec.backup.retention lets go; their finalizer has the
// RedisBackupReconciler delete their objects from the store first. A run
// missed while the operator was down is taken once, at the next reconcile;
// runs missed before it are skipped. The runs taken are read from the
// RedisBackups themselves (uringredis.io/scheduled-at), so nothing is kept
// in memory or in the instance's status.
type BackupScheduler struct {
	client.Client
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
}

// +kubebuilder:rbac:groups=persistence.uringredis.io,resources=redisbackups,verbs=get;list;watch;create;delete

func (r *BackupScheduler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rp := &v1alpha1.RedisPersistence{}
	if err := r.Get(ctx, req.NamespacedName, rp); err != nil {
		if apierrors.IsNotFound(err) {
			forgetBackupDue(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rp.DeletionTimestamp.IsZero() || rp.Spec.Backup == nil || rp.Spec.Backup.Schedule == "" {
		forgetBackupDue(rp.Namespace, rp.Name)
		return ctrl.Result{}, nil
	}
	schedule, err := specs.ParseSchedule(rp.Spec.Backup.Schedule)
	if err != nil {
		r.Recorder.Event(rp, corev1.EventTypeWarning, "InvalidBackupSchedule", err.Error())
		return ctrl.Result{}, nil
	}
	var list v1alpha1.RedisBackupList
	if err := r.List(ctx, &list, client.InNamespace(rp.Namespace), client.MatchingLabels{specs.LabelScheduledFor: rp.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the scheduled RedisBackups: %w", err)
	}
	now := r.Clock.Now()
	last := rp.CreationTimestamp.Time
	for i := range list.Items {
		if at := specs.ScheduledAt(&list.Items[i]); at.After(last) {
			last = at
		}
	}
	if err := r.exportDue(ctx, rp, schedule); err != nil {
		return ctrl.Result{}, err
	}
	due, next := specs.DueBackup(schedule, last, now)
	if !due.IsZero() {
		b := specs.ScheduledBackup(rp, due)
		if err := r.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedScheduleBackup", "creating the RedisBackup %s: %v", b.Name, err)
			return ctrl.Result{}, fmt.Errorf("creating the RedisBackup %s: %w", b.Name, err)
		}
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ScheduledBackup", "the RedisBackup %s takes the run of %s", b.Name, due.Format(time.RFC3339))
	}
	for _, b := range specs.ExpiredBackups(rp, list.Items, now) {
		if !b.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, b); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("deleting the expired RedisBackup %s: %w", b.Name, err)
		}
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ExpiredBackup", "deleted the RedisBackup %s (%s): spec.backup.retention lets it go", b.Name, b.Status.Phase)
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(now), time.Second)}, nil
}

// exportDue sets uringredis_backup_next_due_timestamp_seconds: the first
// run of schedule after the point of rp's newest completed backup
// (scheduled or not), or after its creation without one. Past it, the
// schedule has a backup to take that no completed backup stands for yet.
func (r *BackupScheduler) exportDue(ctx context.Context, rp *v1alpha1.RedisPersistence, schedule cron.Schedule) error {
	var all v1alpha1.RedisBackupList
	if err := r.List(ctx, &all, client.InNamespace(rp.Namespace)); err != nil {
		return fmt.Errorf("listing the RedisBackups: %w", err)
	}
	newest := rp.CreationTimestamp.Time
	for _, b := range all.Items {
		if b.Spec.RedisPersistence.Name == rp.Name && b.Status.Phase == v1alpha1.BackupCompleted && b.Status.Point != nil && b.Status.Point.After(newest) {
			newest = b.Status.Point.Time
		}
	}
	backupNextDue.With(prometheus.Labels{"namespace": rp.Namespace, "redispersistence": rp.Name}).Set(float64(schedule.Next(newest.UTC()).Unix()))
	return nil
}

// SetupWithManager watches RedisPersistences with a schedule and their
// scheduled RedisBackups (one that completes may make an older one expire).
func (r *BackupScheduler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("backupschedule").
		// An instance whose schedule is removed comes too: its
		// uringredis_backup_next_due_timestamp_seconds goes.
		For(&v1alpha1.RedisPersistence{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return scheduled(e.Object) },
			UpdateFunc:  func(e event.UpdateEvent) bool { return scheduled(e.ObjectOld) || scheduled(e.ObjectNew) },
			DeleteFunc:  func(e event.DeleteEvent) bool { return scheduled(e.Object) },
			GenericFunc: func(e event.GenericEvent) bool { return scheduled(e.Object) },
		})).
		Watches(&v1alpha1.RedisBackup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
			if rp := obj.GetLabels()[specs.LabelScheduledFor]; rp != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: rp}}}
			}
			return nil
		})).
		Complete(r)
}

func scheduled(obj client.Object) bool {
	rp, ok := obj.(*v1alpha1.RedisPersistence)
	return ok && rp.Spec.Backup != nil && rp.Spec.Backup.Schedule != ""
}
