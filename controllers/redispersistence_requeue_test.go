package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

func TestRequeueAfter(t *testing.T) {
	withCondition := func(conditionType string, status metav1.ConditionStatus) func(*v1alpha1.RedisPersistence) {
		return func(rp *v1alpha1.RedisPersistence) {
			meta.SetStatusCondition(&rp.Status.Conditions, metav1.Condition{Type: conditionType, Status: status, Reason: "Test"})
		}
	}
	terminated := func(ago time.Duration) func(*v1alpha1.RedisPersistence) {
		return func(rp *v1alpha1.RedisPersistence) {
			rp.Status.LastTermination = &v1alpha1.ServerTermination{FinishedAt: metav1.NewTime(testNow.Add(-ago))}
		}
	}
	degraded := withCondition(v1alpha1.ConditionDegraded, metav1.ConditionTrue)
	announcing := &upgradeWait{retry: upgradeAnnounceDelay}
	waitingForTurn := &upgradeWait{retry: resyncInterval}
	for _, c := range []struct {
		desc         string
		status       []func(*v1alpha1.RedisPersistence)
		mode         v1alpha1.PersistenceMode
		serverUnread bool
		unreachable  time.Duration // > 0: the server's INFO has failed for this long
		upgrade      *upgradeWait
		tlsRotating  bool
		probeIn      time.Duration
		want         time.Duration
	}{
		{desc: "settled: the next event", want: 0},
		{desc: "settled, a storage probe due in an hour", probeIn: time.Hour, want: time.Hour},
		{desc: "the server's INFO not read", serverUnread: true, probeIn: time.Hour, want: resyncInterval},
		{desc: "the Ready server unreachable a moment", unreachable: time.Nanosecond, probeIn: time.Hour, want: 2 * time.Second},
		{desc: "the Ready server unreachable for 10s", unreachable: 10 * time.Second, want: 10 * time.Second},
		{desc: "the Ready server unreachable for 5m", unreachable: 5 * time.Minute, want: resyncInterval},
		{desc: "uring: a restart may fall back to posix", mode: v1alpha1.ModeUring, probeIn: time.Hour, want: resyncInterval},
		{desc: "runtime options not applied", status: []func(*v1alpha1.RedisPersistence){func(rp *v1alpha1.RedisPersistence) {
			rp.Status.AppliedConfigHash = ""
		}}, want: resyncInterval},
		{desc: "a volume still expanding", status: []func(*v1alpha1.RedisPersistence){
			withCondition(v1alpha1.ConditionStorageResized, metav1.ConditionFalse),
		}, want: resyncInterval},
		{desc: "a volume expanded", status: []func(*v1alpha1.RedisPersistence){
			withCondition(v1alpha1.ConditionStorageResized, metav1.ConditionTrue),
		}, want: 0},
		{desc: "an upgrade announcing itself", upgrade: announcing, want: upgradeAnnounceDelay},
		{desc: "an upgrade waiting for its turn", upgrade: waitingForTurn, probeIn: time.Hour, want: resyncInterval},
		{desc: "an upgrade announcing itself while a certificate rotates", upgrade: announcing, tlsRotating: true, want: upgradeAnnounceDelay},
		{desc: "a certificate rotating", tlsRotating: true, want: tlsRotationRetry},
		{desc: "a certificate rotating while an upgrade waits for its turn", upgrade: waitingForTurn, tlsRotating: true, want: tlsRotationRetry},
		{desc: "a certificate rotating while degraded", status: []func(*v1alpha1.RedisPersistence){
			degraded, terminated(degradedWindow - 30*time.Second),
		}, tlsRotating: true, want: tlsRotationRetry},
		{desc: "degraded, its window ends in 30s", status: []func(*v1alpha1.RedisPersistence){
			degraded, terminated(degradedWindow - 30*time.Second),
		}, want: 31 * time.Second},
		{desc: "degraded, its window ends in 5m", status: []func(*v1alpha1.RedisPersistence){
			degraded, terminated(degradedWindow - 5*time.Minute),
		}, want: resyncInterval},
		{desc: "degraded, its window over (a crash loop)", status: []func(*v1alpha1.RedisPersistence){
			degraded, terminated(2 * degradedWindow),
		}, want: resyncInterval},
		{desc: "degraded, no termination recorded", status: []func(*v1alpha1.RedisPersistence){degraded}, want: resyncInterval},
		{desc: "a recent termination, not degraded", status: []func(*v1alpha1.RedisPersistence){
			withCondition(v1alpha1.ConditionDegraded, metav1.ConditionFalse), terminated(degradedWindow - 30*time.Second),
		}, want: 0},
	} {
		rp := &v1alpha1.RedisPersistence{Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF}}
		if c.mode != "" {
			rp.Spec.Mode = c.mode
		}
		rp.Status.AppliedConfigHash = specs.RuntimeConfigHash(rp)
		for _, set := range c.status {
			set(rp)
		}
		obs := observation{info: &serverInfo{}}
		if c.serverUnread {
			obs.info = nil
		}
		if c.unreachable > 0 {
			obs.info, obs.infoErr, obs.unreachableFor = nil, errors.New("connection refused"), c.unreachable
		}
		if got := requeueAfter(rp, obs, c.upgrade, c.tlsRotating, c.probeIn, testNow); got != c.want {
			t.Errorf("%s: requeue after %s, want %s", c.desc, got, c.want)
		}
	}
}

func TestRequeueWithin(t *testing.T) {
	const limit = 10 * time.Second
	for _, c := range []struct {
		desc   string
		result ctrl.Result
		want   ctrl.Result
	}{
		{"no requeue", ctrl.Result{}, ctrl.Result{RequeueAfter: limit}},
		{"later", ctrl.Result{RequeueAfter: time.Minute}, ctrl.Result{RequeueAfter: limit}},
		{"sooner", ctrl.Result{RequeueAfter: 2 * time.Second}, ctrl.Result{RequeueAfter: 2 * time.Second}},
		{"with backoff", ctrl.Result{Requeue: true}, ctrl.Result{Requeue: true, RequeueAfter: limit}},
	} {
		if got := requeueWithin(c.result, limit); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.desc, got, c.want)
		}
	}
}

// A failed INFO answers the reconciles of its instance for a moment only,
// and how long the server has failed counts from its first failure since
// it last answered.
func TestServerProbesRetryAnUnreachableServer(t *testing.T) {
	clk := clocktesting.NewFakeClock(testNow)
	p := &serverProbes{clock: clk}
	key := types.NamespacedName{Namespace: "ns", Name: "cache"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "pod-1"}}
	asked := 0
	fail := func(context.Context) (*serverInfo, error) { asked++; return nil, errors.New("connection refused") }
	answer := func(context.Context) (*serverInfo, error) { asked++; return &serverInfo{}, nil }

	_, _ = p.info(context.Background(), key, pod, fail)
	_, _ = p.info(context.Background(), key, pod, fail)
	if asked != 1 || p.unreachableFor(key) != 0 {
		t.Fatalf("two reconciles in the same instant: asked %d times, unreachable for %s; want 1 and 0", asked, p.unreachableFor(key))
	}
	clk.Step(unreachableRetry(0))
	_, _ = p.info(context.Background(), key, pod, fail)
	if asked != 2 {
		t.Fatalf("after the first retry's delay the server was asked %d times in all, want 2", asked)
	}
	clk.Step(3 * time.Second)
	if got := p.unreachableFor(key); got != 5*time.Second {
		t.Fatalf("unreachable for %s, want 5s since the first failure", got)
	}
	if got := unreachableRetry(p.unreachableFor(key)); got != 5*time.Second {
		t.Fatalf("next retry after %s, want 5s", got)
	}
	_, _ = p.info(context.Background(), key, pod, answer)
	if asked != 3 || p.unreachableFor(key) != 0 {
		t.Fatalf("once it answered: asked %d times, unreachable for %s; want 3 and 0", asked, p.unreachableFor(key))
	}
	// An answer is remembered for infoMaxAge.
	clk.Step(infoMaxAge / 2)
	_, _ = p.info(context.Background(), key, pod, fail)
	if asked != 3 {
		t.Fatalf("an answer %s old was asked again", infoMaxAge/2)
	}
}
