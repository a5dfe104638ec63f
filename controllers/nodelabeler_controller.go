package controllers

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// nodeLabelerFieldOwner owns the kernel labels on nodes, apart from the
// objects the operator makes for a RedisPersistence.
const nodeLabelerFieldOwner = "uring-redis-operator-node-labeler"

// NodeLabeler writes a node's kernel major and minor version as labels
// (OperatorKernelLabels), so clusters without Node Feature Discovery can
// schedule on kernel version with plain node affinity.
type NodeLabeler struct {
	client.Client
}

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// Patching nodes is not a marker: config/rbac/node_labeler_role.yaml grants
// it apart from the operator's role, bound only where the labeler runs.

func (r *NodeLabeler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	labels, ok := kernelVersionLabels(node.Status.NodeInfo.KernelVersion)
	if !ok {
		log.FromContext(ctx).Info("cannot parse the node's kernel version; leaving it unlabelled", "node", node.Name, "kernelVersion", node.Status.NodeInfo.KernelVersion)
		return ctrl.Result{}, nil
	}
	if node.Labels[specs.OperatorKernelLabels.Major] == labels[specs.OperatorKernelLabels.Major] &&
		node.Labels[specs.OperatorKernelLabels.Minor] == labels[specs.OperatorKernelLabels.Minor] {
		return ctrl.Result{}, nil
	}
	patch := &unstructured.Unstructured{}
	patch.SetAPIVersion("v1")
	patch.SetKind("Node")
	patch.SetName(node.Name)
	patch.SetLabels(labels)
	if err := r.Patch(ctx, patch, client.Apply, client.FieldOwner(nodeLabelerFieldOwner), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("labelling node %s: %w", node.Name, err)
	}
	return ctrl.Result{}, nil
}

func kernelVersionLabels(kernelVersion string) (map[string]string, bool) {
	major, minor, ok := specs.ParseMajorMinor(kernelVersion)
	if !ok {
		return nil, false
	}
	return map[string]string{
		specs.OperatorKernelLabels.Major: strconv.Itoa(major),
		specs.OperatorKernelLabels.Minor: strconv.Itoa(minor),
	}, true
}

// SetupWithManager reacts to new nodes and to kernel or label changes.
func (r *NodeLabeler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodelabeler").
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				oldNode, newNode := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
				return oldNode.Status.NodeInfo.KernelVersion != newNode.Status.NodeInfo.KernelVersion ||
					!maps.Equal(oldNode.Labels, newNode.Labels)
			},
		})).
		Complete(r)
}
