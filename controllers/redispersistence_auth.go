package controllers

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Where a server's password comes from.
type authSource string

const (
	// authFromSecret: spec.auth.secretRef, a Secret of the user's.
	authFromSecret authSource = "secret"
	// authGenerated: no spec.auth; the operator's Secret <name>-auth.
	authGenerated authSource = "generated"
	// authDisabled: spec.auth.disabled, no password.
	authDisabled authSource = "disabled"
	// authPredatesGenerated: no spec.auth on an instance that ran without a
	// password before the operator generated passwords; it keeps running
	// without one until its owner chooses.
	authPredatesGenerated authSource = "predates-generated"
)

const (
	// annotationPredatesClosedDefaults on a RedisPersistence lists the closed
	// defaults it is kept out of because it ran under an operator older than
	// them (closedDefaultPassword, closedDefaultNetworkPolicy, comma
	// separated): an operator upgrade never closes a server its clients
	// reach today. Removing the annotation is the owner's choice to close it;
	// spec.auth and spec.networkPolicy.enabled decide for themselves either way.
	annotationPredatesClosedDefaults = "uringredis.io/predates-closed-defaults"
	// annotationAuthSource on the StatefulSet is the authSource its template
	// was built for. An operator older than closed defaults did not write
	// it: that is how its StatefulSets are told from this operator's.
	annotationAuthSource = "uringredis.io/auth"

	// The closed defaults annotationPredatesClosedDefaults can list.
	closedDefaultPassword      = "password"
	closedDefaultNetworkPolicy = "networkPolicy"

	// generatedPasswordKey is the key of the password in the generated Secret.
	generatedPasswordKey = "password"
	// generatedPasswordBytes of randomness: 256 bits, 43 URL-safe characters.
	generatedPasswordBytes = 32
)

func generatedSecretName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-auth" }

func authSourceOf(rp *v1alpha1.RedisPersistence) authSource {
	switch {
	case rp.Spec.Auth != nil && rp.Spec.Auth.SecretRef != nil:
		return authFromSecret
	case rp.Spec.Auth != nil:
		return authDisabled
	case predatesClosedDefault(rp, closedDefaultPassword):
		return authPredatesGenerated
	}
	return authGenerated
}

// authSecretRef is the Secret key that holds the server's password, or nil
// when the server runs without one.
func authSecretRef(rp *v1alpha1.RedisPersistence) *v1alpha1.SecretKeyRef {
	switch authSourceOf(rp) {
	case authFromSecret:
		ref := *rp.Spec.Auth.SecretRef
		ref.Key = cmp.Or(ref.Key, "password")
		return &ref
	case authGenerated:
		return &v1alpha1.SecretKeyRef{Name: generatedSecretName(rp), Key: generatedPasswordKey}
	}
	return nil
}

func predatesClosedDefault(rp *v1alpha1.RedisPersistence, name string) bool {
	return slices.Contains(strings.Split(rp.Annotations[annotationPredatesClosedDefaults], ","), name)
}

// closedDefaultsPredated lists the closed defaults an instance whose
// StatefulSet existing an operator older than them built is kept out of:
// the network policy always, the generated password when it ran without
// a password and has no spec.auth. Nil when existing is this operator's.
func closedDefaultsPredated(rp *v1alpha1.RedisPersistence, existing *appsv1.StatefulSet) []string {
	if existing == nil {
		return nil
	}
	if _, marked := existing.Annotations[annotationAuthSource]; marked {
		return nil
	}
	kept := []string{closedDefaultNetworkPolicy}
	if _, password := existing.Spec.Template.Annotations[annotationAuthHash]; !password && rp.Spec.Auth == nil {
		kept = append([]string{closedDefaultPassword}, kept...)
	}
	return kept
}

// recordPredatedDefaults marks rp with annotationPredatesClosedDefaults when
// an operator older than closed defaults built its running StatefulSet, so an
// operator upgrade never closes a server to the clients that reach it today.
// It is the first thing a reconcile does: the builders read the mark.
func (r *RedisPersistenceReconciler) recordPredatedDefaults(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	if _, marked := rp.Annotations[annotationPredatesClosedDefaults]; marked {
		return nil
	}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(rp), sts); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading StatefulSet %s: %w", rp.Name, err)
	}
	kept := closedDefaultsPredated(rp, sts)
	if !metav1.IsControlledBy(sts, rp) || len(kept) == 0 {
		return nil
	}
	patch := client.MergeFrom(rp.DeepCopy())
	metav1.SetMetaDataAnnotation(&rp.ObjectMeta, annotationPredatesClosedDefaults, strings.Join(kept, ","))
	if err := r.Patch(ctx, rp, patch); err != nil {
		return fmt.Errorf("recording the closed defaults the instance predates: %w", err)
	}
	what := "no NetworkPolicy is made for it"
	if predatesClosedDefault(rp, closedDefaultPassword) {
		what = "it keeps running without a password (set spec.auth.disabled: true to keep it so) and " + what
	}
	r.Recorder.Event(rp, corev1.EventTypeWarning, "KeptOpen",
		"this server ran before the operator closed servers by default: "+what+
			"; remove the annotation "+annotationPredatesClosedDefaults+" to close it (clients then need the generated password and the client label)")
	return nil
}

// buildAuthSecret is the generated password Secret. It has no owner
// reference: like the data volume it outlives the RedisPersistence, so a
// RedisPersistence created again under the same name finds the data and the
// password its clients have. The labels say whose it is.
func buildAuthSecret(rp *v1alpha1.RedisPersistence, password string) *corev1.Secret {
	meta := objectMeta(rp, generatedSecretName(rp))
	meta.OwnerReferences = nil
	return &corev1.Secret{
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{generatedPasswordKey: []byte(password)},
	}
}

func generatePassword() (string, error) {
	b := make([]byte, generatedPasswordBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ensureGeneratedSecret creates the generated password Secret unless it
// exists. It never replaces a password: a Secret of that name the operator
// did not make is an error the condition names.
func (r *RedisPersistenceReconciler) ensureGeneratedSecret(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	name := generatedSecretName(rp)
	existing := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, existing)
	switch {
	case err == nil:
		if existing.Labels[labelManagedBy] != fieldOwner || existing.Labels[labelInstance] != rp.Name {
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
	if err := r.Create(ctx, buildAuthSecret(rp, password)); apierrors.IsAlreadyExists(err) {
		return nil // a reconcile before this one made it; the next one checks it
	} else if err != nil {
		return fmt.Errorf("creating the generated password Secret: %w", err)
	}
	log.FromContext(ctx).Info("generated a password", "redispersistence", klogRef(rp), "secret", name)
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "GeneratedPassword", "generated the server's password into the Secret %s (key %s)", name, generatedPasswordKey)
	return nil
}

// errAuthSecret marks a Secret or key spec.auth names that is missing.
var errAuthSecret = errors.New("auth secret")

// password reads the server's password through the uncached reader, after
// generating it when the instance has no spec.auth. The error for a missing
// Secret or key names only what the spec names, so it can go into a
// condition.
func (r *RedisPersistenceReconciler) password(ctx context.Context, rp *v1alpha1.RedisPersistence) (string, error) {
	ref := authSecretRef(rp)
	if ref == nil {
		return "", nil
	}
	named := "named in spec.auth.secretRef"
	if authSourceOf(rp) == authGenerated {
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
