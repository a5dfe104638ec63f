package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// restart sets the annotation the operator copies into the servers' pod
// template, to the time, and says how the operator rolls it: a switchover
// for a replicated instance, a failover per shard for a sharded one, the
// primary like the others with updateStrategy restart. A second restart in the same second is refused,
// since it would change nothing; a later one changes the annotation again.
func TestRestartAnnotatesTheInstance(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	create(t, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Replicas: 3}}, v1alpha1.RedisPersistenceStatus{})
	create(t, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Replicas: 2, UpdateStrategy: v1alpha1.UpdateRestart}}, v1alpha1.RedisPersistenceStatus{})
	create(t, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sharded"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Cluster: &v1alpha1.ClusterSpec{Shards: 3}}}, v1alpha1.RedisPersistenceStatus{})

	annotation := func(name string) string {
		t.Helper()
		rp := &v1alpha1.RedisPersistence{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rp); err != nil {
			t.Fatal(err)
		}
		return rp.Annotations[specs.AnnotationRestartedAt]
	}
	stdout, _, err := run(t, "-n", ns, "restart", "cache")
	if err != nil {
		t.Fatal(err)
	}
	if got := annotation("cache"); got != "2026-11-28T12:00:00Z" {
		t.Errorf("the annotation is %q, want the plugin's time", got)
	}
	if !strings.Contains(stdout, "restart requested at 2026-11-28T12:00:00Z: its replicas restart one at a time, then the Sentinels hand the primary role") {
		t.Errorf("restart printed %q", stdout)
	}
	if _, _, err := run(t, "-n", ns, "restart", "cache"); err == nil || !strings.Contains(err.Error(), "requested this second already") {
		t.Errorf("a second restart in the same second: %v", err)
	}
	if _, _, err := runAt(t, testNow.Add(time.Minute), "-n", ns, "restart", "cache"); err != nil || annotation("cache") != "2026-11-28T12:01:00Z" {
		t.Errorf("a restart a minute later: %v, annotation %q", err, annotation("cache"))
	}

	stdout, _, err = run(t, "-n", ns, "restart", "plain")
	if err != nil || !strings.Contains(stdout, "the primary like the others (spec.updateStrategy restart)") {
		t.Errorf("restart of an instance with updateStrategy restart: %v, %q", err, stdout)
	}
	stdout, _, err = run(t, "-n", ns, "restart", "sharded")
	if err != nil || !strings.Contains(stdout, "in each shard the replicas restart one at a time, then a restarted one takes over (CLUSTER FAILOVER)") {
		t.Errorf("restart of a sharded instance: %v, %q", err, stdout)
	}
	if _, _, err := run(t, "-n", ns, "restart", "gone"); err == nil || !strings.Contains(err.Error(), `no RedisPersistence "gone"`) {
		t.Errorf("restart of an instance that does not exist: %v", err)
	}
}
