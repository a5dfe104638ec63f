package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func createSecret(t *testing.T, ns, name, password string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{"password": []byte(password)}}
	if err := k8s.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
}

// An instance with auth, whose server is up and asked for its INFO with the
// password, must not stop the operator: the operator runs with the role its
// markers generate (get, list, watch on Secrets), reads the password uncached,
// and a dozen instances created afterwards in another namespace all get their
// status.
func TestAuthInstanceBlocksNoOne(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createSecret(t, ns, "redis-auth", "first-password")
	auth := &v1alpha1.AuthSpec{SecretRef: v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"}}
	createRP(t, ns, "guarded", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Auth: auth})
	waitCondition(t, ns, "guarded", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)

	// The real server, with the password the prepare container would have
	// written to the include file.
	serverAddrs.Store(ns+"/guarded-0", testenv.StartServer(t, renderedConfig(t, ns, "guarded")+"requirepass first-password\n"))
	actAsKubelet(t, ns, "guarded-0", "ext4")
	got := waitCondition(t, ns, "guarded", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	if got.Status.Engine != "posix" {
		t.Errorf("engine %q: the operator did not read the server's INFO with the password", got.Status.Engine)
	}

	others := newNamespace(t)
	const count = 12
	for i := range count {
		createRP(t, others, fmt.Sprintf("other-%d", i), v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	}
	for i := range count {
		waitCondition(t, others, fmt.Sprintf("other-%d", i), v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	}

	// A new password reaches the pods, which read it only at start, through
	// the Secret watch alone: the RedisPersistence itself does not change.
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "guarded"); err != nil {
		t.Fatal(err)
	}
	firstHash := sts.Spec.Template.Annotations[annotationAuthHash]
	if firstHash == "" {
		t.Fatal("the pod template carries no auth hash")
	}
	secret := &corev1.Secret{}
	if err := get(t, secret, ns, "redis-auth"); err != nil {
		t.Fatal(err)
	}
	secret.Data["password"] = []byte("second-password")
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, sts, ns, "guarded"); err != nil {
			return err
		}
		if h := sts.Spec.Template.Annotations[annotationAuthHash]; h == firstHash {
			return fmt.Errorf("auth hash still %s after the password changed", h)
		}
		return nil
	})
	for _, v := range sts.Spec.Template.Annotations {
		if strings.Contains(v, "password") {
			t.Errorf("the pod template carries the password: %v", sts.Spec.Template.Annotations)
		}
	}
}

// A Secret that does not exist yet holds the instance back with a condition
// that says so; creating it is enough for the operator to go on.
func TestAuthSecretMissing(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "early", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone,
		Auth: &v1alpha1.AuthSpec{SecretRef: v1alpha1.SecretKeyRef{Name: "later", Key: "password"}}})
	got := waitCondition(t, ns, "early", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonAuthSecretMissing)
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "later") {
		t.Errorf("the condition does not name the Secret: %q", msg)
	}
	createSecret(t, ns, "later", "a-password")
	waitCondition(t, ns, "early", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
}
