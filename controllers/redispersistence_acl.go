package controllers

// ACL users.
//
// A server with a password (spec.auth.secretRef, or the generated one) has
// three ACL users besides default, so that neither the exporter, a benchmark
// runner nor a backup agent holds the password that can do everything:
//   - uringredis-exporter reads INFO (and the latency and slow-log summaries
//     redis_exporter asks for) and runs the chart's Lua script, whose only
//     command is INFO: no key, no CONFIG (CONFIG GET shows requirepass).
//   - uringredis-benchmark (bench.User, bench.ACLRules) writes and reads the
//     keys a runner writes and nothing else; DEBUG SEGFAULT only when the
//     instance allows the crash check.
//   - uringredis-backup (backup.BackupUserRules) takes a snapshot as a replica
//     does and reads INFO: RedisBackup Jobs sign in as it.
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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// ACLPasswords creates the Secret <name>-acl unless it exists and returns
// its passwords, and the Secret as read (nil when it was just made);
// zero without users. A Secret of that name that is not the
// operator's, or lacks a password, is an errAuthSecret: deleting it has the
// operator make a new one (and restart the pods with it).
func (r *RedisPersistenceReconciler) aclPasswords(ctx context.Context, rp *v1alpha1.RedisPersistence) (specs.ACLPasswords, *corev1.Secret, error) {
	if !specs.ACLUsersEnabled(rp) {
		return specs.ACLPasswords{}, nil, nil
	}
	name := specs.ACLSecretName(rp)
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		p, createErr := r.createACLSecret(ctx, rp)
		switch {
		case createErr == nil:
			return p, nil, nil
		case !apierrors.IsAlreadyExists(createErr):
			return specs.ACLPasswords{}, nil, fmt.Errorf("creating the Secret %s: %w", name, createErr)
		}
		// Another reconcile made it first.
		err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, secret)
	}
	if err != nil {
		return specs.ACLPasswords{}, nil, fmt.Errorf("reading the Secret %s: %w", name, err)
	}
	if secret.Labels[specs.LabelManagedBy] != specs.FieldOwner || secret.Labels[specs.LabelInstance] != rp.Name {
		return specs.ACLPasswords{}, nil, fmt.Errorf("%w: the Secret %s, where the operator keeps its ACL users' passwords, exists and is not the operator's; delete it", errAuthSecret, name)
	}
	p := specs.ACLPasswords{
		Exporter:  string(secret.Data[specs.ACLExporterKey]),
		Benchmark: string(secret.Data[specs.ACLBenchmarkKey]),
		Backup:    string(secret.Data[specs.ACLBackupKey]),
	}
	if p.Exporter == "" || p.Benchmark == "" {
		return specs.ACLPasswords{}, nil, fmt.Errorf("%w: the Secret %s lacks the key %q or %q; delete it and the operator makes a new one", errAuthSecret, name, specs.ACLExporterKey, specs.ACLBenchmarkKey)
	}
	if p.Backup == "" {
		// Made by an operator from before the backup user: add its password.
		// The ACL hash changes with it, so the pods restart once and their
		// servers know the user.
		if p.Backup, err = generatePassword(); err != nil {
			return specs.ACLPasswords{}, nil, err
		}
		patch := client.MergeFrom(secret.DeepCopy())
		secret.Data[specs.ACLBackupKey] = []byte(p.Backup)
		if err := r.Patch(ctx, secret, patch); err != nil {
			return specs.ACLPasswords{}, nil, fmt.Errorf("adding the backup user's password to the Secret %s: %w", name, err)
		}
		log.FromContext(ctx).Info("generated the backup user's password", "redispersistence", klogRef(rp), "secret", name)
	}
	return p, secret, nil
}

func (r *RedisPersistenceReconciler) createACLSecret(ctx context.Context, rp *v1alpha1.RedisPersistence) (specs.ACLPasswords, error) {
	var p specs.ACLPasswords
	var err error
	if p.Exporter, err = generatePassword(); err != nil {
		return specs.ACLPasswords{}, err
	}
	if p.Benchmark, err = generatePassword(); err != nil {
		return specs.ACLPasswords{}, err
	}
	if p.Backup, err = generatePassword(); err != nil {
		return specs.ACLPasswords{}, err
	}
	if err := r.Create(ctx, specs.ACLSecret(rp, p)); err != nil {
		return specs.ACLPasswords{}, err
	}
	log.FromContext(ctx).Info("generated the ACL users' passwords", "redispersistence", klogRef(rp), "secret", specs.ACLSecretName(rp))
	return p, nil
}
