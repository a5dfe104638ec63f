package controllers

// Rolling a shard without restarting its primary: each shard's StatefulSet
// rolls as a replicated instance's does (redispersistence_rollout.go), one
// server at a time under a partition, the primary last; when the primary's
// turn comes, a replica of the shard takes over with CLUSTER FAILOVER (the
// manual failover: the primary stops its clients, the replica catches up
// with its offset, then takes the slots and a new epoch, and the old primary
// becomes its replica). Clients that send a key to the old primary are
// redirected (MOVED). The operator never promotes by itself: the replica
// asks the cluster, which agrees or not.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// shardFailoverWait bounds the wait for a replica to take over after CLUSTER
// FAILOVER: a manual failover the cluster does not complete within 5 s
// (CLUSTER_MF_TIMEOUT) is abandoned, and the primary's clients go on.
const shardFailoverWait = 10 * time.Second

// shardRoller rolls one shard's servers.
type shardRoller struct {
	r     *RedisPersistenceReconciler
	rp    *v1alpha1.RedisPersistence
	creds serverCredentials
	shard int
	// pods are the shard's pods by ordinal, as observe read them.
	pods map[int]*corev1.Pod
}

// observe reads each of the shard's servers: the primary is the one that
// serves the shard's slots; a replica replicates while its link is up.
func (s *shardRoller) observe(ctx context.Context, updateRevision string) (map[int]rollingServer, int, error) {
	var list corev1.PodList
	if err := s.r.List(ctx, &list, client.InNamespace(s.rp.Namespace), client.MatchingLabels(specs.ShardSelectorLabels(s.rp, s.shard))); err != nil {
		return nil, 0, fmt.Errorf("listing shard %d's pods: %w", s.shard, err)
	}
	s.pods = map[int]*corev1.Pod{}
	servers := map[int]rollingServer{}
	primary := -1
	for i := range list.Items {
		pod := &list.Items[i]
		ordinal := ordinalOf(pod.Name)
		if ordinal < 0 {
			continue
		}
		s.pods[ordinal] = pod
		p := rollingServer{
			updated: pod.Labels[appsv1.ControllerRevisionHashLabelKey] == updateRevision,
			ready:   podReady(pod) && pod.DeletionTimestamp.IsZero(),
		}
		if p.ready && pod.Status.PodIP != "" {
			self, linkUp, err := s.readNode(ctx, pod)
			switch {
			case err != nil:
				log.FromContext(ctx).V(1).Info("reading a shard's server for its rollout failed", "pod", klogRef(pod), "err", err)
			case self.Primary && len(self.Slots) > 0:
				p.replicating, primary = true, ordinal
			case !self.Primary:
				p.replicating = linkUp
			}
		}
		servers[ordinal] = p
	}
	return servers, primary, nil
}

// readNode is the server's node as it sees itself, and whether its link to
// its primary is up.
func (s *shardRoller) readNode(ctx context.Context, pod *corev1.Pod) (cluster.Node, bool, error) {
	c := dialServer(s.r.ServerAddress(pod), s.creds)
	defer func() { _ = c.Close() }()
	askCtx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	_, self, replication, err := readClusterNode(askCtx, c)
	if err != nil {
		return cluster.Node{}, false, err
	}
	return *self, infoField(replication, "master_link_status") == "up", nil
}

// switchOver has a replica of the shard that replicates, one on the new
// template when there is one, take over with CLUSTER FAILOVER, and waits
// until it serves the shard's slots.
func (s *shardRoller) switchOver(ctx context.Context, servers map[int]rollingServer, primary int, why string) error {
	r, rp := s.r, s.rp
	candidate := -1
	for ordinal, p := range servers {
		if ordinal == primary || !p.ready || !p.replicating {
			continue
		}
		if candidate < 0 || p.updated && !servers[candidate].updated || p.updated == servers[candidate].updated && ordinal > candidate {
			candidate = ordinal
		}
	}
	from := specs.ShardName(rp, s.shard) + "-" + strconv.Itoa(primary)
	if candidate < 0 {
		err := fmt.Errorf("no replica of shard %d replicates", s.shard)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedSwitchover", "the primary %s keeps running on its template for now: %v", from, err)
		return err
	}
	to := s.pods[candidate]
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchingOver", "rolling shard %d onto a new pod template: %s; asking %s to take over (CLUSTER FAILOVER) before it restarts", s.shard, why, to.Name)
	began := time.Now()
	addr := r.ServerAddress(to)
	err := serverDo(ctx, addr, s.creds, "CLUSTER", "FAILOVER")
	if err == nil {
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, shardFailoverWait, true, func(ctx context.Context) (bool, error) {
			self, _, err := s.readNode(ctx, to)
			return err == nil && self.Primary && len(self.Slots) > 0, nil
		})
		if err != nil {
			err = fmt.Errorf("%s did not take over within %s", to.Name, shardFailoverWait)
		}
	}
	if err != nil {
		log.FromContext(ctx).Info("switching over before a shard's primary restarts failed", "redispersistence", klogRef(rp), "shard", s.shard, "err", err)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedSwitchover", "the primary %s keeps running on its template for now: %v", from, err)
		return err
	}
	log.FromContext(ctx).Info("switchover", "redispersistence", klogRef(rp), "shard", s.shard, "from", from, "to", to.Name, "took", time.Since(began).Round(time.Millisecond))
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchedOver", "%s took over shard %d; %s was primary and restarts on the new pod template", to.Name, s.shard, from)
	return nil
}
