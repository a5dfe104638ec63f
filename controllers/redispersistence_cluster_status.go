package controllers

// What a sharded instance reports: status.shards, the role labels and the conditions.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

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

// updateClusterStatus is updateStatus for a sharded instance: it writes
// what the cluster said into rp's status.
func (r *RedisPersistenceReconciler) updateClusterStatus(rp *v1alpha1.RedisPersistence, obs observation) {
	r.setCondition(rp, v1alpha1.ConditionConfigApplied, configAppliedCondition(rp, obs))
	if obs.cluster == nil {
		// A mode change holds the new configuration back.
		r.setCondition(rp, v1alpha1.ConditionReady, *obs.modeChange)
		return
	}
	view, step := obs.cluster.view, obs.cluster.step
	st := &rp.Status
	st.Endpoint = fmt.Sprintf("%s:%d", specs.ClientHost(rp), specs.RedisPort)
	st.Instances, st.ReadyInstances = 0, 0
	for _, sts := range view.statefulSets {
		st.Instances += sts.Status.Replicas
		st.ReadyInstances += sts.Status.ReadyReplicas
	}
	st.Primary, st.Replicas, st.Node = "", nil, ""
	// What shard 0's first server runs: every server takes the same template.
	if image, ok := runningImage(obs.pod, specs.ContainerRedis); ok {
		st.Image = image
	}
	if image, ok := runningImage(obs.pod, specs.ContainerExporter); ok {
		st.ExporterImage = image
	}
	var covered map[int]bool
	var answering int
	st.Shards, covered, answering = shardStatuses(view)

	r.reportUpToDate(rp, obs, slices.Collect(maps.Values(view.statefulSets)))
	storage, report := clusterStorage(rp, view, obs)
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
	case obs.eligibleNodes == 0:
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, ReasonNotScheduled, "no node is eligible for the servers"})
	default:
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, ReasonPodNotReady, "the cluster is not serving every slot yet"})
	}
}

// shardStatuses are status.shards as the servers said, the slots a primary
// serves, and how many servers answered.
func shardStatuses(view *clusterView) (shards []v1alpha1.ShardStatus, covered map[int]bool, answering int) {
	byID := map[string]*clusterServer{}
	for _, s := range view.servers() {
		if s.answered() {
			byID[s.self.ID] = s
		}
	}
	covered = map[int]bool{}
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
		shards = append(shards, shard)
	}

	return shards, covered, answering
}

// clusterMotion is motionOf for a sharded instance: its shards'
// StatefulSets, and Scaling while slots move to or from a shard or a
// drained shard waits to leave (ClusterHealthy's MovingSlots).
func clusterMotion(rp *v1alpha1.RedisPersistence, view *clusterView) v1alpha1.InstancePhase {
	moving := motionOf(slices.Collect(maps.Values(view.statefulSets)), specs.ServersPerShard(rp), rp.Status.Phase)
	if healthy := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionClusterHealthy); moving == "" && healthy != nil && healthy.Reason == ReasonClusterScaling {
		moving = v1alpha1.PhaseScaling
	}
	return moving
}

// clusterStorage is StorageReady of a sharded instance: every server's
// prepare report (its volume's filesystem, mount options and fsync probe)
// is judged as a single server's is, and the first that fails makes it
// false, naming the pod. The report returned, for status.storage and the
// recommendation, is the first server's that has one (shard 0's first).
// The first server's report is obs.storage, which a re-probe of its volume
// replaces (spec.storage.probeInterval).
func clusterStorage(rp *v1alpha1.RedisPersistence, view *clusterView, obs observation) (condition, storageReport) {
	var first storageReport
	var unreported []string
	for _, s := range view.servers() {
		report := storageReportFromPod(s.pod)
		if obs.pod != nil && s.pod.Name == obs.pod.Name {
			report = obs.storage
		}
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
