package controllers

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// eligibleNodes counts the nodes the pod template could be scheduled on by
// its required node affinity, node selector and NoSchedule/NoExecute taints.
// Capacity is the scheduler's business, not eligibility.
func eligibleNodes(nodes []corev1.Node, spec *corev1.PodSpec) int {
	pod := &corev1.Pod{Spec: *spec}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	count := 0
	for i := range nodes {
		node := &nodes[i]
		if node.Spec.Unschedulable {
			continue
		}
		if match, err := required.Match(node); err != nil || !match {
			continue
		}
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(node.Spec.Taints, spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		})
		if !untolerated {
			count++
		}
	}
	return count
}

// placementRequirement says in words what a node must offer.
func placementRequirement(version string, nodeSelector map[string]string) string {
	msg := "any node"
	if version != "" {
		msg = fmt.Sprintf("a node with kernel >= %s (labels %s/%s or %s/%s)", version,
			specs.NFDKernelLabels.Major, specs.NFDKernelLabels.Minor, specs.OperatorKernelLabels.Major, specs.OperatorKernelLabels.Minor)
	}
	for _, k := range slices.Sorted(maps.Keys(nodeSelector)) {
		msg += fmt.Sprintf(", %s=%s", k, nodeSelector[k])
	}
	return msg
}
