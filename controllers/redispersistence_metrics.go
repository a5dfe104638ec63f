package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// What a RedisPersistence's status says about its server process and its
// data volume, as operator metrics for the chart's RedisServerRestarting and
// RedisStorageWriteBarrierDisabled alerts and the instance dashboard.
var (
	instanceLabels = []string{"namespace", "redispersistence"}

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
)

func init() {
	metrics.Registry.MustRegister(instanceRestarts, instanceDegraded, storageFsync, storageBarrierDisabled)
}

// exportInstanceMetrics sets the instance's series from its status.
func exportInstanceMetrics(rp *v1alpha1.RedisPersistence) {
	l := prometheus.Labels{"namespace": rp.Namespace, "redispersistence": rp.Name}
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
}

func forgetInstanceMetrics(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "redispersistence": name}
	instanceRestarts.Delete(l)
	instanceDegraded.Delete(l)
	storageBarrierDisabled.Delete(l)
	storageFsync.DeletePartialMatch(l)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
