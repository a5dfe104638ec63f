package specs_test

import (
	"bytes"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

// podOptionsSpec is the replicated instance with every pod and Service
// option a user may set, including keys the operator sets itself.
func podOptionsSpec() v1alpha1.RedisPersistenceSpec {
	spec := specstest.ReplicatedSpec
	spec.Placement = v1alpha1.PlacementSpec{
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway},
			{MaxSkew: 2, TopologyKey: "example.com/rack", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "checkout"}}},
		},
		PriorityClassName: "redis-critical",
	}
	spec.PodMetadata = &v1alpha1.PodMetadata{
		Labels: map[string]v1alpha1.LabelValue{"team": "checkout", specs.LabelManagedBy: "someone-else"},
		Annotations: map[string]v1alpha1.AnnotationValue{
			"example.com/owner": "checkout", specs.AnnotationConfigHash: "not-the-hash",
		},
	}
	spec.Service = &v1alpha1.ServiceSpec{
		Type:        corev1.ServiceTypeLoadBalancer,
		Annotations: map[string]v1alpha1.AnnotationValue{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
	}
	return spec
}

func TestPodOptionsGolden(t *testing.T) {
	got := renderReplicated(t, podOptionsSpec())
	if !bytes.Equal(got, renderReplicated(t, podOptionsSpec())) {
		t.Fatal("rendering the same spec twice gave different output")
	}
	compareGolden(t, filepath.Join("testdata", "replicated-pod-options.yaml"), got)
}

func TestTopologySpreadSelectsTheInstanceWhenLeftEmpty(t *testing.T) {
	rp := specstest.NewRedisPersistence(podOptionsSpec())
	constraints := specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, "")).Spec.Template.Spec.TopologySpreadConstraints
	if len(constraints) != 2 {
		t.Fatalf("%d constraints, want the user's 2", len(constraints))
	}
	if got := constraints[0].LabelSelector; got == nil || len(got.MatchLabels) != 2 ||
		got.MatchLabels[specs.LabelName] != "redis" || got.MatchLabels[specs.LabelInstance] != rp.Name {
		t.Errorf("constraint without labelSelector got %v, want the server selector", got)
	}
	if got := constraints[1].LabelSelector.MatchLabels; len(got) != 1 || got["team"] != "checkout" {
		t.Errorf("the user's own labelSelector became %v", got)
	}
	if rp.Spec.Placement.TopologySpreadConstraints[0].LabelSelector != nil {
		t.Error("building the StatefulSet wrote the selector into the RedisPersistence")
	}
}

func TestPodMetadataYieldsToTheOperator(t *testing.T) {
	rp := specstest.NewRedisPersistence(podOptionsSpec())
	in := specs.NewPodInputs(rp, "")
	template := specs.StatefulSet(rp, specstest.Options, in).Spec.Template
	if template.Labels["team"] != "checkout" || template.Annotations["example.com/owner"] != "checkout" {
		t.Errorf("the user's label and annotation are missing: %v %v", template.Labels, template.Annotations)
	}
	if got := template.Labels[specs.LabelManagedBy]; got != specs.FieldOwner {
		t.Errorf("%s is %q, want the operator's %q", specs.LabelManagedBy, got, specs.FieldOwner)
	}
	plain := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	want := specs.StatefulSet(plain, specstest.Options, specs.NewPodInputs(plain, "")).Spec.Template.Annotations[specs.AnnotationConfigHash]
	if got := template.Annotations[specs.AnnotationConfigHash]; got != want {
		t.Errorf("%s is %q, want the operator's %q", specs.AnnotationConfigHash, got, want)
	}

	sentinel := specs.SentinelStatefulSet(rp, specstest.Options, in).Spec.Template
	if _, ok := sentinel.Labels["team"]; ok {
		t.Errorf("the Sentinels got the servers' pod labels: %v", sentinel.Labels)
	}
	if sentinel.Spec.PriorityClassName != "redis-critical" || template.Spec.PriorityClassName != "redis-critical" {
		t.Errorf("priority classes: servers %q, Sentinels %q; want both redis-critical", template.Spec.PriorityClassName, sentinel.Spec.PriorityClassName)
	}
	if sentinel.Spec.TopologySpreadConstraints != nil {
		t.Errorf("the Sentinels got the servers' spread constraints: %v", sentinel.Spec.TopologySpreadConstraints)
	}
}

func TestServiceOptionsReachTheClientServicesOnly(t *testing.T) {
	rp := specstest.NewRedisPersistence(podOptionsSpec())
	const lbAnnotation = "service.beta.kubernetes.io/aws-load-balancer-internal"
	for _, svc := range []*corev1.Service{specs.ClientService(rp), specs.ReplicasService(rp)} {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Annotations[lbAnnotation] != "true" {
			t.Errorf("Service %s: type %q annotations %v; want LoadBalancer with the user's annotation", svc.Name, svc.Spec.Type, svc.Annotations)
		}
	}
	for _, svc := range []*corev1.Service{specs.HeadlessService(rp), specs.SentinelService(rp)} {
		if svc.Spec.Type != "" || svc.Annotations != nil {
			t.Errorf("Service %s: type %q annotations %v; want neither", svc.Name, svc.Spec.Type, svc.Annotations)
		}
	}
	if got := specs.ClientService(specstest.NewRedisPersistence(specstest.ReplicatedSpec)).Spec.Type; got != corev1.ServiceTypeClusterIP {
		t.Errorf("without spec.service the client Service is %q, want ClusterIP", got)
	}
}
