package controllers

// A backup's expiry: status.expiresAt, from spec.expiresAfter or the
// instance's default (specs.BackupExpiry), and the deletion of the backup
// when it passes. Deleting it deletes its objects first (release), so the
// oldest backup in the store moves on, and the archive's pruning with it.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// expire keeps a completed backup's status.expiresAt in step with its
// spec.expiresAfter, gives a backup that expires the finalizer that deletes
// its objects (FinalizerBackupObjects), and deletes the backup once
// expiresAt has passed: release then deletes its objects, so the oldest
// backup in the store, and with it the archive's horizon, moves on.
func (r *RedisBackupReconciler) expire(ctx context.Context, b *v1alpha1.RedisBackup) (ctrl.Result, error) {
	at := specs.BackupExpiry(b, nil)
	if at == nil {
		return ctrl.Result{}, nil
	}
	if !at.Equal(b.Status.ExpiresAt) {
		patch := client.MergeFrom(b.DeepCopy())
		b.Status.ExpiresAt = at
		if err := r.Status().Patch(ctx, b, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if !controllerutil.ContainsFinalizer(b, specs.FinalizerBackupObjects) {
		patch := client.MergeFrom(b.DeepCopy())
		controllerutil.AddFinalizer(b, specs.FinalizerBackupObjects)
		if err := r.Patch(ctx, b, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if left := at.Sub(r.Clock.Now()); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	if err := r.Delete(ctx, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rp, err := r.instance(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	var about client.Object = b
	if rp != nil {
		about = rp
	}
	r.Recorder.Eventf(about, corev1.EventTypeNormal, "ExpiredBackup", "deleted the RedisBackup %s: it expired at %s", b.Name, at.UTC().Format(time.RFC3339))
	return ctrl.Result{}, nil
}
