package controllers

import (
	"context"
	"fmt"
	"strconv"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// What a RedisPersistence's status says about its readiness, its server
// process, its data volume and its certificate, as operator metrics for the
// chart's alerts (RedisPersistenceNotReady, RedisServerRestarting,
// RedisStorageWriteBarrierDisabled, RedisCertificateExpiring) and the instance
// dashboard.
var (
	instanceLabels = []string{"namespace", "redispersistence"}

	instanceReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_redispersistence_ready",
		Help: "1 while the RedisPersistence's Ready condition is true, else 0; the condition's reason says why not.",
	}, instanceLabels)

	instanceRestarts = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_redispersistence_restarts",
		Help: "Restarts of the server container in the RedisPersistence's current pod (status.restarts).",
	}, instanceLabels)
	instanceDegraded = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_redispersistence_degraded",
		Help: "1 while the RedisPersistence's Degraded condition is true (its server restarted within 10 minutes), else 0.",
	}, instanceLabels)
	storageFsync = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_storage_fsync_seconds",
		Help: "Latency quantiles of a 4 KiB write + fdatasync on the data volume of the RedisPersistence's pod as the server lays out its log (overwriting preallocated space; appending, with images that measure only that), measured when the pod started (status.storage).",
	}, append(instanceLabels, "pod", "quantile"))
	storageBarrierDisabled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_storage_write_barrier_disabled",
		Help: "1 while a durable mode runs on a data volume without write barriers over a volatile cache (StorageReady=False WriteBarrierDisabled), else 0.",
	}, instanceLabels)
	// From status.tls, not from the Secret: a renewed certificate the
	// servers have not loaded yet does not hide the one they present.
	tlsNotAfter = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_tls_certificate_expiration_timestamp_seconds",
		Help: "When the certificate the RedisPersistence's servers present expires (status.tls.notAfter), as a Unix time.",
	}, instanceLabels)
	archiveLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_archive_last_archived_timestamp_seconds",
		Help: "The latest point the RedisPersistence's AOF archive can be recovered to (status.archive.lastArchivedTime), as a Unix time.",
	}, instanceLabels)
	archiveFirst = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_archive_first_recoverable_timestamp_seconds",
		Help: "The earliest point the RedisPersistence's AOF archive can be recovered to (status.archive.firstRecoverableTime), as a Unix time.",
	}, instanceLabels)
	archiveInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_archive_interval_seconds",
		Help: "How often the RedisPersistence's archive container ships the AOF (spec.backup.archive.interval).",
	}, instanceLabels)
	archiveStoredBackups = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_archive_stored_backups",
		Help: "Completed backups the store holds under the archived RedisPersistence's path (status.archive.storedBackups), counted when the operator reads the archive: 0 means the archive is the only copy of the data outside the cluster.",
	}, instanceLabels)
	archiveVecs = []*prometheus.GaugeVec{archiveLast, archiveFirst, archiveInterval, archiveStoredBackups}
	shardSlots  = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_cluster_shard_slots",
		Help: "Hash slots the primary of a sharded RedisPersistence's shard serves (status.shards[].slotCount).",
	}, append(instanceLabels, "shard"))
	shardLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_cluster_replica_lag_bytes",
		Help: "Bytes of its primary's replication stream a shard's replica has not received (status.shards[].servers[].lag).",
	}, append(instanceLabels, "shard", "pod"))
)

func init() {
	metrics.Registry.MustRegister(instanceReady, instanceRestarts, instanceDegraded, storageFsync, storageBarrierDisabled, archiveLast, archiveFirst, archiveInterval,
		archiveStoredBackups, tlsNotAfter, shardSlots, shardLag)
}

// exportInstanceMetrics sets the instance's series from its status, as the
// deferred status patch is about to write it.
func exportInstanceMetrics(rp *v1alpha1.RedisPersistence) {
	l := prometheus.Labels{"namespace": rp.Namespace, "redispersistence": rp.Name}
	instanceReady.With(l).Set(boolGauge(meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionReady)))
	instanceRestarts.With(l).Set(float64(rp.Status.Restarts))
	instanceDegraded.With(l).Set(boolGauge(meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionDegraded)))
	storage := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionStorageReady)
	storageBarrierDisabled.With(l).Set(boolGauge(storage != nil && storage.Reason == ReasonWriteBarrierDisabled))
	storageFsync.DeletePartialMatch(l)
	if st := rp.Status.Storage; st != nil && st.FsyncP50 != nil && st.FsyncP99 != nil {
		// The pod label lets the instance dashboard select the series with its pod variable.
		pod := prometheus.Labels{"namespace": rp.Namespace, "redispersistence": rp.Name, "pod": rp.Name + "-0"}
		storageFsync.With(withQuantile(pod, 0.5)).Set(st.FsyncP50.Seconds())
		storageFsync.With(withQuantile(pod, 0.99)).Set(st.FsyncP99.Seconds())
	}
	for _, v := range archiveVecs {
		v.Delete(l)
	}
	tlsNotAfter.Delete(l)
	if st := rp.Status.TLS; st != nil && st.NotAfter != nil {
		tlsNotAfter.With(l).Set(float64(st.NotAfter.Unix()))
	}
	shardSlots.DeletePartialMatch(l)
	shardLag.DeletePartialMatch(l)
	for _, s := range rp.Status.Shards {
		shard := strconv.Itoa(int(s.Index))
		shardSlots.With(prometheus.Labels{"namespace": rp.Namespace, "redispersistence": rp.Name, "shard": shard}).Set(float64(s.SlotCount))
		for _, server := range s.Servers {
			if server.Role == v1alpha1.RoleReplica {
				shardLag.With(prometheus.Labels{"namespace": rp.Namespace, "redispersistence": rp.Name, "shard": shard, "pod": server.Pod}).Set(float64(server.Lag))
			}
		}
	}
	if specs.ArchiveEnabled(rp) {
		archiveInterval.With(l).Set(specs.ArchiveInterval(rp).Seconds())
		if st := rp.Status.Archive; st != nil && st.LastArchivedTime != nil && st.FirstRecoverableTime != nil {
			archiveLast.With(l).Set(float64(st.LastArchivedTime.Unix()))
			archiveFirst.With(l).Set(float64(st.FirstRecoverableTime.Unix()))
		}
		if st := rp.Status.Archive; st != nil && st.StoredBackups != nil {
			archiveStoredBackups.With(l).Set(float64(*st.StoredBackups))
		}
	}
}

func forgetInstanceMetrics(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "redispersistence": name}
	instanceReady.Delete(l)
	instanceRestarts.Delete(l)
	instanceDegraded.Delete(l)
	storageBarrierDisabled.Delete(l)
	storageFsync.DeletePartialMatch(l)
	for _, v := range archiveVecs {
		v.Delete(l)
	}
	tlsNotAfter.Delete(l)
	shardSlots.DeletePartialMatch(l)
	shardLag.DeletePartialMatch(l)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// The servers' own metrics come from their exporter sidecars; a PodMonitor
// has the Prometheus Operator scrape them, where the cluster serves the kind.

// podMonitor returns the PodMonitor to apply, or nil when the cluster does
// not serve the kind or the spec turns it off; then it deletes the one the
// operator made before.
func (r *RedisPersistenceReconciler) podMonitor(ctx context.Context, rp *v1alpha1.RedisPersistence) (client.Object, error) {
	if _, err := r.RESTMapper().RESTMapping(specs.PodMonitorGVK.GroupKind(), specs.PodMonitorGVK.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("looking up the PodMonitor kind: %w", err)
	}
	if err := r.watchPodMonitors(ctx); err != nil {
		return nil, err
	}
	if specs.ExporterEnabled(rp) && ptr.Deref(rp.Spec.Monitoring.PodMonitor.Enabled, true) {
		return specs.PodMonitor(rp), nil
	}
	pm := &monitoringv1.PodMonitor{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: rp.Name}, pm); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading PodMonitor %s: %w", rp.Name, err)
	}
	if !metav1.IsControlledBy(pm, rp) {
		return nil, nil // not ours: left alone
	}
	if err := r.Delete(ctx, pm, client.Preconditions{UID: ptr.To(pm.UID)}); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("deleting PodMonitor %s: %w", rp.Name, err)
	}
	r.Recorder.Event(rp, corev1.EventTypeNormal, "DeletedPodMonitor", "monitoring is off: deleted the PodMonitor")
	return nil, nil
}

// watchPodMonitors starts watching the PodMonitors the operator owns, once:
// the kind may be served only after the operator started (the Prometheus
// Operator installed later), so the watch cannot be set up with the others.
// It returns once the watch delivers events, so nothing the reconcile applies
// next goes unseen.
func (r *RedisPersistenceReconciler) watchPodMonitors(ctx context.Context) error {
	if r.watchingPodMonitor.Load() || r.controller == nil {
		return nil
	}
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	if r.watchingPodMonitor.Load() {
		return nil
	}
	owner := handler.EnqueueRequestForOwner(r.Scheme(), r.RESTMapper(), &v1alpha1.RedisPersistence{}, handler.OnlyControllerOwner())
	src := source.Kind(r.cache, client.Object(&monitoringv1.PodMonitor{}), owner)
	if err := r.controller.Watch(src); err != nil {
		return fmt.Errorf("watching PodMonitors: %w", err)
	}
	// A source that did not sync in time is cancelled; the next reconcile starts another.
	if err := src.WaitForSync(ctx); err != nil {
		return fmt.Errorf("waiting for the PodMonitor watch: %w", err)
	}
	r.watchingPodMonitor.Store(true)
	return nil
}
