package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// connectionSecret is the connection Secret (specs.ConnectionSecret) to
// apply with rp's other objects, from the credentials this reconcile read:
// a new password, or TLS or Sentinels turned on or off, reach it in the
// reconcile that sees them, and applying it every time puts back a key
// edited by hand (the Secret is owned, so such an edit brings rp back).
//
// It is nil while a Secret of that name exists that is not the operator's:
// server-side apply would take over the keys of a Secret someone else keeps.
// The server runs regardless, so that is a warning, not a condition.
// Nothing here logs or reports the Secret's data.
func (r *RedisPersistenceReconciler) connectionSecret(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials) (*corev1.Secret, error) {
	in := specs.ConnectionInputs{Password: creds.password}
	if creds.certs != nil {
		in.CACert = creds.certs.caPEM
	}
	return r.unlessTaken(ctx, rp, specs.ConnectionSecret(rp, in))
}

// unlessTaken returns the connection Secret secret, or nil (with a warning)
// while a Secret of its name exists that is not the operator's.
func (r *RedisPersistenceReconciler) unlessTaken(ctx context.Context, rp *v1alpha1.RedisPersistence, secret *corev1.Secret) (*corev1.Secret, error) {
	name := secret.Name
	// Uncached: a Secret created a moment ago must not be taken over
	// because the informer has not seen it yet.
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, existing)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading the connection Secret's metadata: %w", err)
	case existing.Labels[specs.LabelManagedBy] != specs.FieldOwner || existing.Labels[specs.LabelInstance] != rp.Name:
		log.FromContext(ctx).Info("a Secret the operator does not manage has the connection Secret's name; leaving it", "redispersistence", klogRef(rp), "secret", name)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "ConnectionSecretTaken",
			"the Secret %s, where the operator keeps how to connect to this instance, exists and is not the operator's; it is left as it is (delete it to have the operator's)", name)
		return nil, nil
	}
	return secret, nil
}
