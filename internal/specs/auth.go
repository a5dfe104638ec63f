package specs

import (
	"cmp"
	_ "embed"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Where a server's password comes from.
type authSource string

const (
	// authFromSecret: spec.auth.secretRef, a Secret of the user's.
	authFromSecret authSource = "secret"
	// AuthGenerated: no spec.auth; the operator's Secret <name>-auth.
	AuthGenerated authSource = "generated"
	// AuthDisabled: spec.auth.disabled, no password.
	AuthDisabled authSource = "disabled"
	// AuthPredatesGenerated: no spec.auth on an instance that ran without a
	// password before the operator generated passwords; it keeps running
	// without one until its owner chooses.
	AuthPredatesGenerated authSource = "predates-generated"
)

const (
	// AnnotationPredatesClosedDefaults on a RedisPersistence lists the closed
	// defaults it is kept out of because it ran under an operator older than
	// them (ClosedDefaultPassword, ClosedDefaultNetworkPolicy, comma
	// separated): an operator upgrade never closes a server its clients
	// reach today. Removing the annotation is the owner's choice to close it;
	// spec.auth and spec.NetworkPolicy.enabled decide for themselves either way.
	AnnotationPredatesClosedDefaults = "uringredis.io/predates-closed-defaults"
	// AnnotationAuthSource on the StatefulSet is the authSource its template
	// was built for. An operator older than closed defaults did not write
	// it: that is how its StatefulSets are told from this operator's.
	AnnotationAuthSource = "uringredis.io/auth"

	// The closed defaults AnnotationPredatesClosedDefaults can list.
	ClosedDefaultPassword      = "password"
	ClosedDefaultNetworkPolicy = "networkPolicy"

	// GeneratedPasswordKey is the key of the password in the generated Secret.
	GeneratedPasswordKey = "password"
	// GeneratedPasswordBytes of randomness: 256 bits, 43 URL-safe characters.
	GeneratedPasswordBytes = 32
)

func GeneratedSecretName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-auth" }

func AuthSourceOf(rp *v1alpha1.RedisPersistence) authSource {
	switch {
	case rp.Spec.Auth != nil && rp.Spec.Auth.SecretRef != nil:
		return authFromSecret
	case rp.Spec.Auth != nil:
		return AuthDisabled
	case PredatesClosedDefault(rp, ClosedDefaultPassword):
		return AuthPredatesGenerated
	}
	return AuthGenerated
}

// AuthSecretRef is the Secret key that holds the server's password, or nil
// when the server runs without one.
func AuthSecretRef(rp *v1alpha1.RedisPersistence) *v1alpha1.SecretKeyRef {
	switch AuthSourceOf(rp) {
	case authFromSecret:
		ref := *rp.Spec.Auth.SecretRef
		ref.Key = cmp.Or(ref.Key, "password")
		return &ref
	case AuthGenerated:
		return &v1alpha1.SecretKeyRef{Name: GeneratedSecretName(rp), Key: GeneratedPasswordKey}
	}
	return nil
}

func PredatesClosedDefault(rp *v1alpha1.RedisPersistence, name string) bool {
	return slices.Contains(strings.Split(rp.Annotations[AnnotationPredatesClosedDefaults], ","), name)
}

// ClosedDefaultsPredated lists the closed defaults an instance whose
// StatefulSet existing an operator older than them built is kept out of:
// the network policy always, the generated password when it ran without
// a password and has no spec.auth. Nil when existing is this operator's.
func ClosedDefaultsPredated(rp *v1alpha1.RedisPersistence, existing *appsv1.StatefulSet) []string {
	if existing == nil {
		return nil
	}
	if _, marked := existing.Annotations[AnnotationAuthSource]; marked {
		return nil
	}
	kept := []string{ClosedDefaultNetworkPolicy}
	if _, password := existing.Spec.Template.Annotations[AnnotationAuthHash]; !password && rp.Spec.Auth == nil {
		kept = append([]string{ClosedDefaultPassword}, kept...)
	}
	return kept
}

// AuthSecret is the generated password Secret. It has no owner
// reference: like the data volume it outlives the RedisPersistence, so a
// RedisPersistence created again under the same name finds the data and the
// password its clients have. The labels say whose it is.
func AuthSecret(rp *v1alpha1.RedisPersistence, password string) *corev1.Secret {
	meta := ObjectMeta(rp, GeneratedSecretName(rp))
	meta.OwnerReferences = nil
	return &corev1.Secret{
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{GeneratedPasswordKey: []byte(password)},
	}
}

func PasswordEnv(rp *v1alpha1.RedisPersistence, name string) []corev1.EnvVar {
	ref := AuthSecretRef(rp)
	if ref == nil {
		return nil
	}
	return []corev1.EnvVar{secretKeyEnv(name, ref.Name, ref.Key)}
}

// withAuth gives the server's password, when it has one, to the prepare
// container, which writes it and the ACL users into the auth include file
// (and spec.users into the users include file),
// and to valkey-cli in the server's container (a person's kubectl exec,
// and the start script's lookups; the probe signs in as the exporter).
func withAuth(rp *v1alpha1.RedisPersistence, _ Options, _ PodInputs, template *corev1.PodTemplateSpec) {
	prepare := containerOf(&template.Spec, ContainerPrepare)
	prepare.Env = slices.Concat(prepare.Env, PasswordEnv(rp, "REDIS_PASSWORD"), ACLEnv(rp), []corev1.EnvVar{usersEnv(rp)})
	redis := containerOf(&template.Spec, ContainerRedis)
	redis.Env = slices.Concat(redis.Env, PasswordEnv(rp, "REDISCLI_AUTH"), probeEnv(rp))
}

// secretKeyEnv is the environment variable name holding key of Secret secret.
func secretKeyEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret},
		Key:                  key,
	}}}
}
