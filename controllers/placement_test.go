package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

func node(name, kernel string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Spec: corev1.NodeSpec{Taints: taints}}
	n.Status.NodeInfo.KernelVersion = kernel
	if l, ok := kernelVersionLabels(kernel); ok {
		for k, v := range l {
			n.Labels[k] = v
		}
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	return n
}

func TestParseMajorMinor(t *testing.T) {
	for in, want := range map[string][2]int{
		"6.0": {6, 0}, "10.2": {10, 2}, "5.15.0": {5, 15},
		"6.8.0-1015-aws": {6, 8}, "5.15.0-119-generic": {5, 15}, "6.1.0-28-cloud-amd64": {6, 1},
		"6.18.44-fc-v782": {6, 18}, "4.18.0-553.el8_10.x86_64": {4, 18}, "6.6.63+": {6, 6},
		// ParseGeneric takes a leading "v"; no kernel release has one, and
		// minKernelVersion's pattern refuses it before it gets here.
		"v6.1": {6, 1},
	} {
		major, minor, ok := specs.ParseMajorMinor(in)
		if !ok || major != want[0] || minor != want[1] {
			t.Errorf("parseMajorMinor(%q) = %d.%d %v, want %v", in, major, minor, ok, want)
		}
	}
	for _, in := range []string{"", "six", "6", "6.x", "-6.1"} {
		if _, _, ok := specs.ParseMajorMinor(in); ok {
			t.Errorf("parseMajorMinor(%q) accepted", in)
		}
	}
}

func TestKernelEligibility(t *testing.T) {
	nodes := []corev1.Node{node("old", "5.15.0-119-generic", nil), node("lts", "6.1.0-28-cloud-amd64", nil), node("new", "6.8.0-1015-aws", nil)}
	tainted := node("tainted", "6.8.0", nil, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})
	cordoned := node("cordoned", "6.8.0", nil)
	cordoned.Spec.Unschedulable = true

	cases := []struct {
		desc  string
		spec  v1alpha1.RedisPersistenceSpec
		nodes []corev1.Node
		want  int
	}{
		{"uring needs 6.0 by default", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}, nodes, 2},
		{"explicit minimum 6.5", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{MinKernelVersion: "6.5"}}, nodes, 1},
		{"minimum above every node", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{MinKernelVersion: "7.0"}}, nodes, 0},
		{"minor compared within major", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{MinKernelVersion: "5.16"}}, nodes, 2},
		{"aof runs anywhere", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF}, nodes, 3},
		{"only old nodes", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}, nodes[:1], 0},
		{"taints and cordons exclude", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}, []corev1.Node{tainted, cordoned}, 0},
		{"tolerated taint", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}}}, []corev1.Node{tainted}, 1},
		{"node selector narrows", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{
			NodeSelector: map[string]string{"disk": "nvme"}}}, append(nodes, node("nvme", "6.1.0", map[string]string{"disk": "nvme"})), 1},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			rp := specstest.NewRedisPersistence(tc.spec)
			sts := specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, ""))
			if got := eligibleNodes(tc.nodes, &sts.Spec.Template.Spec); got != tc.want {
				t.Errorf("eligible nodes = %d, want %d", got, tc.want)
			}
		})
	}
}

// The node affinity, built from the kernel labels, admits exactly the kernels
// that version.AtLeast orders at or above the minimum.
func TestKernelAffinityFollowsVersionOrder(t *testing.T) {
	kernels := []string{"5.15.0", "5.15.0-119-generic", "6.0.0", "6.1.0-28-cloud-amd64", "6.8.0-1015-aws", "6.18.44-fc-v782", "7.0.1"}
	for _, minimum := range []string{"5.15", "5.16", "6.0", "6.1", "6.2", "6.18", "6.19", "7.0"} {
		rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{MinKernelVersion: minimum}})
		spec := specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, "")).Spec.Template.Spec
		for _, kernel := range kernels {
			admitted := eligibleNodes([]corev1.Node{node("n", kernel, nil)}, &spec) == 1
			if want := version.MustParseGeneric(kernel).AtLeast(version.MustParseGeneric(minimum)); admitted != want {
				t.Errorf("minimum %s, kernel %s: admitted %v, want %v", minimum, kernel, admitted, want)
			}
		}
	}
}

// Either set of kernel labels qualifies a node: NFD's alone (a cluster
// without the node labeler), the operator's alone, or both.
func TestEitherKernelLabelSetQualifies(t *testing.T) {
	nfdOnly := node("nfd", "6.8.0", map[string]string{specs.NFDKernelLabels.Major: "6", specs.NFDKernelLabels.Minor: "8"})
	delete(nfdOnly.Labels, specs.OperatorKernelLabels.Major)
	delete(nfdOnly.Labels, specs.OperatorKernelLabels.Minor)
	both := node("both", "6.8.0", map[string]string{specs.NFDKernelLabels.Major: "6", specs.NFDKernelLabels.Minor: "8"})
	oldNFD := node("old-nfd", "5.15.0", map[string]string{specs.NFDKernelLabels.Major: "5", specs.NFDKernelLabels.Minor: "15"})
	rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	sts := specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, ""))
	for _, tc := range []struct {
		node corev1.Node
		want int
	}{{nfdOnly, 1}, {node("operator", "6.1.0", nil), 1}, {both, 1}, {oldNFD, 0}, {node("unlabelled", "", nil), 0}} {
		if got := eligibleNodes([]corev1.Node{tc.node}, &sts.Spec.Template.Spec); got != tc.want {
			t.Errorf("node %s (labels %v): eligible %d, want %d", tc.node.Name, tc.node.Labels, got, tc.want)
		}
	}
}
