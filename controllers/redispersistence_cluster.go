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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// A sharded instance (spec.cluster) goes through the same Reconcile as the
// others: credentials, observe, mode change (every shard's servers write
// their data in the new mode's files first), apply (the shared objects, then
// one StatefulSet and disruption budget per shard through the same upgrade
// turns, claim template and volume growth), runtime options, users and
// certificate, report (storage re-probe included). What only a cluster needs
// is its converge phase (convergeShards), one step of the cluster's life per
// reconcile, each read from the cluster first so that a step cut short (the
// reconcile's deadline, an operator restart) is finished by the next one:
//
//  1. once every server of every shard answers, and none serves a slot, the
//     cluster is formed: MEET, each shard's first server gets an even share
//     of the slots, the others replicate it;
//  2. on a formed cluster, nodes that others record at addresses they left
//     (every pod restarted at once, on new IPs) are introduced again at
//     their new ones, servers it does not know are met, a new shard's
//     first server becomes its primary and the rest replicate it, and a
//     shard's server that replicates no one of its shard is made to;
//  3. shards added (spec.cluster.shards raised) receive their share of the
//     slots, keys and all; shards removed give theirs to the others first,
//     and leave the cluster, StatefulSet and all, only once they serve none
//     and clients have had clusterDrain to follow the moves.
//
// Failover is the cluster's: the operator never promotes, except to hand a
// shard's primary role to a replica before the primary's pod rolls
// (redispersistence_cluster_rollout.go). It reports what the cluster says in
// status.shards and the ClusterHealthy and SlotsCovered conditions.

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

// convergeShards takes the step of the cluster's life it is at
// (convergeCluster), labels the servers' roles, and returns the cluster as
// the step left it.
func (r *RedisPersistenceReconciler) convergeShards(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, statefulSets map[int]*appsv1.StatefulSet) (*clusterObservation, error) {
	stepCtx, cancel := context.WithTimeout(ctx, clusterStepBudget)
	defer cancel()
	view, err := r.observeCluster(stepCtx, rp, creds, statefulSets)
	if err != nil {
		return nil, err
	}
	step, err := r.convergeCluster(stepCtx, rp, r.clusterAdmin(ctx, rp, creds), view)
	if err != nil {
		log.FromContext(ctx).Info("cluster step failed", "redispersistence", klogRef(rp), "err", err)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "ClusterStepFailed", "%v", err)
	}
	if step.changed {
		// Report what the step left, not what it found.
		if view, err = r.observeCluster(stepCtx, rp, creds, step.statefulSets(view)); err != nil {
			return nil, err
		}
	}
	if err := r.labelClusterRoles(ctx, rp, view); err != nil {
		return nil, err
	}
	return &clusterObservation{view: view, step: step}, nil
}

// clusterObservation is what convergeShards leaves for the status.
type clusterObservation struct {
	view *clusterView
	step clusterStep
}

// shardMembers are a sharded instance's StatefulSets, one per shard of
// spec.cluster.shards, each rolled by its shard's failover.
func (r *RedisPersistenceReconciler) shardMembers(rp *v1alpha1.RedisPersistence, creds serverCredentials, obs *observation) []member {
	var members []member
	for i := range specs.Shards(rp) {
		antiAffinity := specs.PodAntiAffinityFor(rp, obs.eligibleNodes, obs.shards[i])
		members = append(members, member{
			existing: obs.shards[i],
			build: func(in specs.PodInputs) *appsv1.StatefulSet {
				in.AntiAffinity = antiAffinity
				return specs.ShardStatefulSet(rp, r.Options, in, i)
			},
			// One server at a time, the primary last, after a failover to a
			// replica (redispersistence_cluster_rollout.go).
			roller: &shardRoller{r: r, rp: rp, creds: creds, shard: i},
		})
	}
	return members
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
