package controllers

// The steps that bring a sharded instance's cluster to its spec, one per
// reconcile (redispersistence_cluster.go's comment lists them).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// clusterDrains remembers when each shard being removed served its last
// slot, by instance and shard. An operator restart forgets it, and the
// shard drains again.
type clusterDrains struct {
	sync.Mutex
	since map[string]time.Time
}

func (d *clusterDrains) start(key string, now time.Time) time.Time {
	d.Lock()
	defer d.Unlock()
	if d.since == nil {
		d.since = map[string]time.Time{}
	}
	if t, ok := d.since[key]; ok {
		return t
	}
	d.since[key] = now
	return now
}

func (d *clusterDrains) forget(key string) {
	d.Lock()
	defer d.Unlock()
	delete(d.since, key)
}

// clusterStep is what convergeCluster did or waits for.
type clusterStep struct {
	// changed says the cluster was changed: read it again for the status.
	changed bool
	// waiting says what the cluster waits for, "" when it is as asked.
	waiting string
	// removed are the shards whose StatefulSets were deleted.
	removed []int
	requeue time.Duration
}

func (s clusterStep) statefulSets(v *clusterView) map[int]*appsv1.StatefulSet {
	sets := map[int]*appsv1.StatefulSet{}
	for i, sts := range v.statefulSets {
		if !slices.Contains(s.removed, i) {
			sets[i] = sts
		}
	}
	return sets
}

// clusterStepFunc is one step of convergeCluster: took says it was the
// step to take, and the others wait for the next reconcile.
type clusterStepFunc func(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (step clusterStep, took bool, err error)

// convergeCluster takes the one step the cluster needs next: forming it,
// then the first of these that has work.
func (r *RedisPersistenceReconciler) convergeCluster(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, error) {
	// Forming assigns each shard its share of the slots no node serves yet,
	// so a formation cut short goes on where it stopped.
	if !view.formed() || view.unassigned() > 0 {
		return r.formCluster(ctx, rp, admin, view)
	}
	for _, step := range []clusterStepFunc{
		r.reintroduceNodes, // nodes that others record at addresses they left
		r.meetStrangers,    // servers the cluster does not know
		r.attachReplicas,   // a shard's servers that replicate no one of it
		r.finishMoves,      // slot moves a previous step left open
		r.rebalance,        // every shard asked for serves its share, no other any
	} {
		if s, took, err := step(ctx, rp, admin, view); took {
			return s, err
		}
	}
	return r.removeDrainedShards(ctx, rp, admin, view)
}

// formCluster gives each shard's leader an even share of the slots no node
// serves and makes the shard's other servers its replicas.
func (r *RedisPersistenceReconciler) formCluster(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, error) {
	want, perShard := specs.Shards(rp), int(specs.ServersPerShard(rp))
	var shards [][]string
	for i := range want {
		// The shard's leader first: the one Create gives the share to.
		var addrs []string
		leader := view.leaderOf(i)
		for _, s := range view.shards[i] {
			if s.answered() && s != leader {
				addrs = append(addrs, s.addr)
			}
		}
		if leader != nil && leader.answered() {
			addrs = append([]string{leader.addr}, addrs...)
		}
		if len(addrs) < perShard {
			return clusterStep{waiting: fmt.Sprintf("waiting for every server of every shard to answer: shard %d has %d of %d", i, len(addrs), perShard), requeue: 5 * time.Second}, nil
		}
		shards = append(shards, addrs)
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterCreating", "forming a cluster of %d shards of %d servers", want, perShard)
	if err := admin.Create(ctx, shards); err != nil {
		return clusterStep{changed: true, waiting: "forming the cluster", requeue: time.Second}, fmt.Errorf("forming the cluster: %w", err)
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterCreated", "the cluster serves all 16384 slots over %d shards", want)
	return clusterStep{changed: true}, nil
}

// meetStrangers brings in the servers the cluster does not know: new
// shards, new replicas, or a server that lost its volume and came back as a
// new node. Without a server that knows the cluster, it waits.
func (r *RedisPersistenceReconciler) meetStrangers(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, bool, error) {
	seed := view.seed()
	if seed == nil {
		return clusterStep{waiting: "no server that knows the cluster answers", requeue: 5 * time.Second}, true, nil
	}
	known := map[string]bool{}
	for _, n := range seed.nodes {
		if !n.Handshake {
			known[n.ID] = true
		}
	}
	var strangers []string
	for _, s := range view.servers() {
		if s.answered() && !known[s.self.ID] {
			strangers = append(strangers, s.addr)
		}
	}
	if len(strangers) == 0 {
		return clusterStep{}, false, nil
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterMeet", "bringing %d servers into the cluster", len(strangers))
	if err := admin.Meet(ctx, seed.addr, strangers); err != nil {
		return clusterStep{changed: true, waiting: "meeting new servers", requeue: time.Second}, true, err
	}
	return clusterStep{changed: true, requeue: time.Second}, true, nil
}

// attachReplicas makes each shard's servers one primary and its replicas.
func (r *RedisPersistenceReconciler) attachReplicas(ctx context.Context, _ *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, bool, error) {
	for _, i := range view.shardIndexes() {
		primary := view.leaderOf(i)
		if primary == nil {
			continue
		}
		var strays []string
		for _, s := range view.shards[i] {
			if s != primary && s.answered() && s.self.PrimaryID != primary.self.ID {
				strays = append(strays, s.addr)
			}
		}
		if len(strays) > 0 {
			if err := admin.Replicate(ctx, primary.addr, strays); err != nil {
				return clusterStep{changed: true, waiting: "attaching replicas", requeue: time.Second}, true, err
			}
			return clusterStep{changed: true, requeue: time.Second}, true, nil
		}
	}
	return clusterStep{}, false, nil
}

// finishMoves finishes the slot moves a previous step left open (its
// deadline, an operator restart) before any other: a slot half moved
// serves its keys from two nodes.
func (r *RedisPersistenceReconciler) finishMoves(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, bool, error) {
	var views [][]cluster.Node
	var answering []string
	for _, s := range view.servers() {
		if s.answered() {
			views, answering = append(views, s.nodes), append(answering, s.addr)
		}
	}
	open := cluster.OpenMoves(views)
	if len(open) == 0 {
		return clusterStep{}, false, nil
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterFinishingMoves", "finishing %d slot moves left open", len(open))
	if err := admin.FinishMoves(ctx, answering); errors.Is(err, cluster.ErrOutOfTime) {
		return clusterStep{changed: true, requeue: time.Millisecond}, true, nil
	} else if err != nil {
		return clusterStep{changed: true, waiting: "finishing slot moves", requeue: time.Second}, true, err
	}
	return clusterStep{changed: true, requeue: time.Second}, true, nil
}

// rebalance moves slots, keys and all, so that every shard asked for
// serves an even share and no other shard any.
func (r *RedisPersistenceReconciler) rebalance(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, bool, error) {
	want := specs.Shards(rp)
	targets, moves, waiting := view.plan(want, int(specs.ServersPerShard(rp)))
	switch {
	case waiting != "":
		return clusterStep{waiting: waiting, requeue: 5 * time.Second}, true, nil
	case len(moves) == 0:
		return clusterStep{}, false, nil
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterRebalancing", "moving slots with their keys so that %d shards serve even shares", want)
	if err := admin.Rebalance(ctx, targets); errors.Is(err, cluster.ErrOutOfTime) {
		// The next reconcile goes on where this one stopped.
		return clusterStep{changed: true, requeue: time.Millisecond}, true, nil
	} else if err != nil {
		return clusterStep{changed: true, waiting: "moving slots", requeue: time.Second}, true, err
	}
	return clusterStep{changed: true, requeue: time.Second}, true, nil
}

// removeDrainedShards takes the shards beyond spec.cluster.shards, which
// serve nothing now, out of the cluster once clients have had clusterDrain
// to follow the moves, and deletes their StatefulSets.
func (r *RedisPersistenceReconciler) removeDrainedShards(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, error) {
	want := specs.Shards(rp)
	var step clusterStep
	for _, i := range view.shardIndexes() {
		if i < want {
			continue
		}
		key := client.ObjectKeyFromObject(rp).String() + "/" + strconv.Itoa(i)
		since := r.drains.start(key, time.Now())
		if wait := clusterDrain - time.Since(since); wait > 0 {
			step.waiting = fmt.Sprintf("shard %d serves no slot; it leaves the cluster in %s", i, wait.Round(time.Second))
			step.requeue = wait
			continue
		}
		var remaining, leaving []string
		for _, s := range view.servers() {
			if s.answered() && s.shard < want {
				remaining = append(remaining, s.addr)
			}
		}
		for _, s := range view.shards[i] {
			if s.answered() {
				leaving = append(leaving, s.addr)
			}
		}
		if len(leaving) > 0 {
			if err := admin.RemoveShard(ctx, remaining, leaving); err != nil {
				return clusterStep{changed: true, waiting: "removing shard " + strconv.Itoa(i), requeue: time.Second}, err
			}
		}
		if err := r.deleteShard(ctx, rp, i); err != nil {
			return clusterStep{changed: true}, err
		}
		r.drains.forget(key)
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ShardRemoved", "shard %d left the cluster; its StatefulSet %s is deleted, its volumes kept", i, specs.ShardName(rp, i))
		step.changed = true
		step.removed = append(step.removed, i)
	}
	return step, nil
}

// reintroduceNodes sends the CLUSTER MEETs that bring the nodes of a
// formed cluster back together when some record others at addresses where
// they no longer listen (cluster.PlanIntroductions says why the operator,
// which reads every pod's new address, is the one to). The bool says it
// took the step.
func (r *RedisPersistenceReconciler) reintroduceNodes(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, bool, error) {
	var members []cluster.Member
	for _, s := range view.servers() {
		if s.answered() {
			members = append(members, cluster.Member{Addr: s.addr, Nodes: s.nodes})
		}
	}
	plan := cluster.PlanIntroductions(members)
	if len(plan) == 0 {
		return clusterStep{}, false, nil
	}
	moved := map[string]bool{}
	for _, in := range plan {
		moved[in.ID] = true
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterReintroducing", "%d nodes listen at new addresses the others do not know: introducing them again (CLUSTER MEET)", len(moved))
	step := clusterStep{changed: true, waiting: "introducing nodes at their new addresses", requeue: time.Second}
	if err := admin.Introduce(ctx, plan); err != nil {
		return step, true, err
	}
	// The handshakes take a second or two. Waiting for them here lets this
	// reconcile report the cluster ok, not the next resync; a node still
	// apart after clusterReformWait is planned again by the next read.
	waitCtx, cancel := context.WithTimeout(ctx, clusterReformWait)
	defer cancel()
	var addrs []string
	for _, m := range members {
		addrs = append(addrs, m.Addr)
	}
	if err := admin.WaitHealthy(waitCtx, addrs); err != nil {
		log.FromContext(ctx).Info("the cluster is not ok yet after the introductions", "redispersistence", klogRef(rp), "err", err)
		return step, true, nil
	}
	step.waiting = ""
	return step, true, nil
}

// deleteShard deletes shard i's StatefulSet and disruption budget. Its
// claims stay, as they do when the instance is deleted: a shard added again
// later claims them, and starts from the empty node the removal reset.
func (r *RedisPersistenceReconciler) deleteShard(ctx context.Context, rp *v1alpha1.RedisPersistence, i int) error {
	name := types.NamespacedName{Namespace: rp.Namespace, Name: specs.ShardName(rp, i)}
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &policyv1.PodDisruptionBudget{}} {
		obj.SetNamespace(name.Namespace)
		obj.SetName(name.Name)
		if err := r.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %T %s: %w", obj, name, err)
		}
	}
	return nil
}
