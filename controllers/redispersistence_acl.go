package controllers

// ACL users.
//
// A server with a password (spec.auth.secretRef, or the generated one) has
// two ACL users besides default, so that neither the exporter nor a
// benchmark runner holds the password that can do everything:
//   - uringredis-exporter reads INFO (and the latency and slow-log summaries
//     redis_exporter asks for) and runs the chart's Lua script, whose only
//     command is INFO: no key, no CONFIG (CONFIG GET shows requirepass).
//   - uringredis-benchmark (bench.User, bench.ACLRules) writes and reads the
//     keys a runner writes and nothing else; DEBUG SEGFAULT only when the
//     instance allows the crash check.
//
// Their passwords are random, in the Secret <name>-acl that the operator
// makes and owns (it goes with the RedisPersistence: no client of the
// instance uses them). The prepare container renders each user's line into
// the server's auth include file, beside requirepass, from the Secret and
// the rules in its environment: the passwords never reach the ConfigMap or a
// command line. The exporter and the runner read theirs from the Secret.
//
// Sentinels, replicas and the operator keep signing in as default: they
// need what only it may do (replication, CONFIG SET, failover). A server
// without a password has no other users: default is open to all of them.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
)

const (
	// exporterUser is redis_exporter's ACL user.
	exporterUser = "uringredis-exporter"
	// exporterACLRules are what redis_exporter sends when it does not ask
	// for CONFIG (--config-command=-) and checks no keys, found by running
	// it against the real server until its ACL LOG stayed empty
	// (TestExporterSignsInAsItsUser): INFO, its client name, LATENCY
	// LATEST and HISTOGRAM, SLOWLOG LEN and GET (the slowest commands'
	// arguments, which it reads for their ids and durations), and EVAL of
	// the chart's script, which calls INFO.
	exporterACLRules = "resetkeys resetchannels -@all +ping +info +eval +client|setname +latency|latest +latency|histogram +slowlog|len +slowlog|get"

	// The keys of the Secret <name>-acl.
	aclExporterKey  = "exporter"
	aclBenchmarkKey = "benchmark"

	// annotationACLHash on the pod template changes when the users'
	// passwords do (a new Secret <name>-acl), so the pods restart with them.
	annotationACLHash = "uringredis.io/acl-hash"
)

func aclSecretName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-acl" }

// aclUsersEnabled: the ACL users exist on servers that have a password.
func aclUsersEnabled(rp *v1alpha1.RedisPersistence) bool { return authSecretRef(rp) != nil }

// benchmarkACLRules are the benchmark user's rules on rp's servers.
func benchmarkACLRules(rp *v1alpha1.RedisPersistence) string {
	return bench.ACLRules(rp.Spec.Benchmark != nil && rp.Spec.Benchmark.CrashCheck)
}

// aclPasswords are the users' passwords, read from the Secret <name>-acl.
type aclPasswords struct {
	exporter, benchmark string
}

// hash is the pod template's annotationACLHash, "" without users; salted
// like authHash.
func (p aclPasswords) hash(rp *v1alpha1.RedisPersistence) string {
	if p == (aclPasswords{}) {
		return ""
	}
	sum := sha256.Sum256([]byte(string(rp.UID) + "\x00" + p.exporter + "\x00" + p.benchmark))
	return hex.EncodeToString(sum[:8])
}

// aclEnv is what the prepare container renders the users from, nil
// without users.
func aclEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	if !aclUsersEnabled(rp) {
		return nil
	}
	return []corev1.EnvVar{
		{Name: "EXPORTER_USER", Value: exporterUser},
		secretKeyEnv("EXPORTER_PASSWORD", aclSecretName(rp), aclExporterKey),
		{Name: "EXPORTER_ACL", Value: exporterACLRules},
		{Name: "BENCHMARK_USER", Value: bench.User},
		secretKeyEnv("BENCHMARK_PASSWORD", aclSecretName(rp), aclBenchmarkKey),
		{Name: "BENCHMARK_ACL", Value: benchmarkACLRules(rp)},
	}
}

// signInEnv is how a client of rp's servers other than the operator signs
// in: as user with the password in key of the Secret <name>-acl when the
// servers have users, else as default with the server's password (none
// without auth).
func signInEnv(rp *v1alpha1.RedisPersistence, user, key string) []corev1.EnvVar {
	if !aclUsersEnabled(rp) {
		return passwordEnv(rp, "REDIS_PASSWORD")
	}
	return []corev1.EnvVar{{Name: "REDIS_USER", Value: user}, secretKeyEnv("REDIS_PASSWORD", aclSecretName(rp), key)}
}

func buildACLSecret(rp *v1alpha1.RedisPersistence, passwords aclPasswords) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: objectMeta(rp, aclSecretName(rp)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{aclExporterKey: []byte(passwords.exporter), aclBenchmarkKey: []byte(passwords.benchmark)},
	}
}

// aclPasswords creates the Secret <name>-acl unless it exists and returns
// its passwords; zero without users. A Secret of that name that is not the
// operator's, or lacks a password, is an errAuthSecret: deleting it has the
// operator make a new one (and restart the pods with it).
func (r *RedisPersistenceReconciler) aclPasswords(ctx context.Context, rp *v1alpha1.RedisPersistence) (aclPasswords, error) {
	if !aclUsersEnabled(rp) {
		return aclPasswords{}, nil
	}
	name := aclSecretName(rp)
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		p, createErr := r.createACLSecret(ctx, rp)
		switch {
		case createErr == nil:
			return p, nil
		case !apierrors.IsAlreadyExists(createErr):
			return aclPasswords{}, fmt.Errorf("creating the Secret %s: %w", name, createErr)
		}
		// Another reconcile made it first.
		err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, secret)
	}
	if err != nil {
		return aclPasswords{}, fmt.Errorf("reading the Secret %s: %w", name, err)
	}
	if secret.Labels[labelManagedBy] != fieldOwner || secret.Labels[labelInstance] != rp.Name {
		return aclPasswords{}, fmt.Errorf("%w: the Secret %s, where the operator keeps its ACL users' passwords, exists and is not the operator's; delete it", errAuthSecret, name)
	}
	p := aclPasswords{exporter: string(secret.Data[aclExporterKey]), benchmark: string(secret.Data[aclBenchmarkKey])}
	if p.exporter == "" || p.benchmark == "" {
		return aclPasswords{}, fmt.Errorf("%w: the Secret %s lacks the key %q or %q; delete it and the operator makes a new one", errAuthSecret, name, aclExporterKey, aclBenchmarkKey)
	}
	return p, nil
}

func (r *RedisPersistenceReconciler) createACLSecret(ctx context.Context, rp *v1alpha1.RedisPersistence) (aclPasswords, error) {
	var p aclPasswords
	var err error
	if p.exporter, err = generatePassword(); err != nil {
		return aclPasswords{}, err
	}
	if p.benchmark, err = generatePassword(); err != nil {
		return aclPasswords{}, err
	}
	if err := r.Create(ctx, buildACLSecret(rp, p)); err != nil {
		return aclPasswords{}, err
	}
	log.FromContext(ctx).Info("generated the ACL users' passwords", "redispersistence", klogRef(rp), "secret", aclSecretName(rp))
	return p, nil
}
