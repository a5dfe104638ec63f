package specs_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

func TestNextUsersState(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	rp := &v1alpha1.RedisPersistence{Spec: v1alpha1.RedisPersistenceSpec{
		Users:               []v1alpha1.UserSpec{{Name: "a"}, {Name: "b"}},
		PasswordGracePeriod: &metav1.Duration{Duration: 10 * time.Minute},
	}}
	until := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(d)) }

	// First sight: no previous password.
	state, expiry := specs.NextUsersState(rp, specs.UsersState{}, map[string]string{"a": "h1", "b": "x"}, now)
	if len(state["a"].Previous) != 0 || state["a"].Current != "h1" || !expiry.IsZero() {
		t.Fatalf("first state %+v, expiry %v", state, expiry)
	}
	// A rotation keeps h1 for the grace period.
	state, expiry = specs.NextUsersState(rp, state, map[string]string{"a": "h2", "b": "x"}, now)
	if got := state["a"].Hashes(); !slices.Equal(got, []string{"h2", "h1"}) || !expiry.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("after a rotation: hashes %v, expiry %v", got, expiry)
	}
	// A second rotation within it keeps both, earliest expiry first.
	later := now.Add(time.Minute)
	state, expiry = specs.NextUsersState(rp, state, map[string]string{"a": "h3", "b": "x"}, later)
	if got := state["a"].Hashes(); !slices.Equal(got, []string{"h3", "h1", "h2"}) || !expiry.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("after two rotations: hashes %v, expiry %v", got, expiry)
	}
	// Going back to a previous password does not list it twice.
	back, _ := specs.NextUsersState(rp, state, map[string]string{"a": "h1", "b": "x"}, later)
	if got := back["a"].Hashes(); !slices.Equal(got, []string{"h1", "h2", "h3"}) {
		t.Fatalf("back to h1: hashes %v", got)
	}
	// Past their ends they go; a user whose Secret was unreadable keeps what it had.
	state, expiry = specs.NextUsersState(rp, state, map[string]string{"a": "h3"}, now.Add(11*time.Minute+time.Second))
	if got := state["a"].Hashes(); !slices.Equal(got, []string{"h3"}) || !expiry.IsZero() || state["b"].Current != "x" {
		t.Fatalf("after the grace periods: %+v, expiry %v", state, expiry)
	}
	// A user never read is not made; a user gone from spec.users goes.
	if s, _ := specs.NextUsersState(rp, specs.UsersState{}, map[string]string{"a": "h"}, now); len(s) != 1 {
		t.Errorf("a user without a password got a state: %+v", s)
	}
	rp.Spec.Users = rp.Spec.Users[:1]
	if s, _ := specs.NextUsersState(rp, state, map[string]string{"a": "h3", "b": "x"}, now); len(s) != 1 {
		t.Errorf("a removed user kept its state: %+v", s)
	}
	// No grace period: the previous password goes at once.
	rp.Spec.PasswordGracePeriod = &metav1.Duration{}
	if s, _ := specs.NextUsersState(rp, specs.UsersState{"a": {Current: "h1", Previous: []specs.PreviousPassword{{Hash: "h0", Until: until(time.Hour)}}}}, map[string]string{"a": "h2"}, now); !slices.Equal(s["a"].Hashes(), []string{"h2", "h0"}) {
		t.Errorf("grace 0s: hashes %v, want the new one and the earlier one still in its period", s["a"].Hashes())
	}
}

func TestUserACLRules(t *testing.T) {
	u := &v1alpha1.UserSpec{Name: "app", Keys: []string{"app:*"}, Channels: []string{"news"}, Commands: []string{"+@read", "-keys"}}
	p := specs.UserPasswords{Current: "h2", Previous: []specs.PreviousPassword{{Hash: "h1"}}}
	if got, want := strings.Join(specs.UserACLRules(u, p), " "), "reset on #h2 #h1 ~app:* &news +@read -keys"; got != want {
		t.Errorf("rules %q, want %q", got, want)
	}
	u.Enabled = ptr.To(false)
	if got := specs.UserACLRules(u, p)[1]; got != "off" {
		t.Errorf("a disabled user is %q", got)
	}
	rp := &v1alpha1.RedisPersistence{Spec: v1alpha1.RedisPersistenceSpec{Users: []v1alpha1.UserSpec{*u, {Name: "unread"}}}}
	if got, want := specs.UsersACL(rp, specs.UsersState{"app": p}), `user app reset off "#h2" "#h1" "~app:*" "&news" +@read -keys`+"\n"; got != want {
		t.Errorf("users.acl %q, want %q", got, want)
	}
}
