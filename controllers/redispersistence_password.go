package controllers

// Rotating the default password without a restart.
//
// A new password in the Secret that spec.auth names (or in the generated
// <name>-auth) reaches the running servers and Sentinels live, as a user's
// does (redispersistence_users.go): every server and Sentinel accepts it at
// once beside the previous one (ACL SETUSER default >new), the replicas
// sign in to the primary with it (CONFIG SET primaryauth), the Sentinels
// to the servers and to each other (SENTINEL SET <master> auth-pass,
// SENTINEL CONFIG SET sentinel-pass); after spec.passwordGracePeriod the
// previous one goes (ACL SETUSER default resetpass >new). No pod restarts:
// the pod template carries no hash of the password (specs.AuthHash), the
// servers' readiness probes sign in as the exporter's user, and a container
// that starts later reads the new password from the Secret.
//
// The operator must reach servers that do not know the new password yet, so
// it keeps, in its own Secret <name>-acl, the password it last gave them
// (key default) and, during the grace period, the one before it with its
// end. Both are copies of what the password Secret held; <name>-acl is as
// readable as that Secret.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// The keys of <name>-acl that hold the rotation's state.
const (
	aclDefaultKey       = "default"
	aclPreviousKey      = "default-previous"
	aclPreviousUntilKey = "default-previous-until"
)

// rotateDefaultPassword brings the running servers and Sentinels to the
// password creds holds and returns when to look again (zero: no rotation in
// progress). creds.server is left signing in with the new password.
func (r *RedisPersistenceReconciler) rotateDefaultPassword(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials) (time.Duration, error) {
	if !specs.ACLUsersEnabled(rp) || creds.password == "" {
		return 0, nil
	}
	// readCredentials read it; a Secret just made is read once more.
	secret := creds.aclSecret
	if secret == nil {
		secret = &corev1.Secret{}
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: specs.ACLSecretName(rp)}, secret); err != nil {
			return 0, fmt.Errorf("reading the Secret %s: %w", specs.ACLSecretName(rp), err)
		}
	}
	applied, previous := string(secret.Data[aclDefaultKey]), string(secret.Data[aclPreviousKey])
	until, _ := time.Parse(time.RFC3339, string(secret.Data[aclPreviousUntilKey]))
	now := time.Now() // wall-clock time, as for the users' grace periods
	switch {
	case applied == "":
		// First sight: the servers started with the password the Secret holds.
		return 0, r.recordDefaultPassword(ctx, secret, creds.password, "", time.Time{})
	case applied != creds.password:
		previous, until = applied, now.Add(specs.PasswordGracePeriod(rp)).Truncate(time.Second)
		if err := r.recordDefaultPassword(ctx, secret, creds.password, previous, until); err != nil {
			return 0, err
		}
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "RotatedPassword",
			"the default user's password changed in its Secret: the servers and Sentinels accept the new one; the previous one works until %s", until.UTC().Format(time.RFC3339))
	case previous == "":
		return 0, nil
	}
	expired := !now.Before(until)
	if err := r.applyDefaultPassword(ctx, rp, creds, previous, expired); err != nil {
		return 0, err
	}
	if !expired {
		return time.Until(until), nil
	}
	return 0, r.recordDefaultPassword(ctx, secret, creds.password, "", time.Time{})
}

func (r *RedisPersistenceReconciler) recordDefaultPassword(ctx context.Context, secret *corev1.Secret, password, previous string, until time.Time) error {
	patch := client.MergeFrom(secret.DeepCopy())
	secret.Data[aclDefaultKey] = []byte(password)
	delete(secret.Data, aclPreviousKey)
	delete(secret.Data, aclPreviousUntilKey)
	if previous != "" {
		secret.Data[aclPreviousKey] = []byte(previous)
		secret.Data[aclPreviousUntilKey] = []byte(until.UTC().Format(time.RFC3339))
	}
	if err := r.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("recording the default password's rotation in %s: %w", secret.Name, err)
	}
	return nil
}

// applyDefaultPassword has every ready server and Sentinel accept the new
// password, besides previous until expired, then only the new one.
func (r *RedisPersistenceReconciler) applyDefaultPassword(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials, previous string, expired bool) error {
	password := creds.password
	acl := []any{"ACL", "SETUSER", "default", ">" + password}
	if expired {
		acl = []any{"ACL", "SETUSER", "default", "resetpass", ">" + password}
	}
	var errs []error
	var servers corev1.PodList
	if err := r.List(ctx, &servers, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SelectorLabels(rp))); err != nil {
		return fmt.Errorf("listing the server pods: %w", err)
	}
	for i := range servers.Items {
		pod := &servers.Items[i]
		if !podReady(pod) || pod.Status.PodIP == "" {
			continue
		}
		errs = append(errs, onAny(ctx, r.ServerAddress(pod), creds.server, []string{password, previous},
			acl, []any{"CONFIG", "SET", "primaryauth", password}))
	}
	if specs.Replicated(rp) {
		var sentinels corev1.PodList
		if err := r.List(ctx, &sentinels, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SentinelSelectorLabels(rp))); err != nil {
			return fmt.Errorf("listing the Sentinel pods: %w", err)
		}
		for i := range sentinels.Items {
			pod := &sentinels.Items[i]
			if !podReady(pod) || pod.Status.PodIP == "" {
				continue
			}
			errs = append(errs, onAny(ctx, r.SentinelAddress(pod), creds.server, []string{password, previous},
				acl, []any{"SENTINEL", "SET", specs.SentinelMasterName(rp), "auth-pass", password},
				[]any{"SENTINEL", "CONFIG", "SET", "sentinel-pass", password}))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rotating the default password: %w", err)
	}
	return nil
}

// onAny signs in at addr with the first of passwords the server takes and
// sends commands.
func onAny(ctx context.Context, addr string, creds serverCredentials, passwords []string, commands ...[]any) error {
	var last error
	for _, password := range passwords {
		if password == "" {
			continue
		}
		creds.password = password
		c := dialServer(addr, creds)
		err := c.Ping(ctx).Err()
		if err != nil && isAuthError(err) {
			_ = c.Close()
			last = err
			continue
		}
		for _, cmd := range commands {
			if err == nil {
				err = c.Do(ctx, cmd...).Err()
				if err != nil {
					err = fmt.Errorf("%s %s: %w", cmd[0], cmd[1], err)
				}
			}
		}
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		return nil
	}
	return fmt.Errorf("%s takes neither the new nor the previous password: %w", addr, last)
}

func isAuthError(err error) bool {
	var serverErr redis.Error
	return errors.As(err, &serverErr) && (strings.HasPrefix(err.Error(), "WRONGPASS") || strings.HasPrefix(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "invalid password"))
}
