package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// reconcileCluster is Reconcile for a sharded instance, once the
// credentials are read and the password is rotated.
func (r *RedisPersistenceReconciler) reconcileCluster(ctx, serverCtx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials, in specs.PodInputs, moving *v1alpha1.InstancePhase) (ctrl.Result, error) {
	statefulSets, eligible, err := r.applyShards(ctx, rp, creds, in)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Options and users go to every server that runs, as to a replicated
	// instance's.
	var result ctrl.Result
	var applied observation
	if rp.Status.AppliedConfigHash != specs.RuntimeConfigHash(rp) {
		applied.configErr = r.applyClusterRuntimeConfig(serverCtx, rp, creds.server)
	}
	r.setCondition(rp, v1alpha1.ConditionConfigApplied, configAppliedCondition(rp, applied))
	again, tlsRotating, err := r.convergeAccess(serverCtx, rp, creds)
	if err != nil {
		return ctrl.Result{}, err
	}
	if again > 0 {
		result = requeueWithin(result, again)
	}
	if tlsRotating {
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
	*moving = r.updateClusterStatus(rp, view, step, eligible)
	result = requeueWithin(result, clusterResync)
	if step.requeue > 0 {
		result = requeueWithin(result, step.requeue)
	}
	return result, nil
}

// applyShards applies the objects every instance has, then each shard's
// disruption budget and StatefulSet, and grows the shards' claims. It
// returns the shards' StatefulSets by index (those being removed too) and
// how many nodes the servers may run on.
func (r *RedisPersistenceReconciler) applyShards(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials, in specs.PodInputs) (map[int]*appsv1.StatefulSet, int, error) {
	statefulSets, err := r.shardStatefulSets(ctx, rp)
	if err != nil {
		return nil, 0, err
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return nil, 0, fmt.Errorf("listing nodes: %w", err)
	}
	template := specs.PodTemplate(rp, r.Options, in)
	eligible := eligibleNodes(nodes.Items, &template.Spec)
	if err := r.applyObjects(ctx, rp, creds); err != nil {
		return nil, 0, err
	}
	for _, pdb := range specs.ShardPodDisruptionBudgets(rp) {
		if err := r.Patch(ctx, pdb, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
			return nil, 0, fmt.Errorf("applying PodDisruptionBudget %s: %w", pdb.Name, err)
		}
	}
	for i := range specs.Shards(rp) {
		in := in
		in.AntiAffinity = specs.PodAntiAffinityFor(rp, eligible, statefulSets[i])
		sts := specs.ShardStatefulSet(rp, r.Options, in, i)
		if rp.SwitchesOverOnUpdate() {
			// One server at a time, the primary last, after a failover to a
			// replica (redispersistence_cluster_rollout.go).
			roll := &shardRoller{r: r, rp: rp, creds: creds.server, shard: i}
			partition, err := r.partitionToRun(ctx, rp, statefulSets[i], rolloutOriginOf(sts, statefulSets[i]) != noRollout, roll)
			if err != nil {
				return nil, 0, err
			}
			sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition}
		}
		r.keepClaimTemplate(rp, sts, statefulSets[i])
		if err := r.Patch(ctx, sts, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
			r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApply", "applying StatefulSet %s: %v", sts.Name, err)
			return nil, 0, fmt.Errorf("applying StatefulSet %s: %w", sts.Name, err)
		}
		statefulSets[i] = sts
	}
	return statefulSets, eligible, r.reportVolumeSize(ctx, rp)
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
