package controllers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// decideSwitchover refuses, before anything is touched, what cannot be met
// safely, answers a switchover to the primary as done, and otherwise names
// the server to promote ("" for any).
func TestDecideSwitchover(t *testing.T) {
	replicated := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	single := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	sharded := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Cluster: &v1alpha1.ClusterSpec{Shards: 3}})
	name := replicated.Name
	view := replicationView{primary: name + "-0", servers: []v1alpha1.ReplicaStatus{
		{Pod: name + "-0", Role: v1alpha1.RolePrimary, LinkUp: true},
		{Pod: name + "-1", Role: v1alpha1.RoleReplica, LinkUp: true},
		{Pod: name + "-2", Role: v1alpha1.RoleReplica},
	}}
	noneLinked := replicationView{primary: name + "-0", servers: []v1alpha1.ReplicaStatus{
		{Pod: name + "-0", Role: v1alpha1.RolePrimary, LinkUp: true}, {Pod: name + "-1", Role: v1alpha1.RoleReplica},
	}}
	noPrimary := replicationView{condition: condition{message: "no Sentinel answered"}}
	for _, tc := range []struct {
		desc       string
		rp         *v1alpha1.RedisPersistence
		to         string
		view       replicationView
		wantTarget string
		wantResult v1alpha1.SwitchoverResult // empty: switch over
		wantReason string
		wantIn     string
	}{
		{"a named replica that replicates", replicated, name + "-1", view, name + "-1", "", "", ""},
		{"any, one replica replicates", replicated, specs.SwitchoverToAny, view, "", "", "", ""},
		{"a lone server", single, specs.SwitchoverToAny, replicationView{}, "", v1alpha1.SwitchoverRefused, SwitchoverReasonNotReplicated, "spec.replicas 1"},
		{"a sharded instance", sharded, name + "-s0-1", replicationView{}, "", v1alpha1.SwitchoverRefused, SwitchoverReasonNotReplicated, "sharded"},
		{"no primary known", replicated, name + "-1", noPrimary, "", v1alpha1.SwitchoverRefused, SwitchoverReasonNoPrimary, "no Sentinel answered"},
		{"the primary", replicated, name + "-0", view, "", v1alpha1.SwitchoverSucceeded, SwitchoverReasonAlreadyPrimary, "primary already"},
		{"a pod of no server", replicated, name + "-7", view, "", v1alpha1.SwitchoverRefused, SwitchoverReasonNotAReplica, name + "-1, " + name + "-2"},
		{"another instance's pod", replicated, "other-1", view, "", v1alpha1.SwitchoverRefused, SwitchoverReasonNotAReplica, "not a replica of " + name},
		{"a replica whose link is down", replicated, name + "-2", view, "", v1alpha1.SwitchoverRefused, SwitchoverReasonReplicaNotReplicating, "link to the primary " + name + "-0 is down"},
		{"any, no replica replicates", replicated, specs.SwitchoverToAny, noneLinked, "", v1alpha1.SwitchoverRefused, SwitchoverReasonNoReplicaReplicating, "no replica replicates"},
	} {
		target, outcome := decideSwitchover(tc.rp, tc.to, tc.view)
		switch {
		case tc.wantResult == "" && (outcome != nil || target != tc.wantTarget):
			t.Errorf("%s: target %q, outcome %+v; want a switchover to %q", tc.desc, target, outcome, tc.wantTarget)
		case tc.wantResult != "" && (outcome == nil || outcome.result != tc.wantResult || outcome.reason != tc.wantReason || !strings.Contains(outcome.message, tc.wantIn)):
			t.Errorf("%s: outcome %+v; want %s %s with %q", tc.desc, outcome, tc.wantResult, tc.wantReason, tc.wantIn)
		}
	}
}

// A switchover a person asks for, against three real servers and a real
// Sentinel, under a steady writer: to a named replica, then to the primary
// (nothing to do), to a pod of no server (refused), then to any replica.
// The primary moves where it was asked to, the Service's role labels and
// status.primary follow, every write acknowledged through both switchovers
// is on the last primary, the replicas passed over get their priority back,
// and each request is answered once in status.switchover with its event.
func TestSwitchoverOnRequest(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = "asked"
	pods := []string{name + "-0", name + "-1", name + "-2"}
	createAckedReplicated(t, ns, name, 3)
	password := instancePassword(t, ns, name)
	config := renderedConfig(t, ns, name) + fmt.Sprintf("primaryauth %q\n", password)
	primary := testenv.RunServer(t, t.TempDir(), config)
	serverAddrs.Store(ns+"/"+pods[0], primary.Addr)
	markRunning(t, ns, pods[0])
	host, port, _ := net.SplitHostPort(primary.Addr)
	for _, pod := range pods[1:] {
		replica := testenv.RunServer(t, t.TempDir(), config+fmt.Sprintf("replicaof %s %s\n", host, port))
		serverAddrs.Store(ns+"/"+pod, replica.Addr)
		markRunning(t, ns, pod)
	}
	// The Sentinel as the start script configures it (down-after 10 s).
	sentinel := runSentinelsTimed(t, ns, name, primary.Addr, password, 10*time.Second, time.Minute)
	eventually(t, 60*time.Second, func() error {
		return replicating(t, ns, name, func(rp *v1alpha1.RedisPersistence) bool { return rp.Status.Primary == pods[0] })
	})
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

	ask := func(to, at string) *v1alpha1.SwitchoverStatus {
		t.Helper()
		updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) {
			metav1.SetMetaDataAnnotation(&rp.ObjectMeta, specs.AnnotationSwitchoverTo, to)
			metav1.SetMetaDataAnnotation(&rp.ObjectMeta, specs.AnnotationSwitchoverRequestedAt, at)
		})
		var answer *v1alpha1.SwitchoverStatus
		eventually(t, 60*time.Second, func() error {
			rp := &v1alpha1.RedisPersistence{}
			if err := get(t, rp, ns, name); err != nil {
				return err
			}
			if answer = rp.Status.Switchover; !(specs.SwitchoverRequest{To: to, RequestedAt: at}).AnsweredBy(answer) {
				return fmt.Errorf("status.switchover is %+v", answer)
			}
			return nil
		})
		t.Logf("switchover to %s at %s: %s %s: %s", to, at, answer.Result, answer.Reason, answer.Message)
		return answer
	}
	s := newClient(sentinel, password)
	defer func() { _ = s.Close() }()
	sentinelNames := func(pod string) error {
		addr, err := s.Do(context.Background(), "SENTINEL", "get-master-addr-by-name", name).StringSlice()
		if err != nil {
			return err
		}
		if len(addr) != 2 || net.JoinHostPort(addr[0], addr[1]) != mustLoad(t, &serverAddrs, ns+"/"+pod) {
			return fmt.Errorf("the Sentinel names %v, want %s", addr, pod)
		}
		return nil
	}

	// A client of the old primary that sits idle through the switchover,
	// and the role labels the Service selects by, as a watch sees them.
	// (A bare connection: go-redis's pool would quietly replace a closed one.)
	idle, err := net.Dial("tcp", primary.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = idle.Close() }()
	idleReply := bufio.NewReader(idle)
	if _, err := fmt.Fprintf(idle, "AUTH %q\r\n", password); err != nil {
		t.Fatal(err)
	}
	if line, err := idleReply.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("AUTH on the primary: %q, %v", line, err)
	}
	selected := watchPrimaryLabels(t, ns, pods)

	// To the replica of the highest ordinal: not the one the Sentinel would
	// choose by itself (equal priorities and offsets: the lower run ID).
	answer := ask(pods[2], "2026-11-29T10:00:00Z")
	if answer.Result != v1alpha1.SwitchoverSucceeded || answer.Reason != SwitchoverReasonSwitched || answer.From != pods[0] || answer.Primary != pods[2] {
		t.Fatalf("the switchover to %s: %+v", pods[2], answer)
	}
	if err := sentinelNames(pods[2]); err != nil {
		t.Error(err)
	}
	eventually(t, 30*time.Second, func() error {
		if roles := roleLabels(t, ns, pods...); roles[pods[2]] != "primary" || roles[pods[0]] != "replica" || roles[pods[1]] != "replica" {
			return fmt.Errorf("role labels %v", roles)
		}
		return replicating(t, ns, name, func(rp *v1alpha1.RedisPersistence) bool { return rp.Status.Primary == pods[2] })
	})
	// The replica passed over has its priority back.
	passed := newClient(mustLoad(t, &serverAddrs, ns+"/"+pods[1]), password)
	defer func() { _ = passed.Close() }()
	if p, err := passed.ConfigGet(context.Background(), "replica-priority").Result(); err != nil || p["replica-priority"] != "100" {
		t.Errorf("%s's replica-priority after the switchover: %v (%v), want 100", pods[1], p, err)
	}
	if !hasEvent(t, ns, "SwitchedOver", "promoted "+pods[2]) {
		t.Error("no SwitchedOver event names the server promoted")
	}
	// The Service went from the old primary to the new one without a
	// moment in which it selected no server.
	if got := selected.history(); len(got) < 2 || slices.Contains(got, "") || got[0] != pods[0] || got[len(got)-1] != pods[2] {
		t.Errorf("the pods labelled primary, as each label changed: %q; want %s first, %s last, never none", got, pods[0], pods[2])
	}
	// The old primary let its clients go: they reconnect to the new one.
	_ = idle.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := idleReply.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("a client of the old primary %s: %v; want its connection closed by the switchover", pods[0], err)
	}
	if hasEvent(t, ns, "FailedOver", pods[2]) {
		t.Error("the switchover asked for was reported as a failover")
	}

	// Asked again in the same words: nothing happens, the answer stays.
	if again := ask(pods[2], "2026-11-29T10:00:00Z"); !again.FinishedAt.Equal(&answer.FinishedAt) || again.Reason != SwitchoverReasonSwitched {
		t.Errorf("the same request applied again was answered again: %+v", again)
	}
	if a := ask(pods[2], "2026-11-29T10:01:00Z"); a.Result != v1alpha1.SwitchoverSucceeded || a.Reason != SwitchoverReasonAlreadyPrimary {
		t.Errorf("a switchover to the primary: %+v", a)
	}
	if a := ask(name+"-7", "2026-11-29T10:02:00Z"); a.Result != v1alpha1.SwitchoverRefused || a.Reason != SwitchoverReasonNotAReplica || a.Primary != "" {
		t.Errorf("a switchover to a pod of no server: %+v", a)
	}
	if !hasEvent(t, ns, "RefusedSwitchover", name+"-7 is not a replica of "+name) {
		t.Error("no RefusedSwitchover event says why")
	}

	// To any replica: the Sentinel chooses, and the primary moves.
	answer = ask(specs.SwitchoverToAny, "2026-11-29T10:03:00Z")
	if answer.Result != v1alpha1.SwitchoverSucceeded || answer.From != pods[2] || answer.Primary == "" || answer.Primary == pods[2] {
		t.Fatalf("the switchover to any replica: %+v", answer)
	}
	if err := sentinelNames(answer.Primary); err != nil {
		t.Error(err)
	}
	eventually(t, 30*time.Second, func() error {
		return replicating(t, ns, name, func(rp *v1alpha1.RedisPersistence) bool { return rp.Status.Primary == answer.Primary })
	})

	time.Sleep(time.Second)
	stopWriter()
	wg.Wait()
	lost := lostAcknowledged(t, mustLoad(t, &serverAddrs, ns+"/"+answer.Primary), password, writer.acknowledged)
	t.Logf("through two switchovers: %d writes acknowledged, %d failed, longest gap between two acknowledged %s",
		len(writer.acknowledged), writer.failed, writer.longestGap.Round(time.Millisecond))
	if lost != 0 {
		t.Errorf("%d of %d acknowledged writes are not on the last primary %s", lost, len(writer.acknowledged), answer.Primary)
	}
	if len(writer.acknowledged) == 0 {
		t.Error("the writer had no write acknowledged")
	}
}

// A lone server has no replica to hand the primary role to: the request
// is refused at once, with a Warning, and no server is asked anything.
func TestSwitchoverOfALoneServerRefused(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = "lone"
	createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) {
		metav1.SetMetaDataAnnotation(&rp.ObjectMeta, specs.AnnotationSwitchoverTo, specs.SwitchoverToAny)
	})
	eventually(t, 30*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		if a := rp.Status.Switchover; a == nil || a.To != specs.SwitchoverToAny || a.Result != v1alpha1.SwitchoverRefused || a.Reason != SwitchoverReasonNotReplicated {
			return fmt.Errorf("status.switchover is %+v", a)
		}
		return nil
	})
	if !hasEvent(t, ns, "RefusedSwitchover", "no replica to hand the primary role to") {
		t.Error("no RefusedSwitchover event says why")
	}
}

// What a Sentinel must have read before a switchover pauses the writes: a
// named target listed and every other replica at priority 0; with no
// target, priority 0 on the replicas passed over, whatever the others read.
func TestSentinelPassesOver(t *testing.T) {
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	var pods []corev1.Pod
	for i := range 3 {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%d", i)}, Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.0.0.%d", i)}})
	}
	addr := func(p *corev1.Pod) string { return p.Status.PodIP + ":6379" }
	replica := func(i int, priority, flags string) map[string]string {
		return map[string]string{"name": fmt.Sprintf("10.0.0.%d:6379", i), "slave-priority": priority, "flags": "slave" + flags}
	}
	notUpdated := func(pod string) bool { return pod == "c-2" }
	for _, c := range []struct {
		desc     string
		replicas []map[string]string
		target   string
		want     string
	}{
		{"target listed, the other at 0", []map[string]string{replica(1, "100", ""), replica(2, "0", "")}, "c-1", ""},
		{"target listed, the other not read yet", []map[string]string{replica(1, "100", ""), replica(2, "100", "")}, "c-1", "reads replica-priority 100 on c-2"},
		{"target down", []map[string]string{replica(1, "100", ",s_down"), replica(2, "0", "")}, "c-1", "sees c-1 down"},
		{"target not listed", []map[string]string{replica(2, "0", "")}, "c-1", "does not list c-1 among the replicas"},
		{"no target: the one passed over at 0, the updated one promotable", []map[string]string{replica(1, "100", ""), replica(2, "0", "")}, "", ""},
		{"no target: the one passed over not read yet", []map[string]string{replica(1, "100", ""), replica(2, "100", "")}, "", "reads replica-priority 100 on c-2"},
		{"no target: the one passed over is down", []map[string]string{replica(1, "100", ""), replica(2, "100", ",s_down")}, "", ""},
	} {
		if got := sentinelPassesOver(rp, pods, c.replicas, c.target, notUpdated, addr); got != c.want {
			t.Errorf("%s: %q, want %q", c.desc, got, c.want)
		}
	}
}

// primaryLabels records which of pods carry the role label primary after
// each change a watch of the namespace's pods delivers, in the order the
// API server made them.
type primaryLabels struct {
	mu    sync.Mutex
	seen  []string
	roles map[string]string
}

// watchPrimaryLabels starts recording the pods labelled primary among pods,
// joined with "+" ("" for none), each time the set changes.
func watchPrimaryLabels(t *testing.T, ns string, pods []string) *primaryLabels {
	t.Helper()
	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(context.Background(), &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	rec := &primaryLabels{roles: map[string]string{}}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || !slices.Contains(pods, pod.Name) {
				continue
			}
			rec.mu.Lock()
			rec.roles[pod.Name] = pod.Labels[specs.LabelRole]
			var primaries []string
			for _, name := range pods {
				if rec.roles[name] == string(v1alpha1.RolePrimary) {
					primaries = append(primaries, name)
				}
			}
			// The initial events list the pods one by one: record once all are known.
			if now := strings.Join(primaries, "+"); len(rec.roles) == len(pods) && (len(rec.seen) == 0 || rec.seen[len(rec.seen)-1] != now) {
				rec.seen = append(rec.seen, now)
			}
			rec.mu.Unlock()
		}
	}()
	return rec
}

func (p *primaryLabels) history() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}
