package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// A sharded instance (spec.cluster) is reconciled here, one step of the
// cluster's life per reconcile, each read from the cluster first so that a
// step cut short (the reconcile's deadline, an operator restart) is finished
// by the next one:
//
//  1. the shared objects (ConfigMap, Services, NetworkPolicy, connection
//     Secret, users) and a StatefulSet and disruption budget per shard;
//  2. once every server of every shard answers, and none serves a slot, the
//     cluster is formed: MEET, each shard's first server gets an even share
//     of the slots, the others replicate it;
//  3. on a formed cluster, nodes that others record at addresses they left
//     (every pod restarted at once, on new IPs) are introduced again at
//     their new ones, servers it does not know are met, a new shard's
//     first server becomes its primary and the rest replicate it, and a
//     shard's server that replicates no one of its shard is made to;
//  4. shards added (spec.cluster.shards raised) receive their share of the
//     slots, keys and all; shards removed give theirs to the others first,
//     and leave the cluster, StatefulSet and all, only once they serve none
//     and clients have had clusterDrain to follow the moves.
//
// Failover is the cluster's: the operator never promotes. It reports what
// the cluster says in status.shards and the ClusterHealthy and SlotsCovered
// conditions.

const (
	// clusterResync is how often a cluster is read when no Kubernetes object
	// changes: a failover changes none.
	clusterResync = 10 * time.Second
	// clusterDrain is how long a shard that no longer serves slots keeps
	// running before it leaves: a client that cached the slot map before
	// the last move still sends its keys there, and is redirected.
	clusterDrain = 15 * time.Second
	// clusterStepBudget bounds the cluster commands of one reconcile: a
	// move of many keys goes on in the next.
	clusterStepBudget = 20 * time.Second
	// clusterReformWait bounds the wait for the nodes introduced again at
	// their new addresses to see the cluster ok (2-3 s on 2 loaded cores).
	clusterReformWait = 10 * time.Second
)

const (
	ReasonClusterForming     = "Forming"
	ReasonClusterHealthy     = "Healthy"
	ReasonClusterDown        = "ClusterDown"
	ReasonClusterUnreachable = "NodesUnreachable"
	ReasonClusterScaling     = "MovingSlots"
	ReasonSlotsCovered       = "AllSlotsServed"
	ReasonSlotsUncovered     = "SlotsNotServed"
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

// reconcileCluster is Reconcile for a sharded instance.
func (r *RedisPersistenceReconciler) reconcileCluster(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials, in specs.PodInputs) (ctrl.Result, error) {
	statefulSets, err := r.shardStatefulSets(ctx, rp)
	if err != nil {
		return ctrl.Result{}, err
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	template := specs.PodTemplate(rp, r.Options, in)
	eligible := eligibleNodes(nodes.Items, &template.Spec)

	if err := r.applyObjects(ctx, rp, creds); err != nil {
		return ctrl.Result{}, err
	}
	for _, pdb := range specs.ShardPodDisruptionBudgets(rp) {
		if err := r.Patch(ctx, pdb, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
			return ctrl.Result{}, fmt.Errorf("applying PodDisruptionBudget %s: %w", pdb.Name, err)
		}
	}
	for i := range specs.Shards(rp) {
		in := in
		in.AntiAffinity = specs.PodAntiAffinityFor(rp, eligible, statefulSets[i])
		sts := specs.ShardStatefulSet(rp, r.Options, in, i)
		r.keepClaimTemplate(rp, sts, statefulSets[i])
		if err := r.Patch(ctx, sts, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
			r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApply", "applying StatefulSet %s: %v", sts.Name, err)
			return ctrl.Result{}, fmt.Errorf("applying StatefulSet %s: %w", sts.Name, err)
		}
		statefulSets[i] = sts
	}
	if err := r.reportVolumeSize(ctx, rp); err != nil {
		return ctrl.Result{}, err
	}

	// Passwords, options and users go to every server that runs, as to a
	// replicated instance's.
	var result ctrl.Result
	serverCtx, cancelServer := context.WithTimeout(ctx, serverBudget)
	defer cancelServer()
	if rotating, err := r.rotateDefaultPassword(serverCtx, rp, creds); err != nil {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedRotatePassword", "%v", err)
		result = requeueWithin(result, 10*time.Second)
	} else if rotating > 0 {
		result = requeueWithin(result, max(rotating, time.Second))
	}
	var applied observation
	if rp.Status.AppliedConfigHash != specs.RuntimeConfigHash(rp) {
		applied.configErr = r.applyClusterRuntimeConfig(serverCtx, rp, creds.server)
	}
	r.setCondition(rp, v1alpha1.ConditionConfigApplied, configAppliedCondition(rp, applied))
	if expiry := r.convergeUsers(serverCtx, rp, creds); !expiry.IsZero() {
		result = requeueWithin(result, max(time.Until(expiry), time.Second))
	}
	if rotating, err := r.convergeCertificate(serverCtx, rp, creds); err != nil {
		return ctrl.Result{}, err
	} else if rotating {
		// No event says that the kubelet updated a mounted Secret.
		result = requeueWithin(result, tlsRotationRetry)
	}

	stepCtx, cancel := context.WithTimeout(ctx, clusterStepBudget)
	defer cancel()
	view, err := r.observeCluster(stepCtx, rp, creds.server, statefulSets)
	if err != nil {
		return ctrl.Result{}, err
	}
	admin := r.clusterAdmin(ctx, rp, creds.server)
	step, err := r.convergeCluster(stepCtx, rp, admin, view)
	if err != nil {
		log.FromContext(ctx).Info("cluster step failed", "redispersistence", klogRef(rp), "err", err)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "ClusterStepFailed", "%v", err)
	}
	if step.changed {
		// Report what the step left, not what it found.
		if view, err = r.observeCluster(stepCtx, rp, creds.server, step.statefulSets(view)); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.labelClusterRoles(ctx, rp, view); err != nil {
		return ctrl.Result{}, err
	}
	r.updateClusterStatus(rp, view, step, eligible)
	result = requeueWithin(result, clusterResync)
	if step.requeue > 0 {
		result = requeueWithin(result, step.requeue)
	}
	return result, nil
}

// applyClusterRuntimeConfig sets the runtime options on every running
// server and records them in status.appliedConfigHash once all took them.
// A server that starts later reads them from the ConfigMap.
func (r *RedisPersistenceReconciler) applyClusterRuntimeConfig(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials) error {
	changed, err := r.applyRuntimeConfigToReplicas(ctx, rp, creds, "")
	slices.Sort(changed)
	if changed = slices.Compact(changed); len(changed) > 0 {
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "AppliedConfig", "set %s on the running servers (CONFIG SET), without a restart", strings.Join(changed, ", "))
	}
	if err != nil {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApplyConfig", "setting runtime options on the running servers: %v", err)
		return err
	}
	rp.Status.AppliedConfigHash = specs.RuntimeConfigHash(rp)
	return nil
}

// shardStatefulSets are the instance's shard StatefulSets by shard index,
// those beyond spec.cluster.shards too (shards being removed).
func (r *RedisPersistenceReconciler) shardStatefulSets(ctx context.Context, rp *v1alpha1.RedisPersistence) (map[int]*appsv1.StatefulSet, error) {
	var list appsv1.StatefulSetList
	if err := r.List(ctx, &list, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SelectorLabels(rp))); err != nil {
		return nil, fmt.Errorf("listing StatefulSets: %w", err)
	}
	sets := map[int]*appsv1.StatefulSet{}
	for i := range list.Items {
		sts := &list.Items[i]
		shard, err := strconv.Atoi(sts.Labels[specs.LabelShard])
		if err != nil || sts.Name != specs.ShardName(rp, shard) || !metav1.IsControlledBy(sts, rp) {
			continue
		}
		sets[shard] = sts
	}
	return sets, nil
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
		text, err := c.ClusterNodes(ctx).Result()
		var info string
		if err == nil {
			info, err = c.ClusterInfo(ctx).Result()
		}
		if err == nil {
			s.replication, err = c.Info(ctx, "replication").Result()
		}
		if err == nil {
			s.info, err = infoOf(ctx, c)
		}
		_ = c.Close()
		if err == nil {
			s.nodes, err = cluster.ParseNodes(text)
		}
		if err != nil {
			log.FromContext(ctx).Info("reading the cluster from a server failed", "pod", klogRef(pod), "err", err)
			view.unreachable = append(view.unreachable, pod.Name)
			continue
		}
		for j := range s.nodes {
			if s.nodes[j].Myself {
				s.self = &s.nodes[j]
			}
		}
		s.state = infoField(info, "cluster_state")
	}
	for i := range view.shards {
		slices.SortFunc(view.shards[i], func(a, b *clusterServer) int { return strings.Compare(a.pod.Name, b.pod.Name) })
	}
	return view, nil
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

func (r *RedisPersistenceReconciler) clusterAdmin(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials) *cluster.Admin {
	logger := log.FromContext(ctx).WithValues("redispersistence", klogRef(rp))
	return &cluster.Admin{
		Dial: func(addr string) *redis.Client {
			c := dialServer(addr, creds)
			// MIGRATE of a batch of large keys takes longer than a
			// command: the giver waits up to 10 s on the receiver
			// (cluster.Admin's migrateTimeout), and its answer, IOERR
			// included, must come before the client gives up.
			c.Options().ReadTimeout = 15 * time.Second
			return c
		},
		Password: creds.password,
		Log:      func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) },
		Wait:     clusterStepBudget,
	}
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

// convergeCluster takes the one step the cluster needs next.
func (r *RedisPersistenceReconciler) convergeCluster(ctx context.Context, rp *v1alpha1.RedisPersistence, admin *cluster.Admin, view *clusterView) (clusterStep, error) {
	want := specs.Shards(rp)
	perShard := int(specs.ServersPerShard(rp))

	// Forming assigns each shard its share of the slots no node serves yet,
	// so a formation cut short goes on where it stopped.
	if !view.formed() || view.unassigned() > 0 {
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

	// Nodes the others record at addresses they left: every pod restarted
	// at once, and none can reach another (cluster.PlanIntroductions).
	if step, done, err := r.reintroduceNodes(ctx, rp, admin, view); done {
		return step, err
	}

	seed := view.seed()
	if seed == nil {
		return clusterStep{waiting: "no server that knows the cluster answers", requeue: 5 * time.Second}, nil
	}
	known := map[string]bool{}
	for _, n := range seed.nodes {
		if !n.Handshake {
			known[n.ID] = true
		}
	}

	// Servers the cluster does not know: new shards, new replicas, or a
	// server that lost its volume and came back as a new node.
	var strangers []string
	for _, s := range view.servers() {
		if s.answered() && !known[s.self.ID] {
			strangers = append(strangers, s.addr)
		}
	}
	if len(strangers) > 0 {
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterMeet", "bringing %d servers into the cluster", len(strangers))
		if err := admin.Meet(ctx, seed.addr, strangers); err != nil {
			return clusterStep{changed: true, waiting: "meeting new servers", requeue: time.Second}, err
		}
		return clusterStep{changed: true, requeue: time.Second}, nil
	}

	// Each shard's servers: one primary, the rest its replicas.
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
				return clusterStep{changed: true, waiting: "attaching replicas", requeue: time.Second}, err
			}
			return clusterStep{changed: true, requeue: time.Second}, nil
		}
	}

	// Moves a previous step left open (its deadline, an operator restart)
	// are finished first: a slot half moved serves its keys from two nodes.
	var views [][]cluster.Node
	var answering []string
	for _, s := range view.servers() {
		if s.answered() {
			views, answering = append(views, s.nodes), append(answering, s.addr)
		}
	}
	if open := cluster.OpenMoves(views); len(open) > 0 {
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterFinishingMoves", "finishing %d slot moves left open", len(open))
		if err := admin.FinishMoves(ctx, answering); errors.Is(err, cluster.ErrOutOfTime) {
			return clusterStep{changed: true, requeue: time.Millisecond}, nil
		} else if err != nil {
			return clusterStep{changed: true, waiting: "finishing slot moves", requeue: time.Second}, err
		}
		return clusterStep{changed: true, requeue: time.Second}, nil
	}

	// Slots: every shard asked for serves its share, and no other shard any.
	targets, moves, waiting := view.plan(want, perShard)
	if waiting != "" {
		return clusterStep{waiting: waiting, requeue: 5 * time.Second}, nil
	}
	if len(moves) > 0 {
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ClusterRebalancing", "moving slots with their keys so that %d shards serve even shares", want)
		if err := admin.Rebalance(ctx, targets); errors.Is(err, cluster.ErrOutOfTime) {
			// The next reconcile goes on where this one stopped.
			return clusterStep{changed: true, requeue: time.Millisecond}, nil
		} else if err != nil {
			return clusterStep{changed: true, waiting: "moving slots", requeue: time.Second}, err
		}
		return clusterStep{changed: true, requeue: time.Second}, nil
	}

	// Shards beyond spec.cluster.shards serve nothing now: they leave.
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

// labelClusterRoles labels every server that answered with the role it
// reports (uringredis.io/role: primary or replica), as for a replicated
// instance's pods, so that kubectl, dashboards and PodMonitors can tell a
// shard's primary. The cluster decides the roles; the label follows, and a
// replica promoted by a failover is announced in an event.
func (r *RedisPersistenceReconciler) labelClusterRoles(ctx context.Context, rp *v1alpha1.RedisPersistence, view *clusterView) error {
	for _, s := range view.servers() {
		if !s.answered() {
			continue
		}
		role := v1alpha1.RoleReplica
		if s.self.Primary {
			role = v1alpha1.RolePrimary
		}
		was := s.pod.Labels[specs.LabelRole]
		if err := r.labelRole(ctx, s.pod, role); err != nil {
			return err
		}
		if was == string(v1alpha1.RoleReplica) && role == v1alpha1.RolePrimary {
			r.Recorder.Eventf(rp, corev1.EventTypeNormal, "PrimaryLabelled", "the cluster made %s the primary of shard %d", s.pod.Name, s.shard)
		}
	}
	return nil
}

// updateClusterStatus writes what the cluster said into rp's status.
func (r *RedisPersistenceReconciler) updateClusterStatus(rp *v1alpha1.RedisPersistence, view *clusterView, step clusterStep, eligible int) {
	st := &rp.Status
	st.Endpoint = fmt.Sprintf("%s:%d", specs.ClientHost(rp), specs.RedisPort)
	st.Instances, st.ReadyInstances = 0, 0
	for _, sts := range view.statefulSets {
		st.Instances += sts.Status.Replicas
		st.ReadyInstances += sts.Status.ReadyReplicas
	}
	st.Primary, st.Replicas, st.Node = "", nil, ""

	byID := map[string]*clusterServer{}
	for _, s := range view.servers() {
		if s.answered() {
			byID[s.self.ID] = s
		}
	}
	st.Shards = nil
	covered := map[int]bool{}
	answering := 0
	for _, i := range view.shardIndexes() {
		shard := v1alpha1.ShardStatus{Index: int32(i)}
		for _, s := range view.shards[i] {
			if !s.answered() {
				shard.Servers = append(shard.Servers, v1alpha1.ReplicaStatus{Pod: s.pod.Name})
				continue
			}
			answering++
			if s.self.Primary {
				if shard.Primary == "" || len(s.self.Slots) > 0 {
					shard.Primary = s.pod.Name
					shard.Slots = cluster.FormatSlots(s.self.Slots)
					shard.SlotCount = int32(len(s.self.Slots))
				}
				offset, _ := strconv.ParseInt(infoField(s.replication, "master_repl_offset"), 10, 64)
				shard.Servers = append(shard.Servers, v1alpha1.ReplicaStatus{Pod: s.pod.Name, Role: v1alpha1.RolePrimary, Offset: offset, LinkUp: true})
				for _, slot := range s.self.Slots {
					covered[slot] = true
				}
				continue
			}
			replica := v1alpha1.ReplicaStatus{Pod: s.pod.Name, Role: v1alpha1.RoleReplica, LinkUp: infoField(s.replication, "master_link_status") == "up"}
			replica.Offset, _ = strconv.ParseInt(infoField(s.replication, "slave_repl_offset"), 10, 64)
			if p := byID[s.self.PrimaryID]; p != nil {
				primaryOffset, _ := strconv.ParseInt(infoField(p.replication, "master_repl_offset"), 10, 64)
				replica.Lag = max(primaryOffset-replica.Offset, 0)
			}
			shard.Servers = append(shard.Servers, replica)
		}
		st.Shards = append(st.Shards, shard)
	}

	r.setCondition(rp, v1alpha1.ConditionUpToDate, shardsUpToDate(view))
	storage, report := clusterStorage(rp, view)
	r.setCondition(rp, v1alpha1.ConditionStorageReady, storage)
	if report.filesystem != "" {
		st.Filesystem = report.filesystem
		r.reportStorage(rp, report, storage)
	}
	if uring := clusterUringCondition(rp, view); uring != nil {
		r.setCondition(rp, v1alpha1.ConditionUringActive, *uring)
	} else {
		meta.RemoveStatusCondition(&rp.Status.Conditions, v1alpha1.ConditionUringActive)
	}
	r.setCondition(rp, v1alpha1.ConditionClusterHealthy, clusterHealthyCondition(view, step, answering, len(st.Shards)))
	r.setCondition(rp, v1alpha1.ConditionSlotsCovered, slotsCoveredCondition(rp, view, step, covered))

	// Ready while it serves: moving slots to or from a shard is not an outage.
	ready := meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionClusterHealthy) && len(covered) == cluster.Slots
	switch {
	case storage.status == metav1.ConditionFalse:
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, ReasonStorageNotReady, storage.message})
	case ready:
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionTrue, ReasonReady, "the cluster serves every slot"})
	case eligible == 0:
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, ReasonNotScheduled, "no node is eligible for the servers"})
	default:
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, ReasonPodNotReady, "the cluster is not serving every slot yet"})
	}
}

// clusterStorage is StorageReady of a sharded instance: every server's
// prepare report (its volume's filesystem, mount options and fsync probe)
// is judged as a single server's is, and the first that fails makes it
// false, naming the pod. The report returned, for status.storage and the
// recommendation, is the first server's that has one (shard 0's first).
func clusterStorage(rp *v1alpha1.RedisPersistence, view *clusterView) (condition, storageReport) {
	var first storageReport
	var unreported []string
	for _, s := range view.servers() {
		report := storageReportFromPod(s.pod)
		c := storageCondition(rp, report)
		switch c.status {
		case metav1.ConditionFalse:
			c.message = s.pod.Name + ": " + c.message
			return c, report
		case metav1.ConditionUnknown:
			unreported = append(unreported, s.pod.Name)
			continue
		}
		if first.filesystem == "" {
			first = report
		}
	}
	switch {
	case first.filesystem == "":
		return condition{metav1.ConditionUnknown, ReasonFilesystemUnknown, "no server's data directory has been reported yet"}, first
	case len(unreported) > 0:
		return condition{metav1.ConditionUnknown, ReasonFilesystemUnknown, "the data directories of " + strings.Join(unreported, ", ") + " have not been reported yet"}, first
	}
	c := storageCondition(rp, first)
	c.message = "every server's data directory passed; the first is on " + strings.TrimPrefix(c.message, "the data directory is on ")
	return c, first
}

// clusterUringCondition is UringActive for a sharded instance of mode
// uring: true when every server that answers writes its AOF through
// io_uring, false naming those that fell back to the posix engine (and the
// first one's reason), nil for other modes.
func clusterUringCondition(rp *v1alpha1.RedisPersistence, view *clusterView) *condition {
	if rp.Spec.Mode != v1alpha1.ModeUring {
		return nil
	}
	var answered int
	var fallen []string
	reason := ""
	for _, s := range view.servers() {
		if s.info == nil {
			continue
		}
		answered++
		if !s.info.uringActive {
			fallen = append(fallen, s.pod.Name)
			reason = cmp.Or(reason, s.info.fallbackReason)
		}
	}
	switch {
	case answered == 0:
		return &condition{metav1.ConditionUnknown, ReasonPodNotReady, "waiting for the servers to be ready"}
	case len(fallen) > 0:
		return &condition{metav1.ConditionFalse, ReasonUringFallback, fmt.Sprintf("io_uring is unavailable on %s, which run the posix engine: %s",
			strings.Join(fallen, ", "), cmp.Or(reason, "the server did not report a reason"))}
	}
	return &condition{metav1.ConditionTrue, ReasonUringActive, fmt.Sprintf("every server that answers (%d) writes its append-only file through io_uring", answered)}
}

// shardsUpToDate is true when every shard's StatefulSet runs its current
// pod template on all its pods: a RedisBenchmark waits for it, as it does
// for a single server's (upToDateCondition).
func shardsUpToDate(view *clusterView) condition {
	for _, i := range view.shardIndexes() {
		if sts := view.statefulSets[i]; sts != nil && !rolledOut(sts) {
			return condition{metav1.ConditionFalse, ReasonUpgrading, fmt.Sprintf("StatefulSet %s rolls its pods onto its current pod template", sts.Name)}
		}
	}
	return condition{metav1.ConditionTrue, ReasonUpToDate, "every shard's pods run the pod template the operator builds"}
}

// clusterHealthyCondition is true when every server answers and sees the
// cluster ok; a cluster with slots no node serves is still forming.
func clusterHealthyCondition(view *clusterView, step clusterStep, answering, shards int) condition {
	if !view.formed() || view.unassigned() > 0 {
		return condition{metav1.ConditionFalse, ReasonClusterForming, cmp.Or(step.waiting, "forming the cluster")}
	}
	if len(view.unreachable) > 0 {
		return condition{metav1.ConditionFalse, ReasonClusterUnreachable, "servers do not answer: " + strings.Join(view.unreachable, ", ")}
	}
	var down []string
	for _, s := range view.servers() {
		if !s.answered() {
			down = append(down, s.pod.Name+" (not ready)")
		} else if s.state != "ok" {
			down = append(down, s.pod.Name+" (cluster_state:"+s.state+")")
		}
	}
	if len(down) > 0 {
		return condition{metav1.ConditionFalse, ReasonClusterDown, "not every server sees the cluster ok: " + strings.Join(down, ", ")}
	}
	return condition{metav1.ConditionTrue, ReasonClusterHealthy, fmt.Sprintf("%d servers in %d shards see the cluster ok", answering, shards)}
}

// slotsCoveredCondition is true when every slot is served, by the shards
// spec.cluster.shards asks for, and none is being moved.
func slotsCoveredCondition(rp *v1alpha1.RedisPersistence, view *clusterView, step clusterStep, covered map[int]bool) condition {
	if n := len(covered); n < cluster.Slots {
		var missing []int
		for slot := range cluster.Slots {
			if !covered[slot] {
				missing = append(missing, slot)
			}
		}
		return condition{metav1.ConditionFalse, ReasonSlotsUncovered,
			fmt.Sprintf("%d slots are served by no primary that answers: %s", len(missing), cluster.FormatSlots(missing))}
	}
	var moving []string
	for _, s := range view.servers() {
		if !s.answered() {
			continue
		}
		for slot, to := range s.self.Migrating {
			moving = append(moving, fmt.Sprintf("slot %d from %s to node %s", slot, s.pod.Name, to))
		}
	}
	if len(moving) > 0 {
		slices.Sort(moving)
		return condition{metav1.ConditionFalse, ReasonClusterScaling, "moving " + strings.Join(moving, ", ")}
	}
	if step.waiting != "" {
		return condition{metav1.ConditionFalse, ReasonClusterScaling, step.waiting}
	}
	want := specs.Shards(rp)
	_, moves, waiting := view.plan(want, int(specs.ServersPerShard(rp)))
	if waiting != "" {
		return condition{metav1.ConditionFalse, ReasonClusterScaling, waiting}
	}
	if len(moves) > 0 {
		n := 0
		for _, m := range moves {
			n += len(m.Slots)
		}
		return condition{metav1.ConditionFalse, ReasonClusterScaling, fmt.Sprintf("%d slots are still to move so that %d shards serve even shares", n, want)}
	}
	for _, i := range view.shardIndexes() {
		if i >= want {
			return condition{metav1.ConditionFalse, ReasonClusterScaling, fmt.Sprintf("shard %d is being removed", i)}
		}
	}
	return condition{metav1.ConditionTrue, ReasonSlotsCovered, fmt.Sprintf("every hash slot is served, by %d shards", want)}
}
