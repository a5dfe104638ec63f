package controllers

// The archive's reach (spec.backup.archive) in status.archive.
//
// The archive container beside each server ships the primary's AOF; it has
// no access to the Kubernetes API. The operator reads what the archive holds
// from the store (the timelines' records, not the segments) at most every
// archiveCheckEvery, so that status.archive and the uringredis_archive_*
// metrics say which points a new instance can be recovered to, and an
// archive that stopped moving is seen. It counts the backups in the store
// then too: with none, the archive is the only copy of the data outside the
// cluster (RedisArchiveOnlyCopy).

import (
	"cmp"
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

const (
	// defaultArchiveCheckEvery is how often the operator reads an archive.
	defaultArchiveCheckEvery = time.Minute
	// archiveReadBudget bounds one read of the store.
	archiveReadBudget = 15 * time.Second
)

// observeArchive records in rp.status.archive how far its archive reaches,
// reading the store when the last read is ArchiveCheckEvery old, and says
// when to read it next (0 without an archive). It runs on real time: the
// archive container ships on it.
func (r *RedisPersistenceReconciler) observeArchive(ctx context.Context, rp *v1alpha1.RedisPersistence) time.Duration {
	if !specs.ArchiveEnabled(rp) {
		rp.Status.Archive = nil
		return 0
	}
	archiveCheckEvery := cmp.Or(r.ArchiveCheckEvery, defaultArchiveCheckEvery)
	now := time.Now()
	if st := rp.Status.Archive; st != nil && st.CheckedAt != nil && now.Sub(st.CheckedAt.Time) < archiveCheckEvery {
		return archiveCheckEvery - now.Sub(st.CheckedAt.Time)
	}
	st := &v1alpha1.ArchiveStatus{CheckedAt: &metav1.Time{Time: now}}
	if old := rp.Status.Archive; old != nil {
		// What was read before stays when the store cannot be read now.
		st.FirstRecoverableTime, st.LastArchivedTime, st.Timelines = old.FirstRecoverableTime, old.LastArchivedTime, old.Timelines
		st.StoredBackups = old.StoredBackups
	}
	rp.Status.Archive = st
	ctx, cancel := context.WithTimeout(ctx, archiveReadBudget)
	defer cancel()
	store, err := openStore(ctx, r.APIReader, rp, specs.BackupPrefix(rp))
	if err != nil {
		st.Message = fmt.Sprintf("the archive cannot be read: %v", err)
		return archiveCheckEvery
	}
	archive, err := backup.ReadArchive(ctx, store)
	if err != nil {
		st.Message = fmt.Sprintf("the archive cannot be read: %v", err)
		return archiveCheckEvery
	}
	stored, err := backup.CountBackups(ctx, store)
	if err != nil {
		st.Message = fmt.Sprintf("the backups in the store cannot be listed: %v", err)
		return archiveCheckEvery
	}
	st.StoredBackups = ptr.To(int32(stored))
	first, last, ok := archive.Recoverable()
	if !ok {
		st.Message = "the archive holds no base yet: the archive container ships the primary's first one within " + specs.ArchiveInterval(rp).String()
		return archiveCheckEvery
	}
	st.FirstRecoverableTime, st.LastArchivedTime = &metav1.Time{Time: first}, &metav1.Time{Time: last}
	st.Timelines, st.Message = int32(len(archive.Timelines)), ""
	return archiveCheckEvery
}
