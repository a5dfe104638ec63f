package controllers

// Rolling a replicated instance without restarting its primary
// (spec.updateStrategy: switchover, the default).
//
// Left to itself, the StatefulSet controller rolls a new pod template from
// the highest ordinal down and restarts the primary like any server: writes
// fail until the Sentinels notice it is gone and fail over (13.4 s for a
// change of resources). Instead the operator keeps the RollingUpdate and
// moves its partition: a server below the partition keeps the template it
// runs, even when its pod is recreated. The reconcile that applies a new
// template holds every server (partition = the servers' count); each later
// one lowers the partition by one server once every server at or above it
// runs the new template, is Ready and replicates again (the primary
// excepted), so the StatefulSet controller restarts one server at a time.
// When the next server to restart is the primary, the operator first
// switches over (redispersistence_switchover.go), passing over the
// replicas that still run the old template when one that runs the new one
// replicates, and only then lets the old primary's pod go.
//
// Why a partition rather than OnDelete, which would let the operator delete
// the pods in any order: under OnDelete the StatefulSet controller never
// completes a rollout (status.currentRevision stays the old revision), and
// that completion is what the Ready condition, the operator upgrade turns
// and `kubectl rollout status` read. The price is the order: a partition
// rolls from the highest ordinal down. With the primary at ordinal 0, as
// an instance starts, the replicas roll first and the primary last, after
// one switchover. With the primary at the highest ordinal still to roll and
// no replica on the new template yet, the operator switches over to a
// replica on the old template and once more when that one's turn comes:
// two pauses instead of one, and still no restart of a primary.
//
// A lone server that is scaled out rolls at once: it has no replica to
// switch over to, and the new replicas find no primary until it runs the
// replicated template. A server that is not Ready may roll without waiting for its turn's
// conditions to improve: it serves nothing a restart could interrupt, and
// the new template may be what it needs. While the Sentinels name no primary
// a Ready server does not roll: it could be the primary.
//
// Nothing is kept between reconciles: the partition, the pods' revisions and
// the Sentinels' view say where a rollout stands. The topology supplies a
// roller: the Sentinels' here (sentinelRoller), a shard's for each shard of
// a sharded instance (redispersistence_cluster_rollout.go).

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// rollingServer is what a rollout decision reads of one server.
type rollingServer struct {
	// updated: the pod runs the StatefulSet's update revision.
	updated bool
	// ready: the pod is Ready and not being deleted.
	ready bool
	// replicating: the server is the primary, or a replica whose link to
	// its primary is up.
	replicating bool
}

// rollStep is what a reconcile does about a rollout.
type rollStep struct {
	// partition is the partition to apply; after a switchover when
	// switchOver is set.
	partition int32
	// switchOver: the primary is the next server to roll; the partition
	// moves only once it is a replica.
	switchOver bool
	// why says what the rollout waits for, or what it does.
	why string
}

// decideRoll says how far the partition of a StatefulSet of servers may
// go now, from held. pods are the servers by ordinal (missing: no pod);
// primary is the Sentinels' confirmed primary's ordinal, -1 when unknown.
// It is pure.
func decideRoll(servers, held int32, pods map[int]rollingServer, primary int) rollStep {
	held = min(held, servers)
	// The servers from the top down that run the new template and serve.
	next := int(servers) - 1
	for ; next >= 0; next-- {
		p, ok := pods[next]
		if !ok || !p.updated || !p.ready || !p.replicating {
			break
		}
	}
	if next < 0 {
		return rollStep{partition: 0, why: "every server runs the current template"}
	}
	p, ok := pods[next]
	if int(held) <= next {
		// Let go already: the StatefulSet controller replaces it, or it
		// starts, or it is not replicating yet.
		return rollStep{partition: held, why: fmt.Sprintf("waiting for server %d to run the new template, be Ready and replicate", next)}
	}
	if ok && p.updated {
		// Above the partition on the new template already (a server the
		// StatefulSet added): it must serve before anything below it rolls.
		return rollStep{partition: held, why: fmt.Sprintf("waiting for server %d, which runs the new template, to be Ready and replicate", next)}
	}
	switch {
	case next == primary:
		return rollStep{partition: int32(next), switchOver: true, why: fmt.Sprintf("server %d is the primary and the next to restart", next)}
	case !ok || !p.ready:
		return rollStep{partition: int32(next), why: fmt.Sprintf("restarting server %d, which is not Ready", next)}
	case primary < 0:
		return rollStep{partition: held, why: fmt.Sprintf("the primary is not known: server %d, which may be the primary, waits", next)}
	}
	return rollStep{partition: int32(next), why: fmt.Sprintf("restarting replica %d", next)}
}

// partitionOf is the partition the StatefulSet holds its servers at, 0 for
// none.
func partitionOf(sts *appsv1.StatefulSet) int32 {
	if u := sts.Spec.UpdateStrategy.RollingUpdate; u != nil {
		return ptr.Deref(u.Partition, 0)
	}
	return 0
}

// A roller is what a rollout needs of a topology: the servers of one
// StatefulSet as decideRoll reads them, and a way to hand its primary role
// to another server before the primary restarts.
type roller interface {
	// observe reads the servers by ordinal, against the StatefulSet's
	// updateRevision, and the primary's ordinal (-1 when not known).
	observe(ctx context.Context, updateRevision string) (map[int]rollingServer, int, error)
	// switchOver hands the primary role away from the server at primary,
	// to one on the new template when one replicates; why says why now.
	switchOver(ctx context.Context, servers map[int]rollingServer, primary int, why string) error
}

// partitionToRun is the partition of existing, a StatefulSet of servers,
// for this reconcile, as the file comment describes; newTemplate says that
// the StatefulSet applied now changes the pod template. It switches over,
// through roll, when the primary is the next server to restart.
func (r *RedisPersistenceReconciler) partitionToRun(ctx context.Context, rp *v1alpha1.RedisPersistence, existing *appsv1.StatefulSet, newTemplate bool, roll roller) (int32, error) {
	switch {
	case existing == nil:
		return 0, nil // every pod starts on the template
	case ptr.Deref(existing.Spec.Replicas, 1) < 2:
		// One server scaled out: there is no replica to switch over to, and
		// its template (a lone server's) must go before the replicas and
		// Sentinels of the new one can find a primary. Held, it would wait
		// for them forever.
		return 0, nil
	case newTemplate:
		return ptr.Deref(existing.Spec.Replicas, 1), nil
	case existing.Status.ObservedGeneration < existing.Generation || existing.Status.UpdateRevision == "":
		return partitionOf(existing), nil // the revisions are not known yet
	case rolledOut(existing):
		return 0, nil
	}
	byOrdinal, primary, err := roll.observe(ctx, existing.Status.UpdateRevision)
	if err != nil {
		return 0, err
	}
	held := partitionOf(existing)
	step := decideRoll(ptr.Deref(existing.Spec.Replicas, 1), held, byOrdinal, primary)
	log.FromContext(ctx).V(1).Info("rolling the servers", "statefulset", klogRef(existing), "partition", step.partition, "why", step.why)
	if !step.switchOver {
		return step.partition, nil
	}
	// A shard's switchovers back off apart from the other shards'.
	key := client.ObjectKeyFromObject(existing)
	if wait := r.switchovers.wait(key, time.Now()); wait > 0 {
		log.FromContext(ctx).V(1).Info("the last switchover failed; the next attempt waits", "redispersistence", klogRef(rp), "statefulset", existing.Name, "wait", wait)
		return held, nil
	}
	err = roll.switchOver(ctx, byOrdinal, primary, step.why)
	r.switchovers.record(key, time.Now(), err)
	if err != nil {
		return held, nil
	}
	return step.partition, nil
}

// sentinelRoller rolls a replicated instance's servers: the Sentinels name
// the primary and fail over to the replica the operator leaves them.
type sentinelRoller struct {
	r     *RedisPersistenceReconciler
	rp    *v1alpha1.RedisPersistence
	creds serverCredentials
	// What observe read.
	pods []corev1.Pod
	view replicationView
}

func (s *sentinelRoller) observe(ctx context.Context, updateRevision string) (map[int]rollingServer, int, error) {
	askCtx, cancel := context.WithTimeout(ctx, replicationBudget)
	defer cancel()
	view, pods, err := s.r.observeReplication(askCtx, s.rp, s.creds)
	if err != nil {
		return nil, 0, err
	}
	s.view, s.pods = view, pods
	primary := -1
	if view.primary != "" {
		primary = ordinalOf(view.primary)
	}
	return rollingServers(pods, view, updateRevision), primary, nil
}

func (s *sentinelRoller) switchOver(ctx context.Context, byOrdinal map[int]rollingServer, primary int, why string) error {
	r, rp := s.r, s.rp
	// Pass over the replicas on the old template when one on the new
	// template replicates: the Sentinels then promote a restarted one.
	updatedReplica := false
	for ordinal, p := range byOrdinal {
		updatedReplica = updatedReplica || ordinal != primary && p.updated && p.ready && p.replicating
	}
	passOver := func(pod string) bool {
		p := byOrdinal[ordinalOf(pod)]
		return updatedReplica && !p.updated
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchingOver", "rolling the servers onto a new pod template: %s; asking the Sentinels to fail over before it restarts", why)
	priorities := r.replicaPriorities(ctx, s.creds, s.pods, passOver)
	promoted, err := r.switchOver(ctx, rp, s.creds, s.pods, s.view.primary, "", passOver)
	// Those passed over restart on the new template, which gives them their
	// priority back; but a rollout that stops short (the change reverted)
	// would leave them replicas the Sentinels never promote.
	r.restorePriorities(context.WithoutCancel(ctx), s.creds, s.pods, priorities)
	if err != nil {
		log.FromContext(ctx).Info("switching over before the primary restarts failed", "redispersistence", klogRef(rp), "err", err)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedSwitchover", "the primary %s keeps running on its template for now: %v", s.view.primary, err)
		return err
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchedOver", "the Sentinels promoted %s; %s was primary and restarts on the new pod template", promoted, s.view.primary)
	return nil
}

// rollingServers is what decideRoll reads of each server pod, by ordinal.
func rollingServers(pods []corev1.Pod, view replicationView, updateRevision string) map[int]rollingServer {
	replicating := map[string]bool{}
	for _, s := range view.servers {
		replicating[s.Pod] = s.Role == v1alpha1.RolePrimary || s.Role == v1alpha1.RoleReplica && s.LinkUp
	}
	byOrdinal := map[int]rollingServer{}
	for i := range pods {
		pod := &pods[i]
		if ordinalOf(pod.Name) < 0 {
			continue
		}
		byOrdinal[ordinalOf(pod.Name)] = rollingServer{
			updated:     pod.Labels[appsv1.ControllerRevisionHashLabelKey] == updateRevision,
			ready:       podReady(pod) && pod.DeletionTimestamp.IsZero(),
			replicating: replicating[pod.Name],
		}
	}
	return byOrdinal
}
