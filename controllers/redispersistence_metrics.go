package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// What a RedisPersistence's status says about its server process, as operator
// metrics for the chart's RedisServerRestarting alert.
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
)

func init() {
	metrics.Registry.MustRegister(instanceRestarts, instanceDegraded)
}

func exportInstanceMetrics(rp *v1alpha1.RedisPersistence, degraded bool) {
	l := prometheus.Labels{"namespace": rp.Namespace, "redispersistence": rp.Name}
	instanceRestarts.With(l).Set(float64(rp.Status.Restarts))
	value := 0.0
	if degraded {
		value = 1
	}
	instanceDegraded.With(l).Set(value)
}

func forgetInstanceMetrics(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "redispersistence": name}
	instanceRestarts.Delete(l)
	instanceDegraded.Delete(l)
}
