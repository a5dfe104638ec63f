package specs

import (
	"fmt"
	"slices"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

const (
	// LabelScheduledFor names the RedisPersistence whose spec.backup.schedule
	// made a RedisBackup.
	LabelScheduledFor = "uringredis.io/scheduled-for"
	// AnnotationScheduledAt is the run of the schedule a RedisBackup is.
	AnnotationScheduledAt = "uringredis.io/scheduled-at"
	// FinalizerBackupObjects holds a scheduled RedisBackup until the operator
	// deleted its objects from the store.
	FinalizerBackupObjects = "uringredis.io/backup-objects"

	// DefaultRetentionCount is spec.backup.retention.count's default.
	DefaultRetentionCount = 7
	// scheduledNamePrefix is as much of the instance's name as a scheduled
	// backup's name holds: 43 + "-" + 12 digits is 56, a RedisBackup's most.
	scheduledNamePrefix = 43
)

// ParseSchedule parses spec.backup.schedule (UTC).
func ParseSchedule(schedule string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(schedule)
	if err != nil {
		return nil, fmt.Errorf("spec.backup.schedule %q: %w", schedule, err)
	}
	return s, nil
}

// DueBackup is the latest run of schedule due at now, after last (the
// newest run taken, or the instance's creation): zero when none is due. next
// is the run after now.
func DueBackup(schedule cron.Schedule, last, now time.Time) (due, next time.Time) {
	for t := schedule.Next(last.UTC()); !t.After(now); t = schedule.Next(t) {
		due = t
	}
	return due, schedule.Next(now.UTC())
}

// ScheduledBackup is the RedisBackup of rp's schedule's run at due.
func ScheduledBackup(rp *v1alpha1.RedisPersistence, due time.Time) *v1alpha1.RedisBackup {
	prefix := rp.Name
	if len(prefix) > scheduledNamePrefix {
		prefix = prefix[:scheduledNamePrefix]
	}
	return &v1alpha1.RedisBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name:        prefix + "-" + due.UTC().Format("200601021504"),
			Namespace:   rp.Namespace,
			Labels:      map[string]string{LabelScheduledFor: rp.Name, LabelManagedBy: FieldOwner},
			Annotations: map[string]string{AnnotationScheduledAt: due.UTC().Format(time.RFC3339)},
			Finalizers:  []string{FinalizerBackupObjects},
		},
		Spec: v1alpha1.RedisBackupSpec{RedisPersistence: v1alpha1.LocalObjectReference{Name: rp.Name}},
	}
}

// ScheduledAt is the run a scheduled RedisBackup is, zero if unknown.
func ScheduledAt(b *v1alpha1.RedisBackup) time.Time {
	t, _ := time.Parse(time.RFC3339, b.Annotations[AnnotationScheduledAt])
	return t
}

// ExpiredBackups are the scheduled backups of rp that spec.backup.retention
// lets go: the completed ones beyond the newest count, or whose point is
// older than maxAge, and the failed ones older than the newest completed
// one. The newest completed backup always stays, and so does every backup
// still running.
func ExpiredBackups(rp *v1alpha1.RedisPersistence, backups []v1alpha1.RedisBackup, now time.Time) []*v1alpha1.RedisBackup {
	if rp.Spec.Backup == nil || rp.Spec.Backup.Retention == nil {
		return nil
	}
	ret := rp.Spec.Backup.Retention
	count := int(ret.Count)
	if count == 0 {
		count = DefaultRetentionCount
	}
	var completed []*v1alpha1.RedisBackup
	for i := range backups {
		if backups[i].Status.Phase == v1alpha1.BackupCompleted && backups[i].Status.Point != nil {
			completed = append(completed, &backups[i])
		}
	}
	slices.SortFunc(completed, func(a, b *v1alpha1.RedisBackup) int { return b.Status.Point.Compare(a.Status.Point.Time) })
	var expired []*v1alpha1.RedisBackup
	for i, b := range completed {
		old := ret.MaxAge != nil && now.Sub(b.Status.Point.Time) > ret.MaxAge.Duration
		if i > 0 && (i >= count || old) {
			expired = append(expired, b)
		}
	}
	if len(completed) > 0 {
		newest := ScheduledAt(completed[0])
		for i := range backups {
			if b := &backups[i]; b.Status.Phase == v1alpha1.BackupFailed && ScheduledAt(b).Before(newest) {
				expired = append(expired, b)
			}
		}
	}
	return expired
}

// BackupExpiry is when the completed backup b expires: its point plus
// spec.expiresAfter; without it, the expiry it was given as it completed
// (status.expiresAt), or, while it completes, its point plus
// instanceDefault (DefaultExpiresAfter). Nil: it does not expire. In whole
// seconds, as the status keeps it.
func BackupExpiry(b *v1alpha1.RedisBackup, instanceDefault *metav1.Duration) *metav1.Time {
	if b.Status.Phase != v1alpha1.BackupCompleted || b.Status.Point == nil {
		return nil
	}
	after := b.Spec.ExpiresAfter
	if after == nil {
		if b.Status.ExpiresAt != nil || instanceDefault == nil {
			return b.Status.ExpiresAt
		}
		after = instanceDefault
	}
	return &metav1.Time{Time: b.Status.Point.Add(after.Duration).Truncate(time.Second)}
}

// DefaultExpiresAfter is the expiry of a backup made by hand without
// spec.expiresAfter: rp's spec.backup.retention.maxAge, as the retention of
// a CloudNativePG cluster covers its on-demand backups. It is read once,
// when the backup completes, so that a retention set later never deletes
// what was taken before. Scheduled backups have none: retention's count
// and maxAge keep them, and always the newest. rp may be nil.
func DefaultExpiresAfter(b *v1alpha1.RedisBackup, rp *v1alpha1.RedisPersistence) *metav1.Duration {
	if rp == nil || b.Labels[LabelScheduledFor] != "" || rp.Spec.Backup == nil || rp.Spec.Backup.Retention == nil {
		return nil
	}
	return rp.Spec.Backup.Retention.MaxAge
}
