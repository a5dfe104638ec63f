package specs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Application users (spec.users).
//
// The servers know a user by the SHA-256 of its password ("#<hex>" in ACL
// rules): the operator never sends a password to a server, and the Secret
// <name>-users, which a starting server reads its users from, holds only
// hashes. That Secret is also where the operator keeps, between reconciles,
// each user's previous passwords and until when they still work
// (UsersState): a rotation adds the new hash, keeps the old one for
// spec.passwordGracePeriod, then drops it, all with ACL SETUSER on the
// running servers.
const (
	// The keys of the Secret <name>-users.
	UsersACLKey   = "users.acl"
	UsersStateKey = "state.json"

	// LabelUser on a Secret names the spec.users entry it belongs to.
	LabelUser = "uringredis.io/user"

	// DefaultPasswordGracePeriod is spec.passwordGracePeriod's default.
	DefaultPasswordGracePeriod = 5 * time.Minute
)

func UsersSecretName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-users" }

// UserPasswordSecretName is where the operator generates the password of a
// user without passwordSecretRef.
func UserPasswordSecretName(rp *v1alpha1.RedisPersistence, user string) string {
	return rp.Name + "-user-" + user
}

// UserConnectionSecretName is the user's connection Secret.
func UserConnectionSecretName(rp *v1alpha1.RedisPersistence, user string) string {
	return rp.Name + "-app-" + user
}

// UserPasswordRef is the Secret key holding u's password.
func UserPasswordRef(rp *v1alpha1.RedisPersistence, u *v1alpha1.UserSpec) v1alpha1.SecretKeyRef {
	if u.PasswordSecretRef == nil {
		return v1alpha1.SecretKeyRef{Name: UserPasswordSecretName(rp, u.Name), Key: GeneratedPasswordKey}
	}
	ref := *u.PasswordSecretRef
	if ref.Key == "" {
		ref.Key = GeneratedPasswordKey
	}
	return ref
}

func PasswordGracePeriod(rp *v1alpha1.RedisPersistence) time.Duration {
	if rp.Spec.PasswordGracePeriod == nil {
		return DefaultPasswordGracePeriod
	}
	return rp.Spec.PasswordGracePeriod.Duration
}

// PasswordHash is the form an ACL rule names a password by.
func PasswordHash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

// UsersState is what the Secret <name>-users remembers of each user's
// passwords, by user name.
type UsersState map[string]UserPasswords

type UserPasswords struct {
	// Current is the hash of the password in the user's Secret.
	Current string `json:"current"`
	// Previous are replaced passwords that still work until their time.
	Previous []PreviousPassword `json:"previous,omitempty"`
}

type PreviousPassword struct {
	Hash  string      `json:"hash"`
	Until metav1.Time `json:"until"`
}

// Hashes are every password hash that signs the user in, current first.
func (p UserPasswords) Hashes() []string {
	hashes := []string{p.Current}
	for _, prev := range p.Previous {
		hashes = append(hashes, prev.Hash)
	}
	return hashes
}

// ParseUsersState reads the state the Secret <name>-users holds; empty for
// a Secret without it.
func ParseUsersState(data []byte) (UsersState, error) {
	state := UsersState{}
	if len(data) == 0 {
		return state, nil
	}
	if err := json.Unmarshal(data, &state); err != nil {
		return nil, err
	}
	return state, nil
}

// NextUsersState is the state after a reconcile at now that read the
// password hashes in current (by user; a user whose Secret could not be
// read is absent and keeps what it had). A user whose password changed
// keeps its previous one until now + spec.passwordGracePeriod; previous
// passwords whose time passed are dropped, and so are users no longer in
// spec.users. It also returns the earliest time a previous password
// expires, zero when none waits.
func NextUsersState(rp *v1alpha1.RedisPersistence, prev UsersState, current map[string]string, now time.Time) (UsersState, time.Time) {
	next := UsersState{}
	var expiry time.Time
	grace := PasswordGracePeriod(rp)
	for _, u := range rp.Spec.Users {
		old, had := prev[u.Name]
		hash, read := current[u.Name]
		if !read {
			if had {
				hash = old.Current
			} else {
				continue
			}
		}
		p := UserPasswords{Current: hash}
		keep := old.Previous
		if had && old.Current != hash && grace > 0 {
			keep = append(slices.Clone(keep), PreviousPassword{Hash: old.Current, Until: metav1.NewTime(now.Add(grace).Truncate(time.Second))})
		}
		for _, pp := range keep {
			if pp.Hash == hash || !now.Before(pp.Until.Time) || slices.ContainsFunc(p.Previous, func(q PreviousPassword) bool { return q.Hash == pp.Hash }) {
				continue
			}
			p.Previous = append(p.Previous, pp)
			if expiry.IsZero() || pp.Until.Before(&metav1.Time{Time: expiry}) {
				expiry = pp.Until.Time
			}
		}
		next[u.Name] = p
	}
	return next, expiry
}

// UserEnabled is false for a user with enabled: false.
func UserEnabled(u *v1alpha1.UserSpec) bool { return u.Enabled == nil || *u.Enabled }

// UserACLRules are the ACL SETUSER arguments that make the user exactly u
// with the passwords p: reset first, so a rule removed from spec.users goes.
func UserACLRules(u *v1alpha1.UserSpec, p UserPasswords) []string {
	rules := []string{"reset", "off"}
	if UserEnabled(u) {
		rules[1] = "on"
	}
	for _, h := range p.Hashes() {
		rules = append(rules, "#"+h)
	}
	for _, k := range u.Keys {
		rules = append(rules, "~"+k)
	}
	for _, c := range u.Channels {
		rules = append(rules, "&"+c)
	}
	return append(rules, u.Commands...)
}

// UsersACL is the users' part of a starting server's configuration, one
// "user" line each, for the users state has passwords of.
func UsersACL(rp *v1alpha1.RedisPersistence, state UsersState) string {
	var b strings.Builder
	for i := range rp.Spec.Users {
		u := &rp.Spec.Users[i]
		p, ok := state[u.Name]
		if !ok {
			continue
		}
		b.WriteString("user " + u.Name)
		for _, rule := range UserACLRules(u, p) {
			b.WriteString(" " + ConfigValue(rule))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// UsersSecret is the Secret <name>-users: the servers' users as
// configuration lines (which the prepare container writes into the
// server's users include file) and the state of their passwords. It holds
// password hashes, no password.
func UsersSecret(rp *v1alpha1.RedisPersistence, state UsersState) *corev1.Secret {
	encoded, err := json.Marshal(state)
	if err != nil {
		panic(err) // a map of strings and times always marshals
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: ObjectMeta(rp, UsersSecretName(rp)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{UsersACLKey: []byte(UsersACL(rp, state)), UsersStateKey: encoded},
	}
}

// UserPasswordSecret is a user's generated password. Like AuthSecret it
// has no owner: it outlives the RedisPersistence with the data.
func UserPasswordSecret(rp *v1alpha1.RedisPersistence, user, password string) *corev1.Secret {
	meta := ObjectMeta(rp, UserPasswordSecretName(rp, user))
	meta.OwnerReferences = nil
	meta.Labels[LabelUser] = user
	return &corev1.Secret{
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{GeneratedPasswordKey: []byte(password)},
	}
}

// UsersInclude is the users include file the prepare container writes
// (scripts/render-auth.sh). The server's command line includes it, not the
// ConfigMap: the ConfigMap reaches running pods at once, and a pod of an
// older template restarting would not find the file; the command line comes
// with the prepare container that writes it. Always included, empty without
// users: adding the first user restarts nothing.
const UsersInclude = RunDir + "/users.conf"

// usersEnv is what the prepare container writes the users include file
// from. The Secret is optional: an instance without users has none, and a
// server may start before the operator first writes it.
func usersEnv(rp *v1alpha1.RedisPersistence) corev1.EnvVar {
	env := secretKeyEnv("USERS_ACL", UsersSecretName(rp), UsersACLKey)
	env.ValueFrom.SecretKeyRef.Optional = ptr.To(true)
	return env
}
