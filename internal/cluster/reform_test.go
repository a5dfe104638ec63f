package cluster

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// nodesAs is CLUSTER NODES as the node self answers it, knowing peers at
// the addresses given (ip:port@bus), for ParseNodes.
func nodesAs(t *testing.T, self string, peers map[string]string) []Node {
	t.Helper()
	var lines []string
	for _, id := range []string{"a", "b", "c", "d"} {
		addr, ok := peers[id]
		if !ok {
			continue
		}
		flags := "master"
		if id == self {
			flags = "myself,master"
		} else if !strings.HasPrefix(addr, "10.1.") {
			flags = "master,fail?"
		}
		lines = append(lines, fmt.Sprintf("%s %s,%s.cache %s - 0 0 1 connected", id, addr, id, flags))
	}
	nodes, err := ParseNodes(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// Which node meets which, at which address, once addresses changed.
func TestPlanIntroductions(t *testing.T) {
	// The addresses the nodes had (10.0.x) and have now (10.1.x).
	old := map[string]string{"a": "10.0.0.1:6379@16379", "b": "10.0.0.2:6379@16379", "c": "10.0.0.3:6379@16379"}
	moved := map[string]string{"a": "10.1.0.1:6379@16379", "b": "10.1.0.2:6379@16379", "c": "10.1.0.3:6379@16379"}
	// A restarted node's own line keeps its old IP until a MEET reaches it.
	member := func(self, addr string, peers map[string]string) Member {
		view := map[string]string{}
		for id, a := range peers {
			view[id] = a
		}
		view[self] = old[self]
		return Member{Addr: addr, Nodes: nodesAs(t, self, view)}
	}
	for _, tc := range []struct {
		desc    string
		members []Member
		want    []Introduction
	}{{
		desc: "nothing moved",
		members: []Member{
			{Addr: "10.0.0.1:6379", Nodes: nodesAs(t, "a", old)},
			{Addr: "10.0.0.2:6379", Nodes: nodesAs(t, "b", old)},
		},
	}, {
		desc: "every node moved: each meets every other at its new address",
		members: []Member{
			member("a", "10.1.0.1:6379", old),
			member("b", "10.1.0.2:6379", old),
			member("c", "10.1.0.3:6379", old),
		},
		want: []Introduction{
			{On: "10.1.0.1:6379", ID: "b", Addr: "10.1.0.2:6379", Bus: 16379},
			{On: "10.1.0.1:6379", ID: "c", Addr: "10.1.0.3:6379", Bus: 16379},
			{On: "10.1.0.2:6379", ID: "a", Addr: "10.1.0.1:6379", Bus: 16379},
			{On: "10.1.0.2:6379", ID: "c", Addr: "10.1.0.3:6379", Bus: 16379},
			{On: "10.1.0.3:6379", ID: "a", Addr: "10.1.0.1:6379", Bus: 16379},
			{On: "10.1.0.3:6379", ID: "b", Addr: "10.1.0.2:6379", Bus: 16379},
		},
	}, {
		desc: "a and b already met again; c, still at its old address in their views, is met, and meets them",
		members: []Member{
			member("a", "10.1.0.1:6379", map[string]string{"b": moved["b"], "c": old["c"]}),
			member("b", "10.1.0.2:6379", map[string]string{"a": moved["a"], "c": old["c"]}),
			member("c", "10.1.0.3:6379", old),
		},
		want: []Introduction{
			{On: "10.1.0.1:6379", ID: "c", Addr: "10.1.0.3:6379", Bus: 16379},
			{On: "10.1.0.2:6379", ID: "c", Addr: "10.1.0.3:6379", Bus: 16379},
			{On: "10.1.0.3:6379", ID: "a", Addr: "10.1.0.1:6379", Bus: 16379},
			{On: "10.1.0.3:6379", ID: "b", Addr: "10.1.0.2:6379", Bus: 16379},
		},
	}, {
		desc: "the same IP, another bus port",
		members: []Member{
			{Addr: "10.0.0.1:6379", Nodes: nodesAs(t, "a", map[string]string{"a": old["a"], "b": "10.0.0.2:6379@16380"})},
			{Addr: "10.0.0.2:6379", Nodes: nodesAs(t, "b", old)},
		},
		want: []Introduction{{On: "10.0.0.1:6379", ID: "b", Addr: "10.0.0.2:6379", Bus: 16379}},
	}, {
		desc: "IPv6: CLUSTER NODES writes no brackets",
		members: []Member{
			{Addr: "[fd00::1]:6379", Nodes: nodesAs(t, "a", map[string]string{"a": "fd00::1:6379@16379", "b": "fd00::2:6379@16379"})},
			{Addr: "[fd00::3]:6379", Nodes: nodesAs(t, "b", map[string]string{"a": "fd00::1:6379@16379", "b": "fd00::2:6379@16379"})},
		},
		want: []Introduction{{On: "[fd00::1]:6379", ID: "b", Addr: "[fd00::3]:6379", Bus: 16379}},
	}, {
		desc: "a node that does not know d is not introduced to it: d is new, met by Meet",
		members: []Member{
			{Addr: "10.0.0.1:6379", Nodes: nodesAs(t, "a", old)},
			{Addr: "10.1.0.4:6379", Nodes: nodesAs(t, "d", map[string]string{"d": moved["a"][:len("10.1.0.")] + "4:6379@16379"})},
		},
	}, {
		desc: "a member that has not answered CLUSTER NODES is skipped",
		members: []Member{
			{Addr: "10.0.0.1:6379", Nodes: nodesAs(t, "a", old)},
			{Addr: "10.1.0.2:6379"},
		},
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := PlanIntroductions(tc.members); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PlanIntroductions:\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

// Every server of a formed cluster stops and starts again on its data,
// each on new ports: the nodes know each other only at the old ones, and
// the cluster is down until the planned introductions bring them together
// again, every node as itself, with its slots and keys.
func TestIntroductionsReformTheCluster(t *testing.T) {
	ctx := context.Background()
	var servers []*testenv.Server
	var shards [][]string
	for range 3 {
		s := testenv.RunClusterNode(t, t.TempDir(), durable)
		servers, shards = append(servers, s), append(shards, []string{s.Addr})
	}
	admin := newAdmin(t)
	if err := admin.Create(ctx, shards); err != nil {
		t.Fatal(err)
	}
	const keys = 100
	writer := redis.NewClusterClient(&redis.ClusterOptions{Addrs: shards[0]})
	for k := range keys {
		if err := writer.Set(ctx, fmt.Sprintf("key:%d", k), k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = writer.Close()

	addrs := restartOnNewPorts(t, admin, servers, durable)
	shards = nil
	for _, a := range addrs {
		shards = append(shards, []string{a})
	}
	checkShares(t, admin, shards)
	reader := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[1:]})
	defer func() { _ = reader.Close() }()
	for k := range keys {
		if got, err := reader.Get(ctx, fmt.Sprintf("key:%d", k)).Int(); err != nil || got != k {
			t.Errorf("key:%d is %d (%v), want %d", k, got, err, k)
		}
	}
}

// restartOnNewPorts stops every server of servers, starts each again on its
// data with config on new ports, checks that each came back as the node it
// was, plans and sends the introductions (one per ordered pair), waits for
// every node to see the cluster ok and for a second plan to find nothing
// left, and returns the new addresses in the order of servers, which it
// updates.
func restartOnNewPorts(t *testing.T, admin *Admin, servers []*testenv.Server, config string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for _, s := range servers {
		id, err := admin.myID(ctx, s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		s.Stop(t)
	}
	var addrs []string
	for i, s := range servers {
		servers[i] = testenv.RunClusterNode(t, s.Dir, config)
		addrs = append(addrs, servers[i].Addr)
		if id, err := admin.myID(ctx, servers[i].Addr); err != nil || id != ids[i] {
			t.Fatalf("%s restarted as node %s (%v), want %s", servers[i].Addr, id, err, ids[i])
		}
	}
	// Each node knows the others at addresses they left: n-1 introductions
	// each, fewer when a node was given a port another held before the
	// restart and the nodes that still dialled that port learned its new
	// identity from it (a flake of CI's, 10 of 12).
	plan := PlanIntroductions(members(t, admin, addrs))
	if n := len(servers); len(plan) == 0 || len(plan) > n*(n-1) {
		t.Fatalf("planned %d introductions, want 1 to %d: %+v", len(plan), n*(n-1), plan)
	}
	start := time.Now()
	if err := admin.Introduce(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if err := admin.WaitHealthy(ctx, addrs); err != nil {
		t.Fatal(err)
	}
	t.Logf("the cluster was ok %s after the introductions", time.Since(start).Round(10*time.Millisecond))
	if plan := PlanIntroductions(members(t, admin, addrs)); len(plan) > 0 {
		t.Errorf("introductions planned on a cluster that re-formed: %+v", plan)
	}
	return addrs
}

func members(t *testing.T, admin *Admin, addrs []string) []Member {
	t.Helper()
	var ms []Member
	for _, addr := range addrs {
		nodes, err := admin.Nodes(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, Member{Addr: addr, Nodes: nodes})
	}
	return ms
}
