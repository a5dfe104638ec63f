package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func TestUringEngineReported(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	for _, name := range []string{"active", "denied"} {
		createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}})
		waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	}
	// The real server, with the configuration the operator rendered; once as
	// is, once under a seccomp filter that denies io_uring_setup.
	serverAddrs.Store(ns+"/active-0", testenv.StartServer(t, renderedConfig(t, ns, "active")))
	serverAddrs.Store(ns+"/denied-0", testenv.StartServerWithoutIOUring(t, renderedConfig(t, ns, "denied")))
	actAsKubelet(t, ns, "active-0", "ext4")
	actAsKubelet(t, ns, "denied-0", "ext4")

	got := waitCondition(t, ns, "active", v1alpha1.ConditionUringActive, metav1.ConditionTrue, ReasonUringActive)
	if got.Status.Engine != "uring" {
		t.Errorf("engine %q, want uring", got.Status.Engine)
	}
	waitCondition(t, ns, "active", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)

	got = waitCondition(t, ns, "denied", v1alpha1.ConditionUringActive, metav1.ConditionFalse, ReasonUringFallback)
	msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUringActive).Message
	if got.Status.Engine != "posix" || !strings.Contains(strings.ToLower(msg), "eperm") && !strings.Contains(strings.ToLower(msg), "permitted") {
		t.Errorf("fallback: engine %q, message %q; want posix and the server's EPERM reason", got.Status.Engine, msg)
	}
	// Falling back keeps the server serving, durably (appendfsync always).
	waitCondition(t, ns, "denied", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
}

func TestUnreachableServer(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "silent", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	waitCondition(t, ns, "silent", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	actAsKubelet(t, ns, "silent-0", "ext4") // no server behind it
	waitCondition(t, ns, "silent", v1alpha1.ConditionUringActive, metav1.ConditionUnknown, ReasonServerUnreachable)
}
