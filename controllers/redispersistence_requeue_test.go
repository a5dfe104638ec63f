package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		upgrade      *upgradeWait
		tlsRotating  bool
		probeIn      time.Duration
		want         time.Duration
	}{
		{desc: "settled: the next event", want: 0},
		{desc: "settled, a storage probe due in an hour", probeIn: time.Hour, want: time.Hour},
		{desc: "the server's INFO not read", serverUnread: true, probeIn: time.Hour, want: resyncInterval},
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
