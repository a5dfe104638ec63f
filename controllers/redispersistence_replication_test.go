package controllers

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func TestDecideReplication(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	pods := []corev1.Pod{}
	for i := range 3 {
		pods = append(pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cache-%d", i), Namespace: "apps"},
			Status:     corev1.PodStatus{PodIP: fmt.Sprintf("10.0.0.%d", i+1)},
		})
	}
	byIP := func(pod *corev1.Pod) string { return net.JoinHostPort(pod.Status.PodIP, "6379") }
	host := func(pod string) string { return pod + ".cache-headless.apps.svc:6379" }
	healthy := map[string]replicationInfo{
		"cache-0": {role: "master", offset: 1000, linkUp: false},
		"cache-1": {role: "slave", offset: 900, linkUp: true},
		"cache-2": {role: "slave", offset: 1000, linkUp: true},
	}
	for _, tc := range []struct {
		desc        string
		answers     []sentinelAnswer
		infos       map[string]replicationInfo
		wantPrimary string
		wantReason  string
	}{
		{"all agree, all linked", []string{host("cache-0"), host("cache-0"), host("cache-0")}, healthy, "cache-0", ReasonReplicating},
		{"a majority of those that answer", []string{host("cache-0"), "", host("cache-0")}, healthy, "cache-0", ReasonReplicating},
		{"named by the address the operator dials", []string{"10.0.0.1:6379"}, healthy, "cache-0", ReasonReplicating},
		{"no Sentinel answers", []string{"", "", ""}, healthy, "", ReasonSentinelsUnreachable},
		{"a tie during a failover", []string{host("cache-0"), host("cache-1")}, healthy, "", ReasonNoPrimary},
		{"a primary that is no pod of the instance", []string{"cache-0.other-headless.apps.svc:6379"}, healthy, "", ReasonNoPrimary},
		{"named but not yet promoted", []string{host("cache-1"), host("cache-1")}, healthy, "", ReasonPrimaryUnconfirmed},
		{"named primary does not answer", []string{host("cache-0")}, map[string]replicationInfo{"cache-1": healthy["cache-1"]}, "", ReasonPrimaryUnconfirmed},
		{"a replica's link is down", []string{host("cache-0")}, map[string]replicationInfo{
			"cache-0": healthy["cache-0"], "cache-1": {role: "slave", offset: 10}, "cache-2": healthy["cache-2"],
		}, "cache-0", ReasonReplicasNotLinked},
		{"a replica does not answer", []string{host("cache-0")}, map[string]replicationInfo{"cache-0": healthy["cache-0"], "cache-1": healthy["cache-1"]}, "cache-0", ReasonReplicasNotLinked},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			view := decideReplication(rp, pods, tc.answers, tc.infos, byIP)
			if view.primary != tc.wantPrimary || view.condition.reason != tc.wantReason {
				t.Fatalf("primary %q, condition %+v; want %q, %s", view.primary, view.condition, tc.wantPrimary, tc.wantReason)
			}
			if got := (view.condition.status == metav1.ConditionTrue); got != (tc.wantReason == ReasonReplicating) {
				t.Errorf("condition status %s with reason %s", view.condition.status, view.condition.reason)
			}
		})
	}
	// uring.ackReplicas: with fewer replicas linked than it asks for, the
	// primary refuses writes, which the condition names.
	acks := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	acks.Spec.Mode = v1alpha1.ModeUring
	acks.Spec.Uring = &v1alpha1.UringSpec{AckReplicas: 2}
	oneDown := map[string]replicationInfo{"cache-0": healthy["cache-0"], "cache-1": {role: "slave", offset: 10}, "cache-2": healthy["cache-2"]}
	if v := decideReplication(acks, pods, []string{host("cache-0")}, oneDown, byIP); v.condition.reason != ReasonTooFewForAcks ||
		!strings.Contains(v.condition.message, "1 of 2 replicas") || !strings.Contains(v.condition.message, "NOREPLICAS") {
		t.Errorf("ackReplicas 2 with one replica linked: condition %+v", v.condition)
	}
	if v := decideReplication(acks, pods, []string{host("cache-0")}, healthy, byIP); v.condition.reason != ReasonReplicating {
		t.Errorf("ackReplicas 2 with both replicas linked: condition %+v", v.condition)
	}
	acks.Spec.Uring.AckReplicas = 1
	if v := decideReplication(acks, pods, []string{host("cache-0")}, oneDown, byIP); v.condition.reason != ReasonReplicasNotLinked {
		t.Errorf("ackReplicas 1 with one of two replicas linked: condition %+v", v.condition)
	}

	view := decideReplication(rp, pods, []string{host("cache-0")}, healthy, byIP)
	want := []v1alpha1.ReplicaStatus{
		{Pod: "cache-0", Role: v1alpha1.RolePrimary, Offset: 1000, LinkUp: true},
		{Pod: "cache-1", Role: v1alpha1.RoleReplica, Offset: 900, Lag: 100, LinkUp: true},
		{Pod: "cache-2", Role: v1alpha1.RoleReplica, Offset: 1000, LinkUp: true},
	}
	if fmt.Sprint(view.servers) != fmt.Sprint(want) {
		t.Errorf("servers %+v, want %+v", view.servers, want)
	}
}

// markRunning reports a pod the way a kubelet would once its containers run
// and are ready, at 127.0.0.1 (where the test's processes listen).
// runPrimaryAndReplica runs the servers of a two-server instance, as the
// start scripts would: ordinal 0 the primary, ordinal 1 its replica, on the
// generated password, and marks their pods running.
func runPrimaryAndReplica(t *testing.T, ns, name string) (primary, replica string) {
	t.Helper()
	password := instancePassword(t, ns, name)
	if password == "" {
		t.Fatal("the instance has no generated password")
	}
	config := renderedConfig(t, ns, name) + fmt.Sprintf("primaryauth %q\n", password)
	primary = testenv.StartServer(t, config)
	serverAddrs.Store(ns+"/"+name+"-0", primary)
	markRunning(t, ns, name+"-0")
	_, primaryPort, _ := net.SplitHostPort(primary)
	replica = testenv.StartServer(t, config+fmt.Sprintf("replicaof 127.0.0.1 %s\n", primaryPort))
	serverAddrs.Store(ns+"/"+name+"-1", replica)
	markRunning(t, ns, name+"-1") // created once -0 is Ready (OrderedReady)
	return primary, replica
}

// runSentinels runs the first of a two-Sentinel instance's Sentinels
// (valkey-sentinel from the server build) monitoring primary with password,
// routes the second one's pod nowhere, marks both running and returns the
// first one's address.
func runSentinels(t *testing.T, ns, name, primary, password string) string {
	t.Helper()
	return runSentinelsTimed(t, ns, name, primary, password, time.Second, 10*time.Second)
}

// runSentinelsTimed is runSentinels with the Sentinels' down-after and
// failover timeout of the caller's choosing.
func runSentinelsTimed(t *testing.T, ns, name, primary, password string, downAfter, failoverTimeout time.Duration) string {
	t.Helper()
	_, primaryPort, _ := net.SplitHostPort(primary)
	sentinel := testenv.StartSentinel(t, fmt.Sprintf(`sentinel monitor %[1]s 127.0.0.1 %[2]s 1
sentinel down-after-milliseconds %[1]s %[4]d
sentinel failover-timeout %[1]s %[5]d
sentinel auth-pass %[1]s %[3]q
requirepass %[3]q
`, name, primaryPort, password, downAfter.Milliseconds(), failoverTimeout.Milliseconds()))
	sentinelAddrs.Store(ns+"/"+name+"-sentinel-0", sentinel)
	sentinelAddrs.Store(ns+"/"+name+"-sentinel-1", "192.0.2.1:26379") // TEST-NET-1: nothing answers
	markRunning(t, ns, name+"-sentinel-0")
	markRunning(t, ns, name+"-sentinel-1")
	return sentinel
}

func markRunning(t *testing.T, ns, podName string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, podName); err != nil {
			return err
		}
		if pod.Spec.NodeName == "" {
			return fmt.Errorf("pod %s is not scheduled yet", podName)
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = "127.0.0.1"
		pod.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
		pod.Status.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Ready: true, Started: ptr.To(true), Image: c.Image, ImageID: c.Image + "@sha256:0",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		return k8s.Status().Update(context.Background(), pod)
	})
}

// roleLabels are the role labels of the instance's server pods, by pod.
func roleLabels(t *testing.T, ns string, pods ...string) map[string]string {
	t.Helper()
	roles := map[string]string{}
	for _, name := range pods {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, name); err != nil {
			t.Fatal(err)
		}
		roles[name] = pod.Labels[specs.LabelRole]
	}
	return roles
}

// A replicated instance against real processes: a primary, a replica and a
// Sentinel (valkey-sentinel) from the server build, with the generated
// password, plus a second Sentinel pod whose address routes nowhere. The
// operator labels the pods by the Sentinel's view, reports the replication,
// follows a failover the Sentinel makes (SENTINEL FAILOVER), and its Service
// <name> selects whoever holds the primary label.
func TestReplicationFollowsTheSentinels(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = "repl"
	createVolumeFor(t, ns, "data-"+name+"-1")
	createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways},
		Replicas: 2, Sentinel: &v1alpha1.SentinelSpec{Count: 2, Quorum: 1},
	})

	// What a replicated instance is made of.
	for _, want := range []struct {
		obj  client.Object
		name string
	}{
		{&corev1.Service{}, name + "-replicas"}, {&corev1.Service{}, name + "-sentinel"},
		{&policyv1.PodDisruptionBudget{}, name}, {&policyv1.PodDisruptionBudget{}, name + "-sentinel"},
		{&appsv1.StatefulSet{}, name + "-sentinel"},
	} {
		eventually(t, 30*time.Second, func() error { return get(t, want.obj, ns, want.name) })
	}
	svc := &corev1.Service{}
	if err := get(t, svc, ns, name); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector[specs.LabelRole] != string(v1alpha1.RolePrimary) {
		t.Fatalf("the Service %s does not select the primary: %v", name, svc.Spec.Selector)
	}

	// The servers and one Sentinel, as the start scripts would run them.
	waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	password := instancePassword(t, ns, name)
	primary, replica := runPrimaryAndReplica(t, ns, name)
	sentinel := runSentinels(t, ns, name, primary, password)

	c := newClient(primary, password)
	defer func() { _ = c.Close() }()
	writeKeys(t, c, "before-failover", 100)

	rp := waitCondition(t, ns, name, v1alpha1.ConditionReplicating, metav1.ConditionTrue, ReasonReplicating)
	if rp.Status.Primary != name+"-0" || len(rp.Status.Replicas) != 2 || rp.Status.Replicas[1].Role != v1alpha1.RoleReplica || !rp.Status.Replicas[1].LinkUp {
		t.Fatalf("status: primary %q, replicas %+v", rp.Status.Primary, rp.Status.Replicas)
	}
	if rp.Status.PodAntiAffinity != v1alpha1.AntiAffinityRequired {
		t.Errorf("status.podAntiAffinity %q with three eligible nodes for two servers", rp.Status.PodAntiAffinity)
	}
	eventually(t, 10*time.Second, func() error {
		if got := roleLabels(t, ns, name+"-0", name+"-1"); got[name+"-0"] != "primary" || got[name+"-1"] != "replica" {
			return fmt.Errorf("role labels %v", got)
		}
		return nil
	})

	// The Sentinel fails over; the operator follows within its resync.
	s := newClient(sentinel, password)
	defer func() { _ = s.Close() }()
	eventually(t, 30*time.Second, func() error {
		// The Sentinel needs to have seen the replica before it can promote it.
		return s.Do(context.Background(), "SENTINEL", "FAILOVER", name).Err()
	})
	start := time.Now()
	eventually(t, 60*time.Second, func() error {
		if got := roleLabels(t, ns, name+"-0", name+"-1"); got[name+"-0"] != "replica" || got[name+"-1"] != "primary" {
			return fmt.Errorf("role labels %v", got)
		}
		return nil
	})
	t.Logf("the pods were relabelled %s after SENTINEL FAILOVER was accepted", time.Since(start).Round(time.Second))
	// Replicating stays True through the failover: wait for the status to
	// name the new primary, which the operator patches after the labels.
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		if rp.Status.Primary != name+"-1" {
			return fmt.Errorf("status.primary %q after the failover", rp.Status.Primary)
		}
		return nil
	})
	waitCondition(t, ns, name, v1alpha1.ConditionReplicating, metav1.ConditionTrue, ReasonReplicating)
	promoted := newClient(replica, password)
	defer func() { _ = promoted.Close() }()
	if missing := missingKeys(t, promoted, "before-failover", 100); missing != 0 {
		t.Errorf("the promoted replica lacks %d of the keys written before the failover", missing)
	}
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || e.Namespace == ns && e.Reason == "FailedOver" && strings.Contains(e.Message, name+"-1")
	}
	if !found {
		t.Error("no FailedOver event names the promoted pod")
	}

	// A live option reaches every server, not only ordinal 0.
	rp = updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Config = map[string]v1alpha1.ServerOptionValue{"maxmemory-policy": "allkeys-lru"}
	})
	eventually(t, 30*time.Second, func() error {
		for _, c := range []*redis.Client{c, promoted} {
			got, err := c.ConfigGet(context.Background(), "maxmemory-policy").Result()
			if err != nil {
				return err
			}
			if got["maxmemory-policy"] != "allkeys-lru" {
				return fmt.Errorf("maxmemory-policy %v on %s", got, c.Options().Addr)
			}
		}
		return nil
	})

	// Back to one server: the Sentinels and the replicated objects go.
	rp = updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Replicas, rp.Spec.Sentinel = 1, nil })
	eventually(t, 30*time.Second, func() error {
		for _, gone := range []struct {
			obj  client.Object
			name string
		}{{&appsv1.StatefulSet{}, name + "-sentinel"}, {&corev1.Service{}, name + "-replicas"}, {&policyv1.PodDisruptionBudget{}, name}} {
			if err := get(t, gone.obj, ns, gone.name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s: %w", gone.obj, gone.name, err)
			}
		}
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		if meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionReplicating) != nil || rp.Status.Primary != "" {
			return fmt.Errorf("a single server still reports replication: %+v", rp.Status)
		}
		return nil
	})
}
