package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// TestPodAndServiceOptions: spec.placement's spread constraints and
// priority class and spec.podMetadata reach the pods the StatefulSet
// controller creates; spec.service reaches the primary's and the replicas'
// Services, not the headless one, and goes again when it is removed.
func TestPodAndServiceOptions(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = "opts"
	priority := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "redis-" + ns}, Value: 1000}
	if err := k8s.Create(context.Background(), priority); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), priority) })
	const lbAnnotation = "service.beta.kubernetes.io/aws-load-balancer-internal"
	createVolumeFor(t, ns, "data-"+name+"-1")
	createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, Replicas: 2, Sentinel: &v1alpha1.SentinelSpec{Count: 2, Quorum: 1},
		Placement: v1alpha1.PlacementSpec{
			PriorityClassName: priority.Name,
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway},
			},
		},
		PodMetadata: &v1alpha1.PodMetadata{
			Labels:      map[string]v1alpha1.LabelValue{"team": "checkout", specs.LabelManagedBy: "someone-else"},
			Annotations: map[string]v1alpha1.AnnotationValue{"example.com/owner": "checkout"},
		},
		Service: &v1alpha1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Annotations: map[string]v1alpha1.AnnotationValue{lbAnnotation: "true"}},
	})

	pod := &corev1.Pod{}
	eventually(t, 30*time.Second, func() error { return get(t, pod, ns, name+"-0") })
	if pod.Labels["team"] != "checkout" || pod.Labels[specs.LabelManagedBy] != specs.FieldOwner || pod.Annotations["example.com/owner"] != "checkout" {
		t.Errorf("pod labels %v annotations %v: want the user's team and owner, the operator's managed-by", pod.Labels, pod.Annotations)
	}
	if pod.Spec.PriorityClassName != priority.Name || pod.Spec.Priority == nil || *pod.Spec.Priority != priority.Value {
		t.Errorf("pod priority class %q priority %v, want %s and %d", pod.Spec.PriorityClassName, pod.Spec.Priority, priority.Name, priority.Value)
	}
	if c := pod.Spec.TopologySpreadConstraints; len(c) != 1 || c[0].LabelSelector == nil || c[0].LabelSelector.MatchLabels[specs.LabelInstance] != name {
		t.Errorf("pod spread constraints %+v, want the zone constraint selecting the instance", c)
	}

	services := []string{name, name + "-replicas"}
	for _, svcName := range services {
		eventually(t, 30*time.Second, func() error {
			svc := &corev1.Service{}
			if err := get(t, svc, ns, svcName); err != nil {
				return err
			}
			if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Annotations[lbAnnotation] != "true" {
				return fmt.Errorf("Service %s: type %s annotations %v", svcName, svc.Spec.Type, svc.Annotations)
			}
			return nil
		})
	}
	headless := &corev1.Service{}
	if err := get(t, headless, ns, name+"-headless"); err != nil {
		t.Fatal(err)
	}
	if headless.Spec.Type != corev1.ServiceTypeClusterIP || headless.Spec.ClusterIP != corev1.ClusterIPNone || headless.Annotations[lbAnnotation] != "" {
		t.Errorf("headless Service: type %s clusterIP %s annotations %v", headless.Spec.Type, headless.Spec.ClusterIP, headless.Annotations)
	}

	// Back to the default: the operator's apply drops what it set, the
	// API server the node ports it allocated.
	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Service = nil })
	for _, svcName := range services {
		eventually(t, 30*time.Second, func() error {
			svc := &corev1.Service{}
			if err := get(t, svc, ns, svcName); err != nil {
				return err
			}
			if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Annotations[lbAnnotation] != "" || svc.Spec.Ports[0].NodePort != 0 {
				return fmt.Errorf("Service %s: type %s annotations %v node port %d", svcName, svc.Spec.Type, svc.Annotations, svc.Spec.Ports[0].NodePort)
			}
			return nil
		})
	}
}
