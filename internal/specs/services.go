package specs

import (
	_ "embed"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// ReplicasService selects the replicas, for reads that may lag. It is
// exposed as the primary's Service is (spec.service).
func ReplicasService(rp *v1alpha1.RedisPersistence) *corev1.Service {
	svc := ClientService(rp)
	svc.Name = ReplicasServiceName(rp)
	svc.Spec.Selector = withRole(SelectorLabels(rp), v1alpha1.RoleReplica)
	return svc
}

// SentinelService is what Sentinel-aware clients connect to.
func SentinelService(rp *v1alpha1.RedisPersistence) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: sentinelObjectMeta(rp, SentinelName(rp)),
		Spec: corev1.ServiceSpec{
			Selector: SentinelSelectorLabels(rp),
			Ports:    []corev1.ServicePort{{Name: "sentinel", Port: SentinelPort, TargetPort: intstr.FromString("sentinel"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

func withRole(labels map[string]string, role v1alpha1.ServerRole) map[string]string {
	labels[LabelRole] = string(role)
	return labels
}

// PodDisruptionBudgets let a drain take one server and one Sentinel at a
// time: the Sentinels keep their majority, and at most one failover is in
// flight.
func PodDisruptionBudgets(rp *v1alpha1.RedisPersistence) []*policyv1.PodDisruptionBudget {
	return []*policyv1.PodDisruptionBudget{
		podDisruptionBudget(ObjectMeta(rp, rp.Name), SelectorLabels(rp)),
		podDisruptionBudget(sentinelObjectMeta(rp, SentinelName(rp)), SentinelSelectorLabels(rp)),
	}
}

// podDisruptionBudget lets a drain take one of the pods selector selects at a time.
func podDisruptionBudget(meta metav1.ObjectMeta, selector map[string]string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: selector},
		},
	}
}

// HeadlessService gives each pod its DNS name <pod>.<name>-headless: the
// servers' and, for a replicated instance, the Sentinels'. It stays inside
// the cluster whatever spec.service says.
func HeadlessService(rp *v1alpha1.RedisPersistence) *corev1.Service {
	selector := SelectorLabels(rp)
	if Replicated(rp) {
		selector = map[string]string{labelPartOf: rp.Name}
	}
	svc := serverService(rp, HeadlessServiceName(rp), selector)
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.PublishNotReadyAddresses = true
	return svc
}

// ClientService selects the server, or a replicated instance's primary,
// exposed as spec.service asks.
func ClientService(rp *v1alpha1.RedisPersistence) *corev1.Service {
	selector := SelectorLabels(rp)
	if Replicated(rp) {
		selector = withRole(selector, v1alpha1.RolePrimary)
	}
	svc := serverService(rp, rp.Name, selector)
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	if rp.Spec.Service == nil {
		return svc
	}
	if rp.Spec.Service.Type != "" {
		svc.Spec.Type = rp.Spec.Service.Type
	}
	svc.Annotations = addMissing(svc.Annotations, rp.Spec.Service.Annotations)
	return svc
}

// serverService is a Service of the server pods selector selects, with the
// server's port and the exporter's.
func serverService(rp *v1alpha1.RedisPersistence, name string, selector map[string]string) *corev1.Service {
	ports := []corev1.ServicePort{{Name: "redis", Port: RedisPort, TargetPort: intstr.FromString("redis"), Protocol: corev1.ProtocolTCP}}
	if ExporterEnabled(rp) {
		ports = append(ports, corev1.ServicePort{Name: "metrics", Port: ExporterPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: ObjectMeta(rp, name),
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    ports,
		},
	}
}
