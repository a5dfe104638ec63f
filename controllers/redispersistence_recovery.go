package controllers

// Restoring a backup, or an archive up to a point in time, into a new
// instance (spec.bootstrap.recovery).
//
// The first reconcile finds the RedisBackup and, once it is Completed,
// fixes its snapshot in status.recovery; or it reads the archive's
// timelines from the store and, once the archive reaches the target time,
// fixes the archive and that time. Nothing is created before, so no server
// ever starts empty in place of the restore. The snapshot's location and
// digest (or the archive and time) go to the ConfigMap <name>-recovery,
// which the pods' restore container reads at every start
// (specs.withRecovery); the agent there
// restores into ordinal 0's empty volume. Once the instance is Ready the
// operator records status.recovery.restoredAt and empties the ConfigMap:
// from then on a server that restarts, on any volume, restores nothing, and
// the template never changed.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

const (
	// ReasonRecoveryWaiting: the instance waits for the backup it restores.
	ReasonRecoveryWaiting = "WaitingForBackup"
	// ReasonArchiveWaiting: the instance waits for the archive it recovers
	// to reach the target time, or for the store.
	ReasonArchiveWaiting = "WaitingForArchive"
	// archiveRecheck is how often an instance waiting for an archive reads
	// it again.
	archiveRecheck = 30 * time.Second
)

// resolveRecovery fixes status.recovery from the RedisBackup or the archive
// that spec.bootstrap names. It returns false, with the Ready condition
// saying why, while the backup is not Completed or the archive does not
// reach the target time: the instance is not made before. An instance that
// waits for an archive is read again after requeue.
func (r *RedisPersistenceReconciler) resolveRecovery(ctx context.Context, rp *v1alpha1.RedisPersistence) (ready bool, requeue time.Duration, err error) {
	if rp.Spec.Bootstrap == nil || rp.Status.Recovery != nil {
		return true, 0, nil
	}
	reason := ReasonRecoveryWaiting
	if rp.Spec.Bootstrap.Recovery.Archive != nil {
		reason, requeue = ReasonArchiveWaiting, archiveRecheck
	} else if rp.Spec.Bootstrap.Recovery.StoredBackup != nil {
		// No watch tells when a backup lands in the store.
		requeue = archiveRecheck
	}
	wait := func(message string) (bool, time.Duration, error) {
		if c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Message != message {
			r.Recorder.Event(rp, corev1.EventTypeWarning, reason, message)
		}
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, reason, message})
		return false, requeue, nil
	}
	if r.Options.AgentImage == "" {
		return wait("the operator runs without --backup-image (chart: image), so it has no agent to restore with")
	}
	if a := rp.Spec.Bootstrap.Recovery.Archive; a != nil {
		return r.resolveArchiveRecovery(ctx, rp, a, wait)
	}
	if s := rp.Spec.Bootstrap.Recovery.StoredBackup; s != nil {
		return r.resolveStoredBackup(ctx, rp, s, wait)
	}
	name := rp.Spec.Bootstrap.Recovery.Backup.Name
	b := &v1alpha1.RedisBackup{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, b); apierrors.IsNotFound(err) {
		return wait("the RedisBackup " + name + " to restore does not exist in this namespace; the servers start once it does and is Completed")
	} else if err != nil {
		return false, 0, fmt.Errorf("reading the RedisBackup %s: %w", name, err)
	}
	if b.Status.Phase != v1alpha1.BackupCompleted || b.Status.Location == "" || b.Status.SHA256 == "" {
		return wait(fmt.Sprintf("the RedisBackup %s to restore is %s, not Completed; the servers start once it is", name, cmp.Or(string(b.Status.Phase), "new")))
	}
	rp.Status.Recovery = &v1alpha1.RecoveryStatus{Backup: name, Location: b.Status.Location, SHA256: b.Status.SHA256}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "Restoring", "the first server starts on the backup %s (%s, consistent at %s)", name, b.Status.Location, pointOf(b))
	return true, 0, nil
}

// resolveStoredBackup finds the backup of spec.bootstrap.recovery.storedBackup
// in the store by its backup.json, the named one or the newest, and fixes it
// in status.recovery. It waits while the store cannot be read or holds no
// such backup: one may still be on its way there.
func (r *RedisPersistenceReconciler) resolveStoredBackup(ctx context.Context, rp *v1alpha1.RedisPersistence, s *v1alpha1.StoredBackupRecovery,
	wait func(string) (bool, time.Duration, error)) (bool, time.Duration, error) {
	where := "s3://" + rp.Spec.Backup.Destination.S3.Bucket + "/" + s.Path + "/backups/"
	store, err := openStore(ctx, r.APIReader, rp, s.Path)
	if err != nil {
		return wait(fmt.Sprintf("the store at %s cannot be read: %v", where, err))
	}
	m, err := backup.FindBackup(ctx, store, s.Name)
	if errors.Is(err, backup.ErrNoBackup) {
		return wait(err.Error() + "; the servers start once the store holds it")
	}
	if err != nil {
		return wait(fmt.Sprintf("the backups at %s cannot be read: %v", where, err))
	}
	rp.Status.Recovery = &v1alpha1.RecoveryStatus{Backup: m.Backup, Location: m.Location, SHA256: m.SHA256}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "Restoring", "the first server starts on the backup %s found in the store (%s, consistent at %s, taken of %s/%s)",
		m.Backup, m.Location, m.Point.UTC().Format(time.RFC3339), m.Namespace, m.Instance)
	return true, 0, nil
}

// resolveArchiveRecovery reads the archive at a.Path in rp's bucket and
// fixes it in status.recovery, with the target time (the archive's latest
// point when a names none), once a chain of the archive covers it. It waits
// while the store cannot be read or the archive ends before the target; a
// target before the archive's first base can never be recovered, which the
// condition says.
func (r *RedisPersistenceReconciler) resolveArchiveRecovery(ctx context.Context, rp *v1alpha1.RedisPersistence, a *v1alpha1.ArchiveRecovery,
	wait func(string) (bool, time.Duration, error)) (bool, time.Duration, error) {
	location := specs.ArchiveLocation(rp)
	store, err := openStore(ctx, r.APIReader, rp, a.Path)
	if err != nil {
		return wait(fmt.Sprintf("the archive %s cannot be read: %v", location, err))
	}
	archive, err := backup.ReadArchive(ctx, store)
	if err != nil {
		return wait(fmt.Sprintf("the archive %s cannot be read: %v", location, err))
	}
	first, last, ok := archive.Recoverable()
	if !ok {
		return wait("the archive " + location + " holds no base yet; the servers start once it covers the target time")
	}
	var target time.Time
	if a.TargetTime != nil {
		target = a.TargetTime.UTC()
		if target.Before(first) {
			return wait(fmt.Sprintf("the archive %s begins at %s, after targetTime %s: nothing before its first base can be recovered; create a RedisPersistence with a later targetTime",
				location, rfc3339(first), rfc3339(target)))
		}
		if target.After(last) {
			// Not how far it reaches: the message, and its event, would
			// change at every read.
			return wait(fmt.Sprintf("the archive %s does not reach targetTime %s yet; the servers start once it does", location, rfc3339(target)))
		}
	}
	if _, err := archive.Plan(target); err != nil {
		return wait(fmt.Sprintf("the archive %s: %v", location, err))
	}
	if target.IsZero() {
		target = last
	}
	rp.Status.Recovery = &v1alpha1.RecoveryStatus{Archive: location, TargetTime: &metav1.Time{Time: target}}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "Restoring", "the first server starts on the archive %s replayed up to %s (the archive covers %s to %s)",
		location, rfc3339(target), rfc3339(first), rfc3339(last))
	return true, 0, nil
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// recoveryObjects is the ConfigMap <name>-recovery while spec.bootstrap is
// set; without it the ConfigMap is deleted.
func (r *RedisPersistenceReconciler) recoveryObjects(ctx context.Context, rp *v1alpha1.RedisPersistence) ([]client.Object, error) {
	if rp.Spec.Bootstrap != nil {
		return []client.Object{specs.RecoveryConfigMap(rp)}, nil
	}
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rp.Namespace, Name: specs.RecoveryConfigMapName(rp)}}
	if err := r.Delete(ctx, stale); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting the ConfigMap %s: %w", stale.Name, err)
	}
	return nil, nil
}

// finishRecovery records that the instance is Ready on the restored data
// and empties <name>-recovery.
func (r *RedisPersistenceReconciler) finishRecovery(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	rec := rp.Status.Recovery
	if rec == nil || rec.RestoredAt != nil || rp.Spec.Bootstrap == nil || !meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionReady) {
		return nil
	}
	now := metav1.NewTime(r.Clock.Now())
	rec.RestoredAt = &now
	if err := r.Patch(ctx, specs.RecoveryConfigMap(rp), client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
		rec.RestoredAt = nil
		return fmt.Errorf("emptying the ConfigMap %s: %w", specs.RecoveryConfigMapName(rp), err)
	}
	if rec.Archive != "" {
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "Restored", "the servers run on the archive %s replayed up to %s", rec.Archive, rfc3339(rec.TargetTime.Time))
	} else {
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "Restored", "the servers run on the data of the backup %s", rec.Backup)
	}
	return nil
}

func pointOf(b *v1alpha1.RedisBackup) string {
	if b.Status.Point == nil {
		return "an unknown time"
	}
	return b.Status.Point.UTC().Format("2006-01-02T15:04:05Z")
}
