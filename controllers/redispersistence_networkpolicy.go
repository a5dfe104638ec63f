package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// removeNetworkPolicy deletes the NetworkPolicy the operator made for rp, if
// any: the instance's spec or the operator's default turned it off.
func (r *RedisPersistenceReconciler) removeNetworkPolicy(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	np := &networkingv1.NetworkPolicy{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: rp.Name}, np); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading NetworkPolicy %s: %w", rp.Name, err)
	}
	if !metav1.IsControlledBy(np, rp) {
		return nil // not ours: left alone
	}
	if err := r.Delete(ctx, np, client.Preconditions{UID: ptr.To(np.UID)}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NetworkPolicy %s: %w", rp.Name, err)
	}
	r.Recorder.Event(rp, corev1.EventTypeWarning, "DeletedNetworkPolicy", "the NetworkPolicy is off: any pod that reaches the server may connect")
	return nil
}
