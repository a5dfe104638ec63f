package controllers

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func TestDecideRoll(t *testing.T) {
	var (
		old      = rollingServer{ready: true, replicating: true}
		updated  = rollingServer{updated: true, ready: true, replicating: true}
		starting = rollingServer{updated: true}
		syncing  = rollingServer{updated: true, ready: true}
		down     = rollingServer{}
	)
	for _, tc := range []struct {
		desc           string
		servers, held  int32
		pods           map[int]rollingServer
		primary        int
		want           int32
		wantSwitchOver bool
		wantWhy        string
	}{
		{"rolled out", 3, 0, map[int]rollingServer{0: updated, 1: updated, 2: updated}, 0, 0, false, "every server"},
		{"a new template holds every server: the top replica goes first", 3, 3, map[int]rollingServer{0: old, 1: old, 2: old}, 0, 2, false, "replica 2"},
		{"the restarted replica has no pod yet", 3, 2, map[int]rollingServer{0: old, 1: old}, 0, 2, false, "server 2"},
		{"the restarted replica is not Ready yet", 3, 2, map[int]rollingServer{0: old, 1: old, 2: starting}, 0, 2, false, "server 2"},
		{"the restarted replica does not replicate yet", 3, 2, map[int]rollingServer{0: old, 1: old, 2: syncing}, 0, 2, false, "server 2"},
		{"the restarted replica serves: the next one goes", 3, 2, map[int]rollingServer{0: old, 1: old, 2: updated}, 0, 1, false, "replica 1"},
		{"only the primary is left: switch over first", 3, 1, map[int]rollingServer{0: old, 1: updated, 2: updated}, 0, 0, true, "primary"},
		{"after the switchover the old primary goes", 3, 1, map[int]rollingServer{0: old, 1: updated, 2: updated}, 2, 0, false, "replica 0"},
		{"the old primary restarts", 3, 0, map[int]rollingServer{0: starting, 1: updated, 2: updated}, 2, 0, false, "server 0"},
		{"the primary at the top switches over before anything rolls", 3, 3, map[int]rollingServer{0: old, 1: old, 2: old}, 2, 2, true, "primary"},
		{"the primary not known: a Ready server waits", 3, 3, map[int]rollingServer{0: old, 1: old, 2: old}, -1, 3, false, "not known"},
		{"the primary not known: a server that is not Ready rolls", 3, 3, map[int]rollingServer{0: old, 1: old, 2: down}, -1, 2, false, "not Ready"},
		{"a replica that is not Ready rolls at once", 2, 2, map[int]rollingServer{0: old, 1: down}, 0, 1, false, "not Ready"},
		{"a server added on the new template must serve first", 4, 4, map[int]rollingServer{0: old, 1: old, 2: old, 3: starting}, 0, 4, false, "server 3"},
		{"a partition above the servers counts as holding them all", 2, 5, map[int]rollingServer{0: old, 1: old}, 0, 1, false, "replica 1"},
	} {
		step := decideRoll(tc.servers, tc.held, tc.pods, tc.primary)
		if step.partition != tc.want || step.switchOver != tc.wantSwitchOver || !strings.Contains(step.why, tc.wantWhy) {
			t.Errorf("%s: partition %d, switch over %t (%q); want %d, %t (with %q)", tc.desc, step.partition, step.switchOver, step.why, tc.want, tc.wantSwitchOver, tc.wantWhy)
		}
	}
}

// A replicated uring durable instance of three servers (ackReplicas 1)
// against real servers and a real Sentinel, under a steady writer: a change
// of resources restarts the replicas first, one at a time, each back and
// replicating before the next; the Sentinel hands the primary role to a
// restarted replica; only then does the old primary's pod go. No write
// acknowledged through it is lost and the writer's longest pause is short.
// The test plays the kubelet: it stops the server of a pod being deleted,
// removes the pod, and runs a server for the pod the StatefulSet controller
// makes again, as a replica of the primary the Sentinel names, as the
// start script does.
func TestRolloutSwitchesOverBeforeThePrimaryRestarts(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = "roll"
	pods := []string{name + "-0", name + "-1", name + "-2"}
	createAckedReplicated(t, ns, name, 3)
	password := instancePassword(t, ns, name)
	config := renderedConfig(t, ns, name) + fmt.Sprintf("primaryauth %q\n", password)

	// The servers as the start scripts run them, each created once the one
	// before is Ready (OrderedReady).
	servers := map[string]*testenv.Server{}
	run := func(pod, primary string) {
		t.Helper()
		conf := config
		if primary != "" {
			host, port, _ := net.SplitHostPort(primary)
			conf += fmt.Sprintf("replicaof %s %s\n", host, port)
		}
		servers[pod] = testenv.RunServer(t, t.TempDir(), conf)
		serverAddrs.Store(ns+"/"+pod, servers[pod].Addr)
		markRunning(t, ns, pod)
	}
	run(pods[0], "")
	run(pods[1], servers[pods[0]].Addr)
	run(pods[2], servers[pods[0]].Addr)
	// The Sentinel as the start script configures it (down-after 10 s).
	sentinel := runSentinelsTimed(t, ns, name, servers[pods[0]].Addr, password, 10*time.Second, time.Minute)
	eventually(t, 60*time.Second, func() error {
		return replicating(t, ns, name, func(rp *v1alpha1.RedisPersistence) bool { return rp.Status.Primary == pods[0] })
	})
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	s := newClient(sentinel, password)
	defer func() { _ = s.Close() }()
	sentinelPrimary := func() string {
		addr, err := s.Do(context.Background(), "SENTINEL", "get-master-addr-by-name", name).StringSlice()
		if err != nil || len(addr) != 2 {
			return ""
		}
		return net.JoinHostPort(addr[0], addr[1])
	}
	// The Sentinel must know both replicas before a switchover can pick one.
	eventually(t, 30*time.Second, func() error {
		if n, down, err := sentinelReplicaCount(t, sentinel, password, name); err != nil || n != 2 || down != 0 {
			return fmt.Errorf("the Sentinel lists %d replicas, %d down (%w)", n, down, err)
		}
		return nil
	})

	writerCtx, stopWriter := context.WithCancel(context.Background())
	writer := &steadyWriter{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); writer.run(writerCtx, sentinel, password, name) }()
	defer func() { stopWriter(); wg.Wait() }()
	time.Sleep(time.Second)

	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}
	})

	// The kubelet's part, pod by pod in the order the pods go: what the
	// Sentinel names primary when each goes, and whether it was restarted.
	type replaced struct {
		pod, primaryThen string
	}
	var order []replaced
	playRollout(t, ns, pods, 4*time.Minute, func(podName string) {
		primaryThen, primaryAddr := "", sentinelPrimary()
		for other, srv := range servers {
			if srv.Addr == primaryAddr {
				primaryThen = other
			}
		}
		order = append(order, replaced{podName, primaryThen})
		servers[podName].Stop(t)
	}, func(podName string) bool {
		primary := sentinelPrimary()
		if primary == "" {
			return false
		}
		run(podName, primary)
		return true
	})
	t.Logf("pods replaced in order %+v", order)
	if len(order) != len(pods) || order[len(order)-1].pod != pods[0] {
		t.Errorf("the pods were replaced in order %+v: the primary %s's pod was not the last", order, pods[0])
	}
	for i, r := range order {
		if r.primaryThen == "" || r.primaryThen == r.pod {
			t.Errorf("pod %s went while the Sentinel named %q primary", r.pod, r.primaryThen)
		}
		if r.pod == pods[0] {
			// The new primary is one of the pods replaced before it.
			promotedRestarted := false
			for _, before := range order[:i] {
				promotedRestarted = promotedRestarted || before.pod == r.primaryThen
			}
			if !promotedRestarted {
				t.Errorf("the old primary's pod went while %s, which had not restarted, was primary", r.primaryThen)
			}
		}
	}
	eventually(t, 60*time.Second, func() error {
		return replicating(t, ns, name, func(rp *v1alpha1.RedisPersistence) bool { return len(rp.Status.Replicas) == 3 })
	})
	time.Sleep(2 * time.Second)
	stopWriter()
	wg.Wait()

	rp := waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	lost := lostAcknowledged(t, mustLoad(t, &serverAddrs, ns+"/"+rp.Status.Primary), password, writer.acknowledged)
	t.Logf("through the rollout: %d writes acknowledged, %d failed, longest gap between two acknowledged %s; primary %s -> %s",
		len(writer.acknowledged), writer.failed, writer.longestGap.Round(time.Millisecond), pods[0], rp.Status.Primary)

	if lost != 0 {
		t.Errorf("%d of %d acknowledged writes are not on the new primary %s", lost, len(writer.acknowledged), rp.Status.Primary)
	}
	if len(writer.acknowledged) == 0 {
		t.Error("the writer had no write acknowledged")
	}
	if writer.longestGap > 5*time.Second {
		t.Errorf("the writer waited %s between two acknowledged writes", writer.longestGap.Round(time.Millisecond))
	}
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Reason, "Switch") {
			t.Logf("event %s %s: %s", e.LastTimestamp.Format(time.TimeOnly), e.Reason, e.Message)
		}
	}
	if !hasEvent(t, ns, "SwitchedOver", pods[0]) {
		t.Error("no SwitchedOver event names the old primary")
	}
}

// A lone server scaled out rolls onto the replicated template at once: held
// back for a switchover it has no replica for, it would keep the new
// replicas and Sentinels from ever finding a primary (the e2e's scale of
// one server to three waited 6 min for replication that never came).
func TestLoneServerScaledOutIsNotHeld(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	existing := specs.StatefulSet(specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}), specstest.Options,
		specs.NewPodInputs(rp, specstest.Password(rp)))
	existing.Spec.Replicas = ptr.To[int32](1)
	partition, err := (&RedisPersistenceReconciler{}).partitionToRun(context.Background(), rp, existing, true, nil)
	if err != nil || partition != 0 {
		t.Errorf("a lone server scaled out: partition %d (%v), want 0: it rolls at once", partition, err)
	}
	existing.Spec.Replicas = ptr.To[int32](2)
	if partition, err := (&RedisPersistenceReconciler{}).partitionToRun(context.Background(), rp, existing, true, nil); err != nil || partition != 2 {
		t.Errorf("two servers on a new template: partition %d (%v), want 2: every server held", partition, err)
	}
}

// playRollout plays the kubelet through a rollout of pods: a pod the
// StatefulSet controller deletes is stopped (stop) and removed at once, and
// its replacement started (start, which says false to be asked again
// later). It returns once every pod was replaced, and fails the test after
// timeout.
func playRollout(t *testing.T, ns string, pods []string, timeout time.Duration, stop func(pod string), start func(pod string) bool) {
	t.Helper()
	uids := podUIDs(t, ns, pods...)
	restarted := map[string]bool{}
	deadline := time.Now().Add(timeout)
	for len(restarted) < len(pods) {
		if time.Now().After(deadline) {
			t.Fatalf("the rollout did not end within %s: replaced %v", timeout, restarted)
		}
		for _, podName := range pods {
			pod := &corev1.Pod{}
			if err := get(t, pod, ns, podName); err != nil {
				continue // gone: the StatefulSet controller makes it again
			}
			switch {
			case pod.UID == uids[podName] && !pod.DeletionTimestamp.IsZero():
				stop(podName)
				if err := k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
			case pod.UID != uids[podName] && !restarted[podName]:
				restarted[podName] = start(podName)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
