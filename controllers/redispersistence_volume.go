package controllers

import (
	"cmp"
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// A StatefulSet's volumeClaimTemplates cannot change, so spec.storage.size
// grows the volume by expanding the claim the StatefulSet made
// (data-<name>-0), where its StorageClass allows it. The claim template keeps
// the size the instance was created with (KeepClaimSize); the API refuses a
// smaller spec.storage.size.

// Reasons of the StorageResized condition.
const (
	ReasonVolumeSized         = "VolumeSized"
	ReasonVolumeExpanding     = "Expanding"
	ReasonExpansionNotAllowed = "ExpansionNotAllowed"
	ReasonClaimNotBound       = "ClaimNotBound"
)

// volumeResize is what resizing the data volume takes.
type volumeResize struct {
	// expandTo is set when the claim must be patched to ask for this size.
	expandTo *resource.Quantity
	condition
}

// planVolumeResize decides, from the claim and its StorageClass (nil when
// the claim names none or it does not exist), what growing the volume to
// want takes.
func planVolumeResize(want resource.Quantity, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) volumeResize {
	requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity, hasCapacity := claim.Status.Capacity[corev1.ResourceStorage]
	switch {
	case requested.Cmp(want) < 0 && claim.Status.Phase != corev1.ClaimBound:
		return volumeResize{condition: condition{metav1.ConditionFalse, ReasonClaimNotBound,
			fmt.Sprintf("the claim asks for %s and is not bound yet; it is expanded to %s once it is", requested.String(), want.String())}}
	case requested.Cmp(want) < 0 && (class == nil || !ptr.Deref(class.AllowVolumeExpansion, false)):
		name := ptr.Deref(claim.Spec.StorageClassName, "")
		return volumeResize{condition: condition{metav1.ConditionFalse, ReasonExpansionNotAllowed,
			fmt.Sprintf("the volume stays at %s: its StorageClass %q does not allow volume expansion (allowVolumeExpansion); spec.storage.size %s takes a class that does, or a new RedisPersistence",
				requested.String(), name, want.String())}}
	case requested.Cmp(want) < 0:
		return volumeResize{expandTo: &want, condition: condition{metav1.ConditionFalse, ReasonVolumeExpanding,
			fmt.Sprintf("expanding the volume from %s to %s", requested.String(), want.String())}}
	case hasCapacity && capacity.Cmp(requested) < 0:
		return volumeResize{condition: condition{metav1.ConditionFalse, ReasonVolumeExpanding,
			fmt.Sprintf("the claim asks for %s; the volume has %s until the storage driver and the node have expanded it", requested.String(), capacity.String())}}
	}
	return volumeResize{condition: condition{metav1.ConditionTrue, ReasonVolumeSized, "the volume has the size spec.storage.size asks for"}}
}

// resizeVolume grows the data claims (one per server) to spec.storage.size
// where their class allows it and returns the StorageResized condition, or
// nil while there is no claim to speak of.
func (r *RedisPersistenceReconciler) resizeVolume(ctx context.Context, rp *v1alpha1.RedisPersistence) (*condition, error) {
	if !specs.HasVolume(rp) {
		return nil, nil
	}
	// Every server's claim grows at once; the condition is the first one
	// not done, else the first server's.
	var first, pending *condition
	for _, claim := range specs.DataClaimNames(rp) {
		c, err := r.resizeClaim(ctx, rp, claim)
		if err != nil {
			return nil, err
		}
		if c != nil && c.status != metav1.ConditionTrue && pending == nil {
			pending = c
		}
		if first == nil {
			first = c
		}
	}
	return cmp.Or(pending, first), nil
}

// reportVolumeSize grows the data claims (resizeVolume) and sets the
// StorageResized condition, or removes it while there is no claim.
func (r *RedisPersistenceReconciler) reportVolumeSize(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	resized, err := r.resizeVolume(ctx, rp)
	if err != nil {
		return err
	}
	if resized != nil {
		r.setCondition(rp, v1alpha1.ConditionStorageResized, *resized)
	} else {
		meta.RemoveStatusCondition(&rp.Status.Conditions, v1alpha1.ConditionStorageResized)
	}
	return nil
}

// keepClaimTemplate keeps existing's claim template in sts, which a
// StatefulSet cannot change: its size (resizeVolume grows the claims) and
// its StorageClass, saying so when the storage profile now maps elsewhere.
func (r *RedisPersistenceReconciler) keepClaimTemplate(rp *v1alpha1.RedisPersistence, sts, existing *appsv1.StatefulSet) {
	if existing == nil {
		return
	}
	specs.KeepClaimSize(sts, existing)
	if kept, wanted, differ := specs.KeepClaimClass(sts, existing); differ {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "StorageClassKept",
			"the volume keeps StorageClass %s; storage profile %q now maps to %s, which only a new RedisPersistence uses",
			kept, specs.StorageOf(rp).Profile, wanted)
	}
}

// resizeClaim expands one data claim to spec.storage.size where it can; nil
// when the claim does not exist (yet).
func (r *RedisPersistenceReconciler) resizeClaim(ctx context.Context, rp *v1alpha1.RedisPersistence, name string) (*condition, error) {
	claim := &corev1.PersistentVolumeClaim{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, claim); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading the data claim %s: %w", name, err)
	}
	var class *storagev1.StorageClass
	if name := ptr.Deref(claim.Spec.StorageClassName, ""); name != "" {
		class = &storagev1.StorageClass{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Name: name}, class); apierrors.IsNotFound(err) {
			class = nil
		} else if err != nil {
			return nil, fmt.Errorf("reading StorageClass %s: %w", name, err)
		}
	}
	plan := planVolumeResize(specs.VolumeSize(rp), claim, class)
	if plan.expandTo != nil {
		patch := client.MergeFrom(claim.DeepCopy())
		if claim.Spec.Resources.Requests == nil {
			claim.Spec.Resources.Requests = corev1.ResourceList{}
		}
		claim.Spec.Resources.Requests[corev1.ResourceStorage] = *plan.expandTo
		if err := r.Patch(ctx, claim, patch); err != nil {
			r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedExpandVolume", "expanding the data claim %s to %s: %v", name, plan.expandTo.String(), err)
			return nil, fmt.Errorf("expanding the data claim %s: %w", name, err)
		}
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ExpandingVolume", "asked the data claim %s for %s", name, plan.expandTo.String())
	}
	return &plan.condition, nil
}
