package controllers

// The instance's side of its backups: status.lastBackup, and the
// RedisBackup changes an instance reconciles on.

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// observeLastBackup records rp's newest Completed RedisBackup, by point, in
// rp.status.lastBackup, from the cache.
func (r *RedisPersistenceReconciler) observeLastBackup(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	var list v1alpha1.RedisBackupList
	if err := r.List(ctx, &list, client.InNamespace(rp.Namespace)); err != nil {
		return err
	}
	var newest *v1alpha1.RedisBackup
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.RedisPersistence.Name != rp.Name || b.Status.Phase != v1alpha1.BackupCompleted || b.Status.Point == nil || !b.DeletionTimestamp.IsZero() {
			continue
		}
		if newest == nil || b.Status.Point.After(newest.Status.Point.Time) {
			newest = b
		}
	}
	if newest == nil {
		rp.Status.LastBackup = nil
		return nil
	}
	st := newest.Status
	last := &v1alpha1.LastBackupStatus{Name: newest.Name, Point: *st.Point, CompletedAt: st.CompletedAt, Size: st.Size}
	if st.StartedAt != nil && st.CompletedAt != nil {
		last.Duration = &metav1.Duration{Duration: st.CompletedAt.Sub(st.StartedAt.Time)}
	}
	rp.Status.LastBackup = last
	return nil
}

// instancesOfBackup are the instances a RedisBackup change concerns: the one
// it backs up (status.lastBackup), and those waiting to be restored from it.
func (r *RedisPersistenceReconciler) instancesOfBackup(ctx context.Context, obj client.Object) []reconcile.Request {
	b, ok := obj.(*v1alpha1.RedisBackup)
	if !ok {
		return nil
	}
	requests := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.RedisPersistence.Name}}}
	var list v1alpha1.RedisPersistenceList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing RedisPersistences for a RedisBackup change")
		return requests
	}
	for _, rp := range list.Items {
		if rp.Spec.Bootstrap != nil && rp.Spec.Bootstrap.Recovery.Backup != nil && rp.Spec.Bootstrap.Recovery.Backup.Name == obj.GetName() && rp.Status.Recovery == nil {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rp)})
		}
	}
	return requests
}
