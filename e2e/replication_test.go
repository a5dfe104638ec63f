//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/benchreport"
)

// TestReplicasFailOver: a three-server uring durable instance on the one
// node whose replies wait for one replica's fsync (uring.ackReplicas: 1). Its
// primary's pod and volume are lost (the pod deleted without grace, its claim
// deleted) and the operator is restarted at the same moment: the Sentinels
// promote a replica, the operator labels it, the Service <name> selects it
// and nothing else, every acknowledged key is there (no WAIT: the
// acknowledgement itself waited for a replica's disk), and the lost server
// comes back on a new volume as a replica holding them too.
func TestReplicasFailOver(t *testing.T) {
	const name = "replicated"
	create(t, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, AckReplicas: 1}, Replicas: 3,
	})
	deleteReplicaClaimsAtEnd(t, name)
	rp := waitFor(t, name, 6*time.Minute, hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating"))
	if rp.Status.Primary != name+"-0" || len(rp.Status.Replicas) != 3 {
		t.Fatalf("status: primary %q, replicas %+v", rp.Status.Primary, rp.Status.Replicas)
	}
	// Required needs a node per server: the kind cluster's three workers, not the offline cluster's one node.
	want := v1alpha1.AntiAffinityPreferred
	if n := schedulableNodes(t); n >= 3 {
		want = v1alpha1.AntiAffinityRequired
	}
	if rp.Status.PodAntiAffinity != want {
		t.Errorf("status.podAntiAffinity %q with %d schedulable nodes, want %s", rp.Status.PodAntiAffinity, schedulableNodes(t), want)
	}
	waitServiceSelects(t, name, name+"-0")

	var script strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&script, "SET key:%d value:%d\n", i, i)
	}
	out := podExec(t, name+"-0", script.String(), "valkey-cli")
	if acked := strings.Count(out, "OK"); acked != 2000 {
		t.Fatalf("%d of 2000 SETs acknowledged: %.200q", acked, out)
	}
	persistence := podExec(t, name+"-0", "", "valkey-cli", "INFO", "persistence")
	if infoField(persistence, "aof_uring_ack_replicas") != "1" || strings.HasPrefix(infoField(persistence, "aof_uring_replica_durable_offset"), "-") {
		t.Fatalf("the primary does not wait for a replica's fsync: ack_replicas %q, replica durable offset %q",
			infoField(persistence, "aof_uring_ack_replicas"), infoField(persistence, "aof_uring_replica_durable_offset"))
	}

	// The node and its disk are gone, and the operator restarts meanwhile.
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name + "-0", Namespace: namespace}}
	if err := k8s.Delete(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	lost := getPod(t, name+"-0")
	if err := k8s.Delete(context.Background(), lost, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(envOr("E2E_NAMESPACE", "uring-redis-system")),
		client.MatchingLabels{"app.kubernetes.io/name": "uring-redis-operator"}); err != nil {
		t.Fatal(err)
	}

	rp = waitFor(t, name, 4*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if p := rp.Status.Primary; p == "" || p == name+"-0" {
			return fmt.Errorf("status.primary %q", p)
		}
		return nil
	})
	primary := rp.Status.Primary
	t.Logf("%s promoted and labelled %s after the primary was lost", primary, time.Since(start).Round(time.Second))
	waitServiceSelects(t, name, primary)
	if n := podExec(t, primary, "", "valkey-cli", "DBSIZE"); n != "2000" {
		t.Fatalf("the promoted %s holds %s keys, want 2000", primary, n)
	}
	// Through the Service, as a client reaches it. kube-proxy programs the
	// Service's address a moment after the EndpointSlice changes; until then a
	// connection is refused, and a client retries.
	var role string
	for deadline := time.Now().Add(30 * time.Second); role != "master" && time.Now().Before(deadline); time.Sleep(time.Second) {
		out, err := tryPodExec(primary, "valkey-cli", "-h", name, "INFO", "replication")
		if role = infoField(out, "role"); err != nil {
			role = err.Error()
		}
	}
	if role != "master" {
		t.Errorf("the Service %s answers as %q", name, role)
	}

	// The lost server is back on a new volume, a replica of the new primary.
	waitFor(t, name, 4*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if err := hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating")(rp); err != nil {
			return err
		}
		if pod := getPod(t, name+"-0"); pod.UID == lost.UID || pod.Labels["uringredis.io/role"] != "replica" {
			return fmt.Errorf("%s-0: the old pod, or labelled %q", name, pod.Labels["uringredis.io/role"])
		}
		return nil
	})
	if n := podExec(t, name+"-0", "", "valkey-cli", "DBSIZE"); n != "2000" {
		t.Errorf("the server back on a new volume holds %s keys, want 2000", n)
	}
	if v := podExec(t, name+"-0", "", "valkey-cli", "GET", "key:1999"); v != "value:1999" {
		t.Errorf("key:1999 is %q on the server back on a new volume", v)
	}
}

// schedulableNodes counts the Ready nodes without a NoSchedule taint.
func schedulableNodes(t *testing.T) int { return len(schedulableNodeNames(t)) }

// schedulableNodeNames are the Ready nodes without a NoSchedule taint.
func schedulableNodeNames(t *testing.T) []string {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := k8s.List(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, node := range nodes.Items {
		ready := slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		tainted := slices.ContainsFunc(node.Spec.Taints, func(taint corev1.Taint) bool { return taint.Effect == corev1.TaintEffectNoSchedule })
		if ready && !tainted && !node.Spec.Unschedulable {
			names = append(names, node.Name)
		}
	}
	return names
}

// waitServiceSelects waits until the Service's ready endpoints are exactly pod's.
func waitServiceSelects(t *testing.T, service, pod string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		var list discoveryv1.EndpointSliceList
		if err := k8s.List(context.Background(), &list, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
			t.Fatal(err)
		}
		var ready []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) && e.TargetRef != nil {
					ready = append(ready, e.TargetRef.Name)
				}
			}
		}
		if len(ready) == 1 && ready[0] == pod {
			return
		}
		last = fmt.Sprint(ready)
	}
	fatalDescribed(t, service, "the Service %s selects %s, want only %s", service, last, pod)
}

// TestBenchmarkCostOfAckReplicas: a RedisBenchmark of two replicated uring
// durable instances, one whose replies wait for its replica's fsync
// (uring.ackReplicas: 1) and one that does not, measured one after the other
// on the same node. Each result names the replica the primary streamed to and
// the wait; the table shows the cost of the wait. The crash check kills each
// primary under write load: neither loses an acknowledged write. The figures
// are printed, not asserted (see `make bench-replicas` for the server-level
// comparison).
func TestBenchmarkCostOfAckReplicas(t *testing.T) {
	ctx := context.Background()
	targets := map[string]int32{"acks-0": 0, "acks-1": 1} // name -> ackReplicas
	var names []string
	for name, k := range targets {
		create(t, name, v1alpha1.RedisPersistenceSpec{
			Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, AckReplicas: k},
			Replicas: 2, Sentinel: &v1alpha1.SentinelSpec{Count: 1, Quorum: 1},
			Benchmark: &v1alpha1.BenchmarkAccessSpec{CrashCheck: true},
		})
		t.Cleanup(func() {
			if !t.Failed() {
				_ = k8s.Delete(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name + "-1", Namespace: namespace}})
			}
		})
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		waitFor(t, name, 6*time.Minute, hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating"))
	}
	rb := &v1alpha1.RedisBenchmark{
		ObjectMeta: metav1.ObjectMeta{Name: "ack-replicas", Namespace: namespace},
		Spec: v1alpha1.RedisBenchmarkSpec{
			Targets: names,
			Workload: v1alpha1.BenchmarkWorkload{
				Commands: []v1alpha1.BenchmarkCommand{v1alpha1.CommandSet, v1alpha1.CommandIncr},
				Requests: int32(envInt(t, "E2E_BENCH_REQUESTS", 20000)),
				Clients:  50,
			},
			CrashCheck: &v1alpha1.CrashCheckSpec{Clients: 20, WriteSeconds: 3},
		},
	}
	if err := k8s.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	waitBenchmarkComplete(t, rb, 15*time.Minute)

	var table strings.Builder
	if err := benchreport.Table(&table, rb.Status.Results, rb.Status.CrashChecks); err != nil {
		t.Fatal(err)
	}
	t.Logf("RedisBenchmark %s (%d requests per command, 50 clients, replica on the same node):\n%s", rb.Name, rb.Spec.Workload.Requests, table.String())
	if len(rb.Status.Results) != 4 {
		t.Errorf("%d results, want set and incr on both targets: %+v", len(rb.Status.Results), rb.Status.Results)
	}
	for _, r := range rb.Status.Results {
		if r.Replicas != 1 || r.AckReplicas != targets[r.Target] || r.Mode != "uring-durable" || r.Engine != "uring" || r.OpsPerSecond <= 0 || r.P99Micros <= 0 {
			t.Errorf("%s %s: %+v, want 1 replica streaming, ackReplicas %d, uring durable figures", r.Target, r.Command, r, targets[r.Target])
		}
	}
	if len(rb.Status.CrashChecks) != 2 {
		t.Fatalf("%d crash checks, want 2: %+v", len(rb.Status.CrashChecks), rb.Status.CrashChecks)
	}
	for _, cc := range rb.Status.CrashChecks {
		if cc.AcknowledgedKeys == 0 || !cc.Durable || cc.LostKeys != 0 {
			t.Errorf("crash check %s: %+v (a durable mode must lose nothing)", cc.Target, cc)
		}
	}
}
