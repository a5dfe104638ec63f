package specs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// labelClient on a pod admits it to the server port of the instance it names,
// unless spec.NetworkPolicy.clients says otherwise.
const labelClient = "uringredis.io/client"

// NetworkPolicyEnabled is spec.NetworkPolicy.enabled, else the operator's
// default, except for an instance kept out of it (recordPredatedDefaults).
func NetworkPolicyEnabled(rp *v1alpha1.RedisPersistence, opts NetworkPolicyOptions) bool {
	if rp.Spec.NetworkPolicy != nil && rp.Spec.NetworkPolicy.Enabled != nil {
		return *rp.Spec.NetworkPolicy.Enabled
	}
	return opts.Enabled && !PredatesClosedDefault(rp, ClosedDefaultNetworkPolicy)
}

// NetworkPolicy admits to the server port the instance's clients, the
// RedisBenchmark runners that target it, its RedisBackup agents and the
// operator, and for a
// replicated instance its servers (replication) and Sentinels, for a
// sharded one its nodes (replication, and the cluster bus); to the
// exporter port the Prometheus pods; nothing else. Egress is left alone.
func NetworkPolicy(rp *v1alpha1.RedisPersistence, opts NetworkPolicyOptions) *networkingv1.NetworkPolicy {
	clients := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelClient: rp.Name}}}}
	if rp.Spec.NetworkPolicy != nil && len(rp.Spec.NetworkPolicy.Clients) > 0 {
		clients = nil
		for _, peer := range rp.Spec.NetworkPolicy.Clients {
			clients = append(clients, *peer.DeepCopy())
		}
	}
	clients = append(clients, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
		LabelManagedBy: FieldOwner, LabelComponent: "benchmark", LabelBenchmarkTarget: rp.Name,
	}}}, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
		LabelManagedBy: FieldOwner, LabelComponent: "backup", LabelBackupOf: rp.Name,
	}}})
	if opts.Operator != nil {
		clients = append(clients, *opts.Operator.DeepCopy())
	}
	if Replicated(rp) {
		clients = append(clients, replicationPeers(rp)...)
	}
	tcp := ptr.To(corev1.ProtocolTCP)
	ingress := []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: tcp, Port: ptr.To(intstr.FromInt32(RedisPort))}},
		From:  clients,
	}}
	if Sharded(rp) {
		// The nodes replicate from each other on the server port and
		// gossip on the bus, which only they reach.
		nodes := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(rp)}}
		ingress[0].From = append(ingress[0].From, nodes)
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: tcp, Port: ptr.To(intstr.FromInt32(ClusterBusPort))}},
			From:  []networkingv1.NetworkPolicyPeer{nodes},
		})
	}
	if ExporterEnabled(rp) && len(opts.Prometheus) > 0 {
		var scrapers []networkingv1.NetworkPolicyPeer
		for _, peer := range opts.Prometheus {
			scrapers = append(scrapers, *peer.DeepCopy())
		}
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: tcp, Port: ptr.To(intstr.FromInt32(ExporterPort))}},
			From:  scrapers,
		})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: ObjectMeta(rp, rp.Name),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: SelectorLabels(rp)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
}

// ParseNetworkPolicyOptions builds the options from the operator's flags:
// label lists as k=v,k=v. The operator is admitted only when its namespace
// and pod labels are both known.
func ParseNetworkPolicyOptions(enabled bool, operatorNamespace, operatorPodLabels, prometheusNamespaceLabels, prometheusPodLabels string) (NetworkPolicyOptions, error) {
	opts := NetworkPolicyOptions{Enabled: enabled}
	parse := func(flag, value string) (map[string]string, error) {
		m, err := labels.ConvertSelectorToLabelsMap(value)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		return m, nil
	}
	operator, err := parse("operator-pod-labels", operatorPodLabels)
	if err != nil {
		return opts, err
	}
	if operatorNamespace != "" && len(operator) > 0 {
		opts.Operator = &networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: operatorNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: operator},
		}
	}
	namespaces, err := parse("prometheus-namespace-labels", prometheusNamespaceLabels)
	if err != nil {
		return opts, err
	}
	pods, err := parse("prometheus-pod-labels", prometheusPodLabels)
	if err != nil {
		return opts, err
	}
	opts.Prometheus = []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: namespaces},
		PodSelector:       &metav1.LabelSelector{MatchLabels: pods},
	}}
	return opts, nil
}
