package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func withPodLabels(labels map[string]any) map[string]any {
	return map[string]any{"mode": "aof", "podMetadata": map[string]any{"labels": labels}}
}

func withService(service map[string]any) map[string]any {
	return map[string]any{"mode": "aof", "service": service}
}

func TestPodAndServiceOptionsRejected(t *testing.T) {
	spread := make([]any, 9)
	for i := range spread {
		spread[i] = map[string]any{"maxSkew": 1, "topologyKey": fmt.Sprintf("example.com/level-%d", i), "whenUnsatisfiable": "ScheduleAnyway"}
	}
	many := map[string]any{}
	for i := range 33 {
		many[fmt.Sprintf("example.com/k%d", i)] = "v"
	}
	for _, tc := range []rejection{
		{"too many spread constraints", map[string]any{"mode": "aof", "placement": map[string]any{"topologySpreadConstraints": spread}}, "spec.placement.topologySpreadConstraints: Too many: 9: must have at most 8 items"},
		{"spread constraint without topologyKey", map[string]any{"mode": "aof", "placement": map[string]any{"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}}}}, "spec.placement.topologySpreadConstraints[0].topologyKey: Required value"},
		{"priority class in upper case", map[string]any{"mode": "aof", "placement": map[string]any{"priorityClassName": "Critical"}}, "spec.placement.priorityClassName in body should match"},
		{"pod label selecting the instance", withPodLabels(map[string]any{"app.kubernetes.io/instance": "other"}), "spec.podMetadata.labels.app.kubernetes.io/instance is a label the operator selects the server pods by"},
		{"pod label naming the app", withPodLabels(map[string]any{"app.kubernetes.io/name": "valkey"}), "spec.podMetadata.labels.app.kubernetes.io/name is a label the operator selects the server pods by"},
		{"pod label part-of", withPodLabels(map[string]any{"app.kubernetes.io/part-of": "shop"}), "spec.podMetadata.labels.app.kubernetes.io/part-of is a label the operator selects the server pods by"},
		{"pod label setting the role", withPodLabels(map[string]any{"uringredis.io/role": "primary"}), "spec.podMetadata.labels.uringredis.io/role is a label the operator selects the server pods by"},
		{"pod label key with a space", withPodLabels(map[string]any{"cost centre": "a"}), "spec.podMetadata.labels keys are label keys"},
		{"pod label value with a slash", withPodLabels(map[string]any{"team": "a/b"}), "spec.podMetadata.labels.team in body should match"},
		{"pod label value too long", withPodLabels(map[string]any{"team": strings.Repeat("a", 64)}), "spec.podMetadata.labels.team: Too long"},
		{"too many pod labels", withPodLabels(many), "spec.podMetadata.labels: Too many: 33: must have at most 32 items"},
		{"pod annotation key with a space", map[string]any{"mode": "aof", "podMetadata": map[string]any{"annotations": map[string]any{"my note": "x"}}}, "spec.podMetadata.annotations keys are annotation keys"},
		{"too many pod annotations", map[string]any{"mode": "aof", "podMetadata": map[string]any{"annotations": many}}, "spec.podMetadata.annotations: Too many: 33: must have at most 32 items"},
		{"Service type ExternalName", withService(map[string]any{"type": "ExternalName"}), `spec.service.type: Unsupported value: "ExternalName"`},
		{"Service type in lower case", withService(map[string]any{"type": "loadbalancer"}), `spec.service.type: Unsupported value: "loadbalancer"`},
		{"Service annotation key with a space", withService(map[string]any{"annotations": map[string]any{"load balancer": "internal"}}), "spec.service.annotations keys are annotation keys"},
		{"too many Service annotations", withService(map[string]any{"annotations": many}), "spec.service.annotations: Too many: 33: must have at most 32 items"},
		{"Service annotation value too long", withService(map[string]any{"annotations": map[string]any{"example.com/x": strings.Repeat("x", 4097)}}), "spec.service.annotations.example.com/x: Too long"},
	} {
		expectRejected(t, tc)
	}
}

// Every option at once is accepted, including operator keys that are not
// selector labels (the operator's value wins there, see internal/specs);
// an empty spec.service defaults to ClusterIP.
func TestPodAndServiceOptionsAccepted(t *testing.T) {
	spec := map[string]any{
		"mode": "aof", "replicas": 3,
		"placement": map[string]any{
			"priorityClassName": "redis-critical",
			"topologySpreadConstraints": []any{
				map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"},
				map[string]any{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
					"labelSelector": map[string]any{"matchLabels": map[string]any{"team": "checkout"}}},
			},
		},
		"podMetadata": map[string]any{
			"labels":      map[string]any{"team": "checkout", "example.com/cost-centre": "4711", "app.kubernetes.io/managed-by": "me", "empty": ""},
			"annotations": map[string]any{"sidecar.istio.io/inject": "false", "uringredis.io/config-hash": "mine", "example.com/note": "any text / at all"},
		},
		"service": map[string]any{"type": "LoadBalancer", "annotations": map[string]any{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}},
	}
	if err := create(spec); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"ClusterIP", "NodePort"} {
		if err := create(withService(map[string]any{"type": typ})); err != nil {
			t.Errorf("type %s: %v", typ, err)
		}
	}
	u := newObject(withService(map[string]any{}))
	if err := k8s.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if typ, _, _ := unstructured.NestedString(u.Object, "spec", "service", "type"); typ != "ClusterIP" {
		t.Errorf("spec.service.type defaulted to %q, want ClusterIP", typ)
	}
}
