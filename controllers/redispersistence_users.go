package controllers

// Application users (spec.users).
//
// A reconcile reads every user's password (generating the ones spec.users
// leaves to the operator), works out the next state of their passwords
// (specs.NextUsersState: a changed password keeps the previous one for
// spec.passwordGracePeriod), applies the Secret <name>-users that a
// starting server reads its users from and each user's connection Secret
// with the instance's other objects, and then makes every running server's
// ACL users exactly spec.users with ACL SETUSER and ACL DELUSER: no server
// restarts for a user added, changed, rotated or removed. The state lives in
// the Secret, so the grace period survives an operator restart; a previous
// password's end requeues the instance for that moment.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// UsersReady reasons.
const (
	ReasonUsersApplied = "Applied"
	// A user's password Secret or key is missing: the user keeps the
	// passwords it had, or is not made yet.
	ReasonUserSecretMissing = "UserSecretMissing"
	// A server refused a user's rules; the message is the server's.
	ReasonUserRulesRefused = "UserRulesRefused"
	// The Secret <name>-users exists and is not the operator's.
	ReasonUsersSecretTaken = "UsersSecretTaken"
	// No server is ready to take the users yet.
	ReasonUsersWaiting = "WaitingForServers"
)

// appUsers is what a reconcile read of spec.users.
type appUsers struct {
	// state is the users' passwords from this reconcile on.
	state specs.UsersState
	// passwords read, by user, for the connection Secrets.
	passwords map[string]string
	// expiry is when the earliest previous password stops working; zero
	// when none waits.
	expiry time.Time
	// missing says which users' passwords could not be read.
	missing []string
	// rotated are the users whose password changed in this reconcile.
	rotated []string
	// taken is set when the Secret <name>-users is not the operator's:
	// nothing about users is applied then.
	taken bool
}

// readUsers reads spec.users' passwords and the state of the Secret
// <name>-users. Nil when the instance has no users and never had.
func (r *RedisPersistenceReconciler) readUsers(ctx context.Context, rp *v1alpha1.RedisPersistence) (*appUsers, error) {
	if len(rp.Spec.Users) == 0 {
		// Most instances have no users: the Secrets' metadata informer says
		// whether <name>-users (which the operator labels) is left to clear,
		// without a request to the API server.
		cached := &metav1.PartialObjectMetadata{}
		cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: specs.UsersSecretName(rp)}, cached); apierrors.IsNotFound(err) {
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading the Secret %s's metadata: %w", specs.UsersSecretName(rp), err)
		}
	}
	stored := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: specs.UsersSecretName(rp)}, stored)
	switch {
	case apierrors.IsNotFound(err) && len(rp.Spec.Users) == 0:
		return nil, nil
	case apierrors.IsNotFound(err):
		stored = nil
	case err != nil:
		return nil, fmt.Errorf("reading the Secret %s: %w", specs.UsersSecretName(rp), err)
	case stored.Labels[specs.LabelManagedBy] != specs.FieldOwner || stored.Labels[specs.LabelInstance] != rp.Name:
		return &appUsers{taken: true}, nil
	}
	prev := specs.UsersState{}
	if stored != nil {
		if prev, err = specs.ParseUsersState(stored.Data[specs.UsersStateKey]); err != nil {
			// Only the operator writes it; without it, no grace period.
			log.FromContext(ctx).Info("the users' state cannot be read; starting over", "secret", specs.UsersSecretName(rp), "err", err)
			prev = specs.UsersState{}
		}
	}
	users := &appUsers{passwords: map[string]string{}}
	hashes := map[string]string{}
	for i := range rp.Spec.Users {
		u := &rp.Spec.Users[i]
		password, err := r.userPassword(ctx, rp, u)
		if errors.Is(err, errAuthSecret) {
			users.missing = append(users.missing, err.Error())
			continue
		} else if err != nil {
			return nil, err
		}
		users.passwords[u.Name] = password
		hashes[u.Name] = specs.PasswordHash(password)
		if old, had := prev[u.Name]; had && old.Current != hashes[u.Name] {
			users.rotated = append(users.rotated, u.Name)
		}
	}
	// Real time, not r.Clock: the Secret records the grace periods' ends as
	// wall-clock times, which outlive this process.
	users.state, users.expiry = specs.NextUsersState(rp, prev, hashes, time.Now())
	return users, nil
}

// userPassword reads u's password, after generating it when spec.users
// names no Secret. A missing Secret or key is an errAuthSecret that names
// the user.
func (r *RedisPersistenceReconciler) userPassword(ctx context.Context, rp *v1alpha1.RedisPersistence, u *v1alpha1.UserSpec) (string, error) {
	ref := specs.UserPasswordRef(rp, u)
	named := "named in its passwordSecretRef"
	if u.PasswordSecretRef == nil {
		named = "of its generated password"
		if err := r.ensureUserPasswordSecret(ctx, rp, u.Name); err != nil {
			return "", err
		}
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: ref.Name}, secret); apierrors.IsNotFound(err) {
		return "", fmt.Errorf("%w: user %s: the Secret %s %s does not exist", errAuthSecret, u.Name, ref.Name, named)
	} else if err != nil {
		return "", fmt.Errorf("reading user %s's Secret: %w", u.Name, err)
	}
	password := secret.Data[ref.Key]
	if len(password) == 0 {
		return "", fmt.Errorf("%w: user %s: the Secret %s %s has no key %q", errAuthSecret, u.Name, ref.Name, named, ref.Key)
	}
	return string(password), nil
}

// ensureUserPasswordSecret generates user's password unless its Secret
// exists. A Secret of that name that is not the operator's is left alone
// and is an errAuthSecret.
func (r *RedisPersistenceReconciler) ensureUserPasswordSecret(ctx context.Context, rp *v1alpha1.RedisPersistence, user string) error {
	name := specs.UserPasswordSecretName(rp, user)
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, existing)
	switch {
	case err == nil:
		if existing.Labels[specs.LabelManagedBy] != specs.FieldOwner || existing.Labels[specs.LabelInstance] != rp.Name {
			return fmt.Errorf("%w: user %s: the Secret %s, where the operator keeps its generated password, exists and is not the operator's; name it in passwordSecretRef, or delete it", errAuthSecret, user, name)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading user %s's generated password Secret: %w", user, err)
	}
	password, err := generatePassword()
	if err != nil {
		return err
	}
	if err := r.Create(ctx, specs.UserPasswordSecret(rp, user, password)); apierrors.IsAlreadyExists(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("creating user %s's generated password Secret: %w", user, err)
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "GeneratedPassword", "generated user %s's password into the Secret %s (key %s)", user, name, specs.GeneratedPasswordKey)
	return nil
}

// userObjects are the Secret <name>-users and the users' connection
// Secrets, applied with the instance's other objects; stale connection
// Secrets of users no longer in spec.users are deleted.
func (r *RedisPersistenceReconciler) userObjects(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials) ([]client.Object, error) {
	users := creds.appUsers
	if users == nil || users.taken {
		return nil, nil
	}
	objects := []client.Object{specs.UsersSecret(rp, users.state)}
	for _, u := range rp.Spec.Users {
		password, ok := users.passwords[u.Name]
		if !ok {
			continue
		}
		in := specs.ConnectionInputs{Username: u.Name, Password: password}
		if creds.certs != nil {
			in.CACert = creds.certs.caPEM
		}
		conn, err := r.unlessTaken(ctx, rp, specs.ConnectionSecret(rp, in))
		if err != nil {
			return nil, err
		}
		if conn != nil {
			objects = append(objects, conn)
		}
	}
	return objects, r.removeStaleUserSecrets(ctx, rp)
}

// removeStaleUserSecrets deletes the connection Secrets of users no longer
// in spec.users. Generated passwords stay, as the default one does: the
// user added again signs in with it.
func (r *RedisPersistenceReconciler) removeStaleUserSecrets(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	var secrets metav1.PartialObjectMetadataList
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.List(ctx, &secrets, client.InNamespace(rp.Namespace), client.MatchingLabels{specs.LabelInstance: rp.Name, specs.LabelManagedBy: specs.FieldOwner}, client.HasLabels{specs.LabelUser}); err != nil {
		return fmt.Errorf("listing the users' Secrets: %w", err)
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		user := s.Labels[specs.LabelUser]
		if s.Name != specs.UserConnectionSecretName(rp, user) || !metav1.IsControlledBy(s, rp) ||
			slices.ContainsFunc(rp.Spec.Users, func(u v1alpha1.UserSpec) bool { return u.Name == user }) {
			continue
		}
		if err := r.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the connection Secret %s of the removed user %s: %w", s.Name, user, err)
		}
	}
	return nil
}

// convergeUsers makes every ready server's ACL users those of spec.users,
// reports it in UsersReady and returns when a previous password expires.
func (r *RedisPersistenceReconciler) convergeUsers(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials) time.Time {
	users := creds.appUsers
	if users == nil {
		meta.RemoveStatusCondition(&rp.Status.Conditions, v1alpha1.ConditionUsersReady)
		return time.Time{}
	}
	if users.taken {
		r.setCondition(rp, v1alpha1.ConditionUsersReady, condition{metav1.ConditionFalse, ReasonUsersSecretTaken,
			"the Secret " + specs.UsersSecretName(rp) + ", where the operator keeps the users' password hashes, exists and is not the operator's; delete it"})
		return time.Time{}
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SelectorLabels(rp))); err != nil {
		r.setCondition(rp, v1alpha1.ConditionUsersReady, condition{metav1.ConditionFalse, ReasonServerUnreachable, "listing the server pods: " + err.Error()})
		return users.expiry
	}
	var applied int
	var refused, unreachable []string
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !podReady(pod) || pod.Status.PodIP == "" {
			continue
		}
		err := applyUsers(ctx, r.ServerAddress(pod), creds.server, rp, users.state)
		switch {
		case errors.As(err, new(rulesRefused)):
			refused = append(refused, pod.Name+": "+err.Error())
		case err != nil:
			unreachable = append(unreachable, pod.Name+": "+err.Error())
		default:
			applied++
		}
	}
	for _, u := range users.rotated {
		until := "it no longer works"
		if p := users.state[u]; len(p.Previous) > 0 {
			until = "it works until " + p.Previous[len(p.Previous)-1].Until.UTC().Format(time.RFC3339)
		}
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "RotatedPassword", "user %s: the servers accept its new password; as for the previous one, %s", u, until)
	}
	switch {
	case len(users.missing) > 0:
		r.setCondition(rp, v1alpha1.ConditionUsersReady, condition{metav1.ConditionFalse, ReasonUserSecretMissing, strings.Join(users.missing, "; ")})
	case len(refused) > 0:
		r.setCondition(rp, v1alpha1.ConditionUsersReady, condition{metav1.ConditionFalse, ReasonUserRulesRefused, strings.Join(refused, "; ")})
		r.Recorder.Event(rp, corev1.EventTypeWarning, "FailedApplyUsers", strings.Join(refused, "; "))
	case len(unreachable) > 0:
		r.setCondition(rp, v1alpha1.ConditionUsersReady, condition{metav1.ConditionFalse, ReasonServerUnreachable, strings.Join(unreachable, "; ")})
	case applied == 0:
		r.setCondition(rp, v1alpha1.ConditionUsersReady, condition{metav1.ConditionFalse, ReasonUsersWaiting, "no server is ready; the users are applied to each server once it is"})
	default:
		r.setCondition(rp, v1alpha1.ConditionUsersReady, condition{metav1.ConditionTrue, ReasonUsersApplied,
			fmt.Sprintf("%d user(s) on %d running server(s)", len(users.state), applied)})
	}
	return users.expiry
}

// rulesRefused is the server's refusal of a user's rules.
type rulesRefused struct{ user, message string }

func (e rulesRefused) Error() string { return "user " + e.user + ": " + e.message }

// operatorUsers are the ACL users convergeUsers leaves alone: the server's
// own and the operator's (redispersistence_acl.go).
var operatorUsers = []string{specs.DefaultUser, specs.ExporterUser, bench.User, backup.BackupUser}

// applyUsers makes the ACL users of the server at addr those state has
// passwords of, with spec.users' rules, deletes any other user but the
// operator's, and closes the connections of disabled users.
func applyUsers(ctx context.Context, addr string, creds serverCredentials, rp *v1alpha1.RedisPersistence, state specs.UsersState) error {
	server := dialServer(addr, creds)
	defer func() { _ = server.Close() }()
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	for i := range rp.Spec.Users {
		u := &rp.Spec.Users[i]
		p, ok := state[u.Name]
		if !ok {
			continue
		}
		args := []any{"ACL", "SETUSER", u.Name}
		for _, rule := range specs.UserACLRules(u, p) {
			args = append(args, rule)
		}
		if err := server.Do(ctx, args...).Err(); err != nil {
			var serverErr redis.Error
			if errors.As(err, &serverErr) {
				return rulesRefused{u.Name, err.Error()}
			}
			return fmt.Errorf("ACL SETUSER %s: %w", u.Name, err)
		}
		if !specs.UserEnabled(u) {
			if err := server.Do(ctx, "CLIENT", "KILL", "USER", u.Name).Err(); err != nil {
				return fmt.Errorf("CLIENT KILL USER %s: %w", u.Name, err)
			}
		}
	}
	names, err := server.Do(ctx, "ACL", "USERS").StringSlice()
	if err != nil {
		return fmt.Errorf("ACL USERS: %w", err)
	}
	var stale []any
	for _, name := range names {
		if _, kept := state[name]; !kept && !slices.Contains(operatorUsers, name) {
			stale = append(stale, name)
		}
	}
	if len(stale) > 0 {
		if err := server.Do(ctx, append([]any{"ACL", "DELUSER"}, stale...)...).Err(); err != nil {
			return fmt.Errorf("ACL DELUSER: %w", err)
		}
	}
	return nil
}
