package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Backups as operator metrics: what each RedisBackup's status says, replaced
// whenever it is reconciled and dropped with it. The newest point of an
// instance is max by (namespace, redispersistence) of
// uringredis_backup_point_timestamp_seconds.
var (
	backupLabels = []string{"namespace", "backup", "redispersistence"}

	backupPoint = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_point_timestamp_seconds",
		Help: "The instant a completed backup holds (every write acknowledged before it), as a Unix time.",
	}, backupLabels)
	backupCompletion = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_completion_timestamp_seconds",
		Help: "When a backup was verified in the object store, as a Unix time.",
	}, backupLabels)
	backupDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_duration_seconds",
		Help: "How long a completed backup took, from its Job's start to the snapshot verified in the store.",
	}, backupLabels)
	backupSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_size_bytes",
		Help: "Size of a completed backup's snapshot in the object store.",
	}, backupLabels)
	backupFailed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_failed",
		Help: "1 when the backup failed for good (phase Failed), else 0.",
	}, backupLabels)

	// The last verification of a backup (spec.backup.verify), once it has a
	// result. The newest of an instance is the one with the greatest
	// uringredis_backup_verification_timestamp_seconds.
	backupVerification = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_verification_timestamp_seconds",
		Help: "When the backup's last verification ended, Verified or Failed, as a Unix time.",
	}, backupLabels)
	backupVerified = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_verified_timestamp_seconds",
		Help: "When the backup's last verification found its restore to match what the backup recorded, as a Unix time; absent when it failed.",
	}, backupLabels)
	backupVerificationFailed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_verification_failed",
		Help: "1 when the backup's last verification failed (it did not restore, or the restore did not match what the backup recorded), 0 when it verified.",
	}, backupLabels)

	backupVecs = []*prometheus.GaugeVec{backupPoint, backupCompletion, backupDuration, backupSize, backupFailed,
		backupVerification, backupVerified, backupVerificationFailed}

	// backupNextDue is per instance with spec.backup.schedule (the
	// scheduler sets it), for the RedisBackupOverdue alert.
	backupNextDue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_backup_next_due_timestamp_seconds",
		Help: "The first run of the instance's spec.backup.schedule after the point of its newest completed backup (or its creation), as a Unix time: past it, a scheduled backup is due that no completed backup stands for yet.",
	}, []string{"namespace", "redispersistence"})
)

func init() {
	for _, v := range append(backupVecs, backupNextDue) {
		metrics.Registry.MustRegister(v)
	}
}

func forgetBackupDue(namespace, name string) {
	backupNextDue.Delete(prometheus.Labels{"namespace": namespace, "redispersistence": name})
}

// exportBackupMetrics replaces the backup's series with its status.
func exportBackupMetrics(b *v1alpha1.RedisBackup) {
	forgetBackupMetrics(b.Namespace, b.Name)
	l := prometheus.Labels{"namespace": b.Namespace, "backup": b.Name, "redispersistence": b.Spec.RedisPersistence.Name}
	failed := 0.0
	if b.Status.Phase == v1alpha1.BackupFailed {
		failed = 1
	}
	backupFailed.With(l).Set(failed)
	exportVerification(b, l)
	st := b.Status
	if st.Phase != v1alpha1.BackupCompleted || st.CompletedAt == nil {
		return
	}
	backupCompletion.With(l).Set(float64(st.CompletedAt.Unix()))
	backupSize.With(l).Set(float64(st.Size))
	if st.Point != nil {
		backupPoint.With(l).Set(float64(st.Point.Unix()))
	}
	if st.StartedAt != nil {
		backupDuration.With(l).Set(st.CompletedAt.Sub(st.StartedAt.Time).Seconds())
	}
}

// exportVerification sets the series of b's last verification once it has
// a result.
func exportVerification(b *v1alpha1.RedisBackup, l prometheus.Labels) {
	v := b.Status.Verification
	if v == nil || v.FinishedAt == nil || v.Result == v1alpha1.VerificationRunning {
		return
	}
	backupVerification.With(l).Set(float64(v.FinishedAt.Unix()))
	if v.Result == v1alpha1.VerificationVerified {
		backupVerified.With(l).Set(float64(v.FinishedAt.Unix()))
		backupVerificationFailed.With(l).Set(0)
		return
	}
	backupVerificationFailed.With(l).Set(1)
}

func forgetBackupMetrics(namespace, name string) {
	for _, v := range backupVecs {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "backup": name})
	}
}
