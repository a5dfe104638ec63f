package controllers

// What a reconcile reads of a sharded instance: every server and the cluster as it sees it.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// clusterServer is one pod of a sharded instance and, once it answers, its
// node as it sees itself and the cluster as it sees it.
type clusterServer struct {
	pod   *corev1.Pod
	shard int
	addr  string
	// self is nil until the server answers.
	self  *cluster.Node
	nodes []cluster.Node
	state string // cluster_state
	// replication is INFO replication.
	replication string
	// info is INFO server and persistence: the engine writing its AOF.
	info *serverInfo
}

func (s *clusterServer) answered() bool { return s.self != nil }

// clusterView is what a reconcile read of a sharded instance.
type clusterView struct {
	statefulSets map[int]*appsv1.StatefulSet
	// shards holds every shard that has a StatefulSet or is asked for, its
	// servers by ordinal.
	shards map[int][]*clusterServer
	// unreachable counts Ready pods that did not answer.
	unreachable []string
}

func (v *clusterView) servers() []*clusterServer {
	var all []*clusterServer
	for _, i := range v.shardIndexes() {
		all = append(all, v.shards[i]...)
	}
	return all
}

func (v *clusterView) shardIndexes() []int {
	var idx []int
	for i := range v.shards {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}

// formed is true once any server serves a slot.
func (v *clusterView) formed() bool {
	for _, s := range v.servers() {
		for _, n := range s.nodes {
			if len(n.Slots) > 0 {
				return true
			}
		}
	}
	return false
}

// unassigned counts the slots that no node serves in any server's view,
// failing nodes' included: a formation cut short (the reconcile's deadline
// between two shards' shares, an operator restart) leaves some, which only
// forming again assigns. A lost primary's slots stay its own until a
// replica takes them over, so they never count here.
func (v *clusterView) unassigned() int {
	assigned := map[int]bool{}
	for _, s := range v.servers() {
		for _, n := range s.nodes {
			for _, slot := range n.Slots {
				assigned[slot] = true
			}
		}
	}
	return cluster.Slots - len(assigned)
}

// seed is an answering server of the formed cluster: one that sees slots
// served, preferring a primary that serves some.
func (v *clusterView) seed() *clusterServer {
	var fallback *clusterServer
	for _, s := range v.servers() {
		if !s.answered() {
			continue
		}
		if len(s.self.Slots) > 0 {
			return s
		}
		if fallback == nil && slices.ContainsFunc(s.nodes, func(n cluster.Node) bool { return len(n.Slots) > 0 }) {
			fallback = s
		}
	}
	return fallback
}

// primaryOf is the server of shard i its cluster counts as the primary
// serving slots, or nil.
func (v *clusterView) primaryOf(i int) *clusterServer {
	for _, s := range v.shards[i] {
		if s.answered() && s.self.Primary && len(s.self.Slots) > 0 {
			return s
		}
	}
	return nil
}

// leaderOf is shard i's primary serving slots or, for a shard serving none
// (new, or being removed and emptied), its first server that is a primary:
// the one its other servers replicate. nil when none answers as a primary.
func (v *clusterView) leaderOf(i int) *clusterServer {
	if p := v.primaryOf(i); p != nil {
		return p
	}
	for _, s := range v.shards[i] {
		if s.answered() && s.self.Primary {
			return s
		}
	}
	return nil
}

// plan is how slots move so that the shards asked for serve even shares
// and no other shard any: the primaries of shards 0..want-1 (addresses, in
// shard order) and the moves. waiting says why there is no plan yet: a
// shard asked for has no primary answering, or a new shard (serving no
// slot) not all its servers replicating with their link up; it gets slots
// only then, since with uring.ackReplicas a primary whose replicas are
// still syncing refuses writes to the slots it took (NOREPLICAS).
func (v *clusterView) plan(want, perShard int) (targets []string, moves []cluster.Move, waiting string) {
	var ids []string
	for i := range want {
		primary := v.leaderOf(i)
		if primary == nil {
			return nil, nil, fmt.Sprintf("waiting for shard %d's servers to answer", i)
		}
		linked := 1
		for _, s := range v.shards[i] {
			if s != primary && s.answered() && s.self.PrimaryID == primary.self.ID && infoField(s.replication, "master_link_status") == "up" {
				linked++
			}
		}
		if len(primary.self.Slots) == 0 && linked < perShard {
			return nil, nil, fmt.Sprintf("waiting for shard %d's servers: %d of %d run and replicate its primary", i, linked, perShard)
		}
		targets, ids = append(targets, primary.addr), append(ids, primary.self.ID)
	}
	owned := map[string][]int{}
	if seed := v.seed(); seed != nil {
		for _, n := range seed.nodes {
			if n.Primary && len(n.Slots) > 0 {
				owned[n.ID] = n.Slots
			}
		}
	}
	return targets, cluster.PlanMoves(owned, ids), ""
}

// observeCluster reads CLUSTER NODES and CLUSTER INFO from every Ready pod
// of the shards.
func (r *RedisPersistenceReconciler) observeCluster(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, statefulSets map[int]*appsv1.StatefulSet) (*clusterView, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SelectorLabels(rp))); err != nil {
		return nil, fmt.Errorf("listing the server pods: %w", err)
	}
	// A shard is every one asked for and every one still running.
	view := &clusterView{statefulSets: statefulSets, shards: map[int][]*clusterServer{}}
	for i := range statefulSets {
		view.shards[i] = nil
	}
	for i := range specs.Shards(rp) {
		view.shards[i] = nil
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		shard, err := strconv.Atoi(pod.Labels[specs.LabelShard])
		if err != nil {
			continue
		}
		if _, ok := view.shards[shard]; !ok {
			continue // a StatefulSet already deleted
		}
		s := &clusterServer{pod: pod, shard: shard}
		view.shards[shard] = append(view.shards[shard], s)
		if !podReady(pod) || pod.Status.PodIP == "" {
			continue
		}
		s.addr = r.ServerAddress(pod)
		c := dialServer(s.addr, creds)
		nodes, self, replication, err := readClusterNode(ctx, c)
		var info string
		if err == nil {
			info, err = c.ClusterInfo(ctx).Result()
		}
		if err == nil {
			s.info, err = infoOf(ctx, c)
		}
		_ = c.Close()
		if err != nil {
			log.FromContext(ctx).Info("reading the cluster from a server failed", "pod", klogRef(pod), "err", err)
			view.unreachable = append(view.unreachable, pod.Name)
			continue
		}
		s.nodes, s.self, s.replication = nodes, self, replication
		s.state = infoField(info, "cluster_state")
	}
	for i := range view.shards {
		slices.SortFunc(view.shards[i], func(a, b *clusterServer) int { return strings.Compare(a.pod.Name, b.pod.Name) })
	}
	return view, nil
}

// readClusterNode reads what the server c speaks to says of the cluster and
// of itself: CLUSTER NODES, its own entry among them, and INFO replication.
func readClusterNode(ctx context.Context, c *redis.Client) (nodes []cluster.Node, self *cluster.Node, replication string, err error) {
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, nil, "", err
	}
	if nodes, err = cluster.ParseNodes(text); err != nil {
		return nil, nil, "", err
	}
	if replication, err = c.Info(ctx, "replication").Result(); err != nil {
		return nil, nil, "", err
	}
	for i := range nodes {
		if nodes[i].Myself {
			return nodes, &nodes[i], replication, nil
		}
	}
	return nil, nil, "", errors.New("CLUSTER NODES names no node myself")
}

// infoField is the value of field in an INFO-style reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
