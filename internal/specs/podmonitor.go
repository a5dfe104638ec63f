package specs

import (
	"cmp"
	"maps"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// PodMonitorGVK is applied only when the cluster serves it.
var PodMonitorGVK = monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.PodMonitorsKind)

// InstanceTargetLabel names the RedisPersistence on every series scraped
// from its exporters, `up` included: Prometheus's own `up` is how the chart's
// RedisExporterDown alert tells these targets from every other, and the
// label joins the exporters' series with the operator's, which carry it too.
const InstanceTargetLabel = "redispersistence"

// PodMonitor scrapes the exporter sidecar of each of rp's server pods.
func PodMonitor(rp *v1alpha1.RedisPersistence) *monitoringv1.PodMonitor {
	meta := ObjectMeta(rp, rp.Name)
	// The operator's labels go last: the cache selects owned objects by them.
	labels := maps.Clone(rp.Spec.Monitoring.PodMonitor.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, meta.Labels)
	meta.Labels = labels
	return &monitoringv1.PodMonitor{
		TypeMeta:   metav1.TypeMeta{APIVersion: PodMonitorGVK.GroupVersion().String(), Kind: PodMonitorGVK.Kind},
		ObjectMeta: meta,
		Spec: monitoringv1.PodMonitorSpec{
			Selector: metav1.LabelSelector{MatchLabels: SelectorLabels(rp)},
			PodMetricsEndpoints: []monitoringv1.PodMetricsEndpoint{{
				Port:     "metrics",
				Interval: monitoringv1.Duration(cmp.Or(rp.Spec.Monitoring.PodMonitor.Interval, "30s")),
				RelabelConfigs: []monitoringv1.RelabelConfig{{
					// The pod's LabelInstance, as Prometheus's discovery spells it.
					SourceLabels: []monitoringv1.LabelName{"__meta_kubernetes_pod_label_app_kubernetes_io_instance"},
					TargetLabel:  InstanceTargetLabel,
				}},
			}},
		},
	}
}
