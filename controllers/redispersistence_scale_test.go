package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func TestDecideScaleIn(t *testing.T) {
	linked := func(pod string) v1alpha1.ReplicaStatus {
		return v1alpha1.ReplicaStatus{Pod: pod, Role: v1alpha1.RoleReplica, LinkUp: true}
	}
	primary := func(pod string) v1alpha1.ReplicaStatus {
		return v1alpha1.ReplicaStatus{Pod: pod, Role: v1alpha1.RolePrimary, LinkUp: true}
	}
	for _, tc := range []struct {
		desc             string
		current, wanted  int32
		view             replicationView
		want             scaleInStep
		wantWhySubstring string
	}{
		{"scale out", 2, 3, replicationView{}, scaleInApply, ""},
		{"primary stays", 3, 2, replicationView{primary: "c-0", servers: []v1alpha1.ReplicaStatus{primary("c-0"), linked("c-1"), linked("c-2")}}, scaleInApply, ""},
		{"primary removed", 3, 2, replicationView{primary: "c-2", servers: []v1alpha1.ReplicaStatus{linked("c-0"), linked("c-1"), primary("c-2")}}, scaleInSwitchover, "c-2 is among"},
		{"primary removed with another", 4, 2, replicationView{primary: "c-3", servers: []v1alpha1.ReplicaStatus{linked("c-0"), linked("c-1"), {Pod: "c-2"}, primary("c-3")}}, scaleInSwitchover, "c-3"},
		{"primary unknown", 3, 2, replicationView{condition: condition{message: "no Sentinel answered"}}, scaleInHold, "no Sentinel answered"},
		{"a server that stays does not replicate", 3, 2, replicationView{primary: "c-2", servers: []v1alpha1.ReplicaStatus{linked("c-0"), {Pod: "c-1", Role: v1alpha1.RoleReplica}, primary("c-2")}}, scaleInHold, "c-1, which stays"},
		{"a server that stays does not answer", 3, 2, replicationView{primary: "c-2", servers: []v1alpha1.ReplicaStatus{linked("c-0"), {Pod: "c-1"}, primary("c-2")}}, scaleInHold, "c-1"},
	} {
		step, why := decideScaleIn(tc.current, tc.wanted, tc.view)
		if step != tc.want || !strings.Contains(why, tc.wantWhySubstring) {
			t.Errorf("%s: step %d (%q), want %d (with %q)", tc.desc, step, why, tc.want, tc.wantWhySubstring)
		}
	}
}

func TestRemovedReplica(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	rp.Spec.Replicas = 2
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "cache-0"}, Status: corev1.PodStatus{PodIP: "10.0.0.1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cache-2", DeletionTimestamp: ptr.To(metav1.Now())}, Status: corev1.PodStatus{PodIP: "10.0.0.3"}},
	}
	byIP := func(pod *corev1.Pod) string { return net.JoinHostPort(pod.Status.PodIP, "6379") }
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"cache-2.cache-headless.apps.svc:6379", true},  // ordinal 2 of 2 servers: scaled away
		{"cache-1.cache-headless.apps.svc:6379", false}, // no pod now, but its ordinal stays: being replaced
		{"10.0.0.1:6379", false},                        // the address of a server that stays
		{"10.0.0.3:6379", true},                         // the address of a pod going away
		{"10.0.0.9:0", true},                            // no server's (a backup agent's snapshot)
	} {
		if got := removedReplica(rp, pods, tc.addr, byIP); got != tc.want {
			t.Errorf("removedReplica(%s) = %t, want %t", tc.addr, got, tc.want)
		}
	}
}

// revisionOf is what says a StatefulSet's pods would be replaced: its pod
// template and the revision the StatefulSet controller made of it.
type revisionOf struct {
	template string
	update   string
}

func statefulSetRevision(t *testing.T, ns, name string) revisionOf {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, name); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(sts.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	return revisionOf{template: string(b), update: sts.Status.UpdateRevision}
}

// podUIDs are the UIDs of the named pods: a pod replaced gets a new one.
func podUIDs(t *testing.T, ns string, pods ...string) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for _, name := range pods {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, name); err != nil {
			t.Fatal(err)
		}
		uids[name] = pod.UID
	}
	return uids
}

// sentinelReplicaCount is how many replicas the Sentinel at addr lists, and
// how many of them it thinks down.
func sentinelReplicaCount(t *testing.T, addr, password, name string) (replicas, down int, err error) {
	t.Helper()
	list, err := sentinelReplicas(context.Background(), addr, serverCredentials{password: password}, name)
	for _, r := range list {
		replicas++
		if strings.Contains(r["flags"], "s_down") {
			down++
		}
	}
	return replicas, down, err
}

// steadyWriter writes one SET at a time to the primary the Sentinel names,
// as a Sentinel-aware client does, asking the Sentinel again after an error.
type steadyWriter struct {
	mu           sync.Mutex
	acknowledged []string
	failed       int
	longestGap   time.Duration
}

func (w *steadyWriter) run(ctx context.Context, sentinel, password, name string) {
	s := newClient(sentinel, password)
	defer func() { _ = s.Close() }()
	var c *redis.Client
	last := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		if c == nil {
			addr, err := s.Do(ctx, "SENTINEL", "get-master-addr-by-name", name).StringSlice()
			if err != nil || len(addr) != 2 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			c = newClient(net.JoinHostPort(addr[0], addr[1]), password)
		}
		key := fmt.Sprintf("steady:%d", i)
		opCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := c.Set(opCtx, key, i, 0).Err()
		cancel()
		w.mu.Lock()
		if err == nil {
			w.acknowledged = append(w.acknowledged, key)
			w.longestGap = max(w.longestGap, time.Since(last))
			last = time.Now()
		} else if ctx.Err() == nil {
			w.failed++
		}
		w.mu.Unlock()
		if err != nil {
			_ = c.Close()
			c = nil
			time.Sleep(20 * time.Millisecond)
		}
	}
	if c != nil {
		_ = c.Close()
	}
}

// A replicated uring durable instance (ackReplicas 1) against real servers
// and a real Sentinel: a scale 2 -> 3 and 3 -> 2 leaves both StatefulSets'
// pod templates and revisions as they were and replaces no pod that stays;
// the Sentinel learns the new replica without a restart; the scale-in, with
// the primary at the highest ordinal, switches over before the StatefulSet
// shrinks, and no write acknowledged through it is lost; the Sentinel then
// forgets the removed replica.
func TestScaleRestartsNothing(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = "scale"
	createAckedReplicated(t, ns, name, 2)
	password := instancePassword(t, ns, name)
	primary, _ := runPrimaryAndReplica(t, ns, name)
	_, primaryPort, _ := net.SplitHostPort(primary)
	// The Sentinel as the start script configures it (down-after 10 s).
	sentinel := runSentinelsTimed(t, ns, name, primary, password, 10*time.Second, time.Minute)
	waitCondition(t, ns, name, v1alpha1.ConditionReplicating, metav1.ConditionTrue, ReasonReplicating)

	serversBefore, sentinelsBefore := statefulSetRevision(t, ns, name), statefulSetRevision(t, ns, name+"-sentinel")
	uidsBefore := podUIDs(t, ns, name+"-0", name+"-1", name+"-sentinel-0", name+"-sentinel-1")
	unchanged := func(when string) {
		t.Helper()
		if got := statefulSetRevision(t, ns, name); got != serversBefore {
			t.Errorf("%s: the servers' StatefulSet changed its pod template or revision (%s -> %s)", when, serversBefore.update, got.update)
		}
		if got := statefulSetRevision(t, ns, name+"-sentinel"); got != sentinelsBefore {
			t.Errorf("%s: the Sentinels' StatefulSet changed its pod template or revision (%s -> %s)", when, sentinelsBefore.update, got.update)
		}
		for pod, uid := range uidsBefore {
			if now := podUIDs(t, ns, pod)[pod]; now != uid {
				t.Errorf("%s: pod %s was replaced", when, pod)
			}
		}
	}

	// Scale out: one pod more, whose server starts as a replica of the primary.
	phases := recordPhases(t, ns, name)
	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Replicas = 3 })
	eventually(t, 30*time.Second, func() error { return get(t, &corev1.Pod{}, ns, name+"-2") })
	config := renderedConfig(t, ns, name) + fmt.Sprintf("primaryauth %q\n", password)
	third := testenv.RunServer(t, t.TempDir(), config+fmt.Sprintf("replicaof 127.0.0.1 %s\n", primaryPort))
	serverAddrs.Store(ns+"/"+name+"-2", third.Addr)
	markRunning(t, ns, name+"-2")
	eventually(t, 60*time.Second, func() error {
		return replicating(t, ns, name, func(rp *v1alpha1.RedisPersistence) bool { return len(rp.Status.Replicas) == 3 })
	})
	// The Sentinel, never restarted, learns the new replica from the primary.
	eventually(t, 30*time.Second, func() error {
		if n, down, err := sentinelReplicaCount(t, sentinel, password, name); err != nil || n != 2 || down != 0 {
			return fmt.Errorf("the Sentinel lists %d replicas, %d down (%w)", n, down, err)
		}
		return nil
	})
	unchanged("after the scale to 3")
	seen, n := phases.since(0)
	if !slices.Contains(seen, v1alpha1.PhaseScaling) || slices.Contains(seen, v1alpha1.PhaseUpgrading) {
		t.Errorf("phases %v through the scale to 3, want Scaling and no Upgrading", seen)
	}

	// The primary moves to the highest ordinal: -1 may not be promoted
	// until the Sentinel has read its priority.
	one := newClient(mustLoad(t, &serverAddrs, ns+"/"+name+"-1"), password)
	defer func() { _ = one.Close() }()
	if err := one.ConfigSet(context.Background(), "replica-priority", "0").Err(); err != nil {
		t.Fatal(err)
	}
	s := newClient(sentinel, password)
	defer func() { _ = s.Close() }()
	eventually(t, 30*time.Second, func() error {
		list, err := sentinelReplicas(context.Background(), sentinel, serverCredentials{password: password}, name)
		if err != nil {
			return err
		}
		for _, r := range list {
			if r["name"] == mustLoad(t, &serverAddrs, ns+"/"+name+"-1") && r["slave-priority"] != "0" {
				return fmt.Errorf("the Sentinel reads priority %s for -1", r["slave-priority"])
			}
		}
		return s.Do(context.Background(), "SENTINEL", "FAILOVER", name).Err()
	})
	eventually(t, 60*time.Second, func() error {
		return replicating(t, ns, name, func(rp *v1alpha1.RedisPersistence) bool { return rp.Status.Primary == name+"-2" })
	})
	if err := one.ConfigSet(context.Background(), "replica-priority", "100").Err(); err != nil {
		t.Fatal(err)
	}

	// Scale in under a steady writer: the StatefulSet shrinks only once the
	// Sentinel names another primary.
	writerCtx, stopWriter := context.WithCancel(context.Background())
	writer := &steadyWriter{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); writer.run(writerCtx, sentinel, password, name) }()
	defer func() { stopWriter(); wg.Wait() }()
	time.Sleep(time.Second)
	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Replicas = 2 })
	var primaryWhenShrunk []string
	eventually(t, 60*time.Second, func() error {
		sts := &appsv1.StatefulSet{}
		if err := get(t, sts, ns, name); err != nil {
			return err
		}
		if *sts.Spec.Replicas != 2 {
			return fmt.Errorf("the StatefulSet runs %d servers", *sts.Spec.Replicas)
		}
		var err error
		primaryWhenShrunk, err = s.Do(context.Background(), "SENTINEL", "get-master-addr-by-name", name).StringSlice()
		return err
	})
	if len(primaryWhenShrunk) != 2 || net.JoinHostPort(primaryWhenShrunk[0], primaryWhenShrunk[1]) == third.Addr {
		t.Errorf("the StatefulSet shrank while the Sentinel named %v, the removed server, primary", primaryWhenShrunk)
	}
	// The kubelet's part: the removed pod's server stops, the pod goes.
	eventually(t, 30*time.Second, func() error {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, name+"-2"); err != nil {
			return err
		}
		if pod.DeletionTimestamp.IsZero() {
			return fmt.Errorf("pod %s is not being deleted", pod.Name)
		}
		return nil
	})
	third.Stop(t)
	if err := k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-2"}}, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	stopWriter()
	wg.Wait()

	rp := waitCondition(t, ns, name, v1alpha1.ConditionReplicating, metav1.ConditionTrue, ReasonReplicating)
	lost := lostAcknowledged(t, mustLoad(t, &serverAddrs, ns+"/"+rp.Status.Primary), password, writer.acknowledged)
	t.Logf("through the scale-in: %d writes acknowledged, %d failed, longest gap between two acknowledged %s; primary %s -> %s",
		len(writer.acknowledged), writer.failed, writer.longestGap.Round(time.Millisecond), name+"-2", rp.Status.Primary)
	if lost != 0 {
		t.Errorf("%d of %d acknowledged writes are not on the new primary %s", lost, len(writer.acknowledged), rp.Status.Primary)
	}
	if len(writer.acknowledged) == 0 {
		t.Error("the writer had no write acknowledged")
	}
	if !hasEvent(t, ns, "SwitchedOver", name+"-2") {
		t.Error("no SwitchedOver event names the old primary")
	}
	unchanged("after the scale to 2")
	if seen, _ := phases.since(n); !slices.Contains(seen, v1alpha1.PhaseSwitchingOver) || !slices.Contains(seen, v1alpha1.PhaseScaling) {
		t.Errorf("phases %v through the scale to 2, want SwitchingOver and Scaling", seen)
	}

	// The Sentinel forgets the removed replica instead of reporting it down.
	eventually(t, 90*time.Second, func() error {
		if n, down, err := sentinelReplicaCount(t, sentinel, password, name); err != nil || n != 1 || down != 0 {
			return fmt.Errorf("the Sentinel lists %d replicas, %d down (%w)", n, down, err)
		}
		return nil
	})
	if !hasEvent(t, ns, "SentinelReset", name+"-sentinel-0") {
		t.Error("no SentinelReset event names the Sentinel")
	}
}

// replicating is nil once the instance reports Replicating and its status
// satisfies want.
func replicating(t *testing.T, ns, name string, want func(*v1alpha1.RedisPersistence) bool) error {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	if err := get(t, rp, ns, name); err != nil {
		return err
	}
	c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionReplicating)
	if c == nil || c.Status != metav1.ConditionTrue || !want(rp) {
		return fmt.Errorf("replication: %+v, primary %q, servers %+v", c, rp.Status.Primary, rp.Status.Replicas)
	}
	return nil
}

func mustLoad(t *testing.T, m *sync.Map, key string) string {
	t.Helper()
	v, ok := m.Load(key)
	if !ok {
		t.Fatalf("no address for %s", key)
	}
	return v.(string)
}

// hasEvent says whether an event of reason in ns mentions what.
func hasEvent(t *testing.T, ns, reason, what string) bool {
	t.Helper()
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == reason && strings.Contains(e.Message, what) {
			return true
		}
	}
	return false
}

// lostAcknowledged counts the acknowledged keys the server at addr does not
// hold.
func lostAcknowledged(t *testing.T, addr, password string, acknowledged []string) int {
	t.Helper()
	c := newClient(addr, password)
	defer func() { _ = c.Close() }()
	lost := 0
	for _, key := range acknowledged {
		if n, err := c.Exists(context.Background(), key).Result(); err != nil {
			t.Fatal(err)
		} else if n == 0 {
			lost++
		}
	}
	return lost
}

// createAckedReplicated creates a uring durable instance of servers servers
// (ackReplicas 1) and two Sentinels, with volumes for ordinals 1 and 2, and
// waits until it is Scheduled.
func createAckedReplicated(t *testing.T, ns, name string, servers int32) {
	t.Helper()
	createVolumeFor(t, ns, "data-"+name+"-1")
	createVolumeFor(t, ns, "data-"+name+"-2")
	createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{
		Mode:     v1alpha1.ModeUring,
		Uring:    &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, AckReplicas: 1},
		Replicas: servers, Sentinel: &v1alpha1.SentinelSpec{Count: 2, Quorum: 1},
		// Every test node may run the servers: three, kept apart (Required).
		Placement: v1alpha1.PlacementSpec{MinKernelVersion: "5.10"},
	})
	waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
}
