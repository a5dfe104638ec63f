package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// recordPredatedDefaults marks rp with AnnotationPredatesClosedDefaults when
// an operator older than closed defaults built its running StatefulSet, so an
// operator upgrade never closes a server to the clients that reach it today.
// It is the first thing a reconcile does: the builders read the mark.
func (r *RedisPersistenceReconciler) recordPredatedDefaults(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	if _, marked := rp.Annotations[specs.AnnotationPredatesClosedDefaults]; marked {
		return nil
	}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(rp), sts); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading StatefulSet %s: %w", rp.Name, err)
	}
	kept := specs.ClosedDefaultsPredated(rp, sts)
	if !metav1.IsControlledBy(sts, rp) || len(kept) == 0 {
		return nil
	}
	patch := client.MergeFrom(rp.DeepCopy())
	metav1.SetMetaDataAnnotation(&rp.ObjectMeta, specs.AnnotationPredatesClosedDefaults, strings.Join(kept, ","))
	if err := r.Patch(ctx, rp, patch); err != nil {
		return fmt.Errorf("recording the closed defaults the instance predates: %w", err)
	}
	what := "no NetworkPolicy is made for it"
	if specs.PredatesClosedDefault(rp, specs.ClosedDefaultPassword) {
		what = "it keeps running without a password (set spec.auth.disabled: true to keep it so) and " + what
	}
	r.Recorder.Event(rp, corev1.EventTypeWarning, "KeptOpen",
		"this server ran before the operator closed servers by default: "+what+
			"; remove the annotation "+specs.AnnotationPredatesClosedDefaults+" to close it (clients then need the generated password and the client label)")
	return nil
}

func generatePassword() (string, error) {
	b := make([]byte, specs.GeneratedPasswordBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ensureGeneratedSecret creates the generated password Secret unless it
// exists. It never replaces a password: a Secret of that name the operator
// did not make is an error the condition names.
func (r *RedisPersistenceReconciler) ensureGeneratedSecret(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	name := specs.GeneratedSecretName(rp)
	existing := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, existing)
	switch {
	case err == nil:
		if existing.Labels[specs.LabelManagedBy] != specs.FieldOwner || existing.Labels[specs.LabelInstance] != rp.Name {
			return fmt.Errorf("%w: the Secret %s, where the operator keeps the generated password, exists and is not the operator's; "+
				"name it in spec.auth.secretRef, or delete it", errAuthSecret, name)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the generated password Secret: %w", err)
	}
	password, err := generatePassword()
	if err != nil {
		return err
	}
	if err := r.Create(ctx, specs.AuthSecret(rp, password)); apierrors.IsAlreadyExists(err) {
		return nil // a reconcile before this one made it; the next one checks it
	} else if err != nil {
		return fmt.Errorf("creating the generated password Secret: %w", err)
	}
	log.FromContext(ctx).Info("generated a password", "redispersistence", klogRef(rp), "secret", name)
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "GeneratedPassword", "generated the server's password into the Secret %s (key %s)", name, specs.GeneratedPasswordKey)
	return nil
}

// errAuthSecret marks a Secret or key spec.auth names that is missing.
var errAuthSecret = errors.New("auth secret")

// password reads the server's password through the uncached reader, after
// generating it when the instance has no spec.auth. The error for a missing
// Secret or key names only what the spec names, so it can go into a
// condition.
func (r *RedisPersistenceReconciler) password(ctx context.Context, rp *v1alpha1.RedisPersistence) (string, error) {
	ref := specs.AuthSecretRef(rp)
	if ref == nil {
		return "", nil
	}
	named := "named in spec.auth.secretRef"
	if specs.AuthSourceOf(rp) == specs.AuthGenerated {
		if err := r.ensureGeneratedSecret(ctx, rp); err != nil {
			return "", err
		}
		named = "of the generated password"
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: ref.Name}, secret); apierrors.IsNotFound(err) {
		return "", fmt.Errorf("%w: the Secret %s %s does not exist", errAuthSecret, ref.Name, named)
	} else if err != nil {
		return "", fmt.Errorf("reading the auth Secret: %w", err)
	}
	password, ok := secret.Data[ref.Key]
	if !ok || len(password) == 0 {
		return "", fmt.Errorf("%w: the Secret %s %s has no key %q", errAuthSecret, ref.Name, named, ref.Key)
	}
	return string(password), nil
}
