package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// TestDefaultPasswordRotates: a new password in <name>-auth reaches a
// replicated instance's primary, replica and Sentinel (a real one) without
// a restart: each accepts it beside the previous one, the replica signs in
// to the primary with it, the Sentinel to the servers and to other
// Sentinels; after spec.passwordGracePeriod only the new one works; the
// pod templates do not change and the connection Secret follows.
func TestDefaultPasswordRotates(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name, grace = "vault", 6 * time.Second
	createVolumeFor(t, ns, "data-"+name+"-1")
	deleteAtEnd(t, createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways},
		Replicas: 2, Sentinel: &v1alpha1.SentinelSpec{Count: 2, Quorum: 1},
		PasswordGracePeriod: &metav1.Duration{Duration: grace},
	}))
	waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	oldPassword := instancePassword(t, ns, name)
	primary, replica := runPrimaryAndReplica(t, ns, name)
	sentinel := runSentinels(t, ns, name, primary, oldPassword)
	waitCondition(t, ns, name, v1alpha1.ConditionReplicating, metav1.ConditionTrue, ReasonReplicating)
	templates := map[string]string{}
	for _, sts := range []string{name, name + "-sentinel"} {
		s := &appsv1.StatefulSet{}
		if err := get(t, s, ns, sts); err != nil {
			t.Fatal(err)
		}
		templates[sts] = fmt.Sprint(s.Generation, s.Spec.Template.Annotations)
	}

	secret := &corev1.Secret{}
	if err := get(t, secret, ns, name+"-auth"); err != nil {
		t.Fatal(err)
	}
	const newPassword = `new "pass" word`
	secret.Data["password"] = []byte(newPassword)
	updated := time.Now()
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	servers := map[string]string{"primary": primary, "replica": replica, "sentinel": sentinel}
	eventually(t, 30*time.Second, func() error {
		for what, addr := range servers {
			if err := signIn(addr, "default", newPassword); err != nil {
				return fmt.Errorf("%s: the new password: %w", what, err)
			}
		}
		return nil
	})
	// The operator records until when the previous password works: the
	// grace period from the moment it saw the new one, in whole seconds.
	acl := &corev1.Secret{}
	if err := get(t, acl, ns, name+"-acl"); err != nil {
		t.Fatal(err)
	}
	until, err := time.Parse(time.RFC3339, string(acl.Data["default-previous-until"]))
	if err != nil {
		t.Fatalf("the rotation's deadline in %s-acl: %v", name, err)
	}
	if earliest := updated.Add(grace - time.Second); until.Before(earliest) {
		t.Errorf("the previous password works until %s, less than the %s grace period after the change at %s", until, grace, updated)
	}
	for what, addr := range servers {
		if err := signIn(addr, "default", oldPassword); err != nil && time.Now().Before(until) {
			t.Errorf("%s: the previous password is refused within the grace period: %v", what, err)
		}
	}
	r := newClient(replica, newPassword)
	defer func() { _ = r.Close() }()
	if got := r.ConfigGet(ctx, "primaryauth").Val()["primaryauth"]; got != newPassword {
		t.Errorf("the replica signs in to the primary with %q", got)
	}
	s := newClient(sentinel, newPassword)
	defer func() { _ = s.Close() }()
	if got := fmt.Sprint(s.Do(ctx, "SENTINEL", "CONFIG", "GET", "sentinel-pass").Val()); !strings.Contains(got, newPassword) {
		t.Errorf("the Sentinel signs in to the others with %s", got)
	}
	eventually(t, 30*time.Second, func() error {
		for what, addr := range servers {
			if err := signIn(addr, "default", oldPassword); err == nil {
				return fmt.Errorf("%s: the previous password works %s after its deadline", what, time.Since(until).Round(time.Second))
			}
		}
		return nil
	})
	if refused := time.Now(); refused.Before(until) {
		t.Errorf("the previous password stopped working at %s, before its deadline %s", refused, until)
	}
	// The Sentinel still reaches the servers with the new password.
	eventually(t, 30*time.Second, func() error {
		return s.Do(ctx, "SENTINEL", "FAILOVER", name).Err()
	})
	waitCondition(t, ns, name, v1alpha1.ConditionReplicating, metav1.ConditionTrue, ReasonReplicating)
	for sts, before := range templates {
		st := &appsv1.StatefulSet{}
		if err := get(t, st, ns, sts); err != nil {
			t.Fatal(err)
		}
		if after := fmt.Sprint(st.Generation, st.Spec.Template.Annotations); after != before {
			t.Errorf("the rotation changed the StatefulSet %s: %s -> %s", sts, before, after)
		}
	}
	eventually(t, 30*time.Second, func() error {
		conn := &corev1.Secret{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: specs.ConnectionSecretName(&v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: name}})}, conn); err != nil {
			return err
		}
		if string(conn.Data[specs.ConnectionPasswordKey]) != newPassword {
			return fmt.Errorf("the connection Secret holds the previous password")
		}
		return nil
	})
}

// deleteAtEnd deletes rp when the test ends: its servers stop with the test
// while its pods stay Ready (no kubelet here), and an instance whose
// password or users are being applied would keep dialling them.
func deleteAtEnd(t *testing.T, rp *v1alpha1.RedisPersistence) {
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rp) })
}
