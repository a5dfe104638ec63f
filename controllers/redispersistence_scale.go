package controllers

// Scaling a replicated instance restarts nothing. The server count is in no
// pod template (the start scripts find the servers by name, lookups.sh), so
// a scale out only adds pods: each new server starts as a replica of the
// primary the Sentinels name, and the Sentinels learn it from the primary's
// INFO replication, as they learn any replica.
//
// A scale in removes the highest ordinals. While the primary is one of them
// the operator keeps the StatefulSet at its size and switches over first
// (redispersistence_switchover.go), passing over the replicas that leave;
// only then does the StatefulSet shrink.
//
// A Sentinel keeps every replica it ever saw and reports a removed one as
// down forever: once a removed server is down and its pod gone, the
// operator resets the Sentinels that list it (SENTINEL RESET), one per
// reconcile, so that the others keep their quorum while it relearns the
// replicas from the primary.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// scaleInStep is what a reconcile does about the servers a scale-in removes.
type scaleInStep int

const (
	// scaleInApply: nothing stands in the way; the StatefulSet takes
	// spec.replicas.
	scaleInApply scaleInStep = iota
	// scaleInHold: the StatefulSet keeps its servers until the primary is
	// known and a switchover is safe.
	scaleInHold
	// scaleInSwitchover: the primary is among the servers removed.
	scaleInSwitchover
)

// decideScaleIn says whether the StatefulSet may go from current servers to
// wanted now. It is pure: view is what the Sentinels and servers said.
func decideScaleIn(current, wanted int32, view replicationView) (scaleInStep, string) {
	if wanted >= current {
		return scaleInApply, ""
	}
	if view.primary == "" {
		return scaleInHold, "the primary is not known (" + view.condition.message + ")"
	}
	if ordinalOf(view.primary) < int(wanted) {
		return scaleInApply, ""
	}
	stays := 0
	for _, s := range view.servers {
		if ordinalOf(s.Pod) >= int(wanted) {
			continue
		}
		if s.Role != v1alpha1.RoleReplica || !s.LinkUp {
			return scaleInHold, fmt.Sprintf("the primary %s is removed and %s, which stays, does not replicate from it yet", view.primary, s.Pod)
		}
		stays++
	}
	if stays == 0 {
		return scaleInHold, fmt.Sprintf("the primary %s is removed and no server that stays replicates from it", view.primary)
	}
	return scaleInSwitchover, fmt.Sprintf("the primary %s is among the servers removed", view.primary)
}

// ordinalOf is a StatefulSet pod's ordinal, -1 for another name.
func ordinalOf(pod string) int {
	n, err := strconv.Atoi(pod[strings.LastIndex(pod, "-")+1:])
	if err != nil {
		return -1
	}
	return n
}

// serversToRun is how many servers the StatefulSet runs this reconcile:
// spec.replicas, or during a scale-in the servers it has while the primary
// is among those removed. It switches over when that is what stands in the
// way.
func (r *RedisPersistenceReconciler) serversToRun(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, existing *appsv1.StatefulSet) (int32, error) {
	wanted := specs.ReplicasOf(rp)
	if existing == nil || ptr.Deref(existing.Spec.Replicas, 1) <= wanted {
		return wanted, nil
	}
	current := *existing.Spec.Replicas
	askCtx, cancel := context.WithTimeout(ctx, replicationBudget)
	view, pods, err := r.observeReplication(askCtx, rp, creds)
	cancel()
	if err != nil {
		return 0, err
	}
	step, why := decideScaleIn(current, wanted, view)
	switch step {
	case scaleInApply:
		return wanted, nil
	case scaleInHold:
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "ScaleInHeld", "keeping %d servers for now: %s", current, why)
		return current, nil
	}
	key := client.ObjectKeyFromObject(rp)
	if wait := r.switchovers.wait(key, time.Now()); wait > 0 {
		log.FromContext(ctx).V(1).Info("the last switchover failed; the next attempt waits", "redispersistence", klogRef(rp), "wait", wait)
		return current, nil
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchingOver", "%s: asking the Sentinels to fail over before the StatefulSet shrinks to %d", why, wanted)
	promoted, err := r.switchOver(ctx, rp, creds, pods, view.primary, "", func(pod string) bool { return ordinalOf(pod) >= int(wanted) })
	r.switchovers.record(key, time.Now(), err)
	if err != nil {
		log.FromContext(ctx).Info("switching over before a scale-in failed", "redispersistence", klogRef(rp), "err", err)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedSwitchover", "keeping %d servers: %v", current, err)
		return current, nil
	}
	if ordinalOf(promoted) >= int(wanted) {
		// A Sentinel that had not read a replica's priority yet promoted
		// one that is removed too: the next reconcile switches over again.
		return current, nil
	}
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchedOver", "the Sentinels promoted %s; %s was primary and is removed by the scale-in", promoted, view.primary)
	return wanted, nil
}

// sentinelPods are rp's Sentinel pods that have an address and are not
// being deleted, by name.
func (r *RedisPersistenceReconciler) sentinelPods(ctx context.Context, rp *v1alpha1.RedisPersistence) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SentinelSelectorLabels(rp))); err != nil {
		return nil, fmt.Errorf("listing the Sentinel pods: %w", err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].Status.PodIP != "" && list.Items[i].DeletionTimestamp.IsZero() {
			pods = append(pods, &list.Items[i])
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, nil
}

// forgetRemovedReplicas resets the first Sentinel that lists a replica that
// is down and removed (SENTINEL RESET): it relearns the replicas from the
// primary's INFO and the other Sentinels from their hellos. One Sentinel per
// reconcile, and only while the primary is confirmed, so that the others
// keep their quorum, and every replica replicates from it.
func (r *RedisPersistenceReconciler) forgetRemovedReplicas(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, pods []corev1.Pod, view replicationView) error {
	if view.primary == "" {
		return nil
	}
	for _, s := range view.servers {
		if s.Role == v1alpha1.RoleReplica && !s.LinkUp {
			// A Sentinel relearns the replicas from the primary's INFO:
			// one that does not replicate from it yet (it still follows
			// the old primary, which a Sentinel has not told it to leave)
			// would be forgotten, and never pointed at the primary.
			return nil
		}
	}
	sentinels, err := r.sentinelPods(ctx, rp)
	if err != nil {
		return err
	}
	for _, sentinel := range sentinels {
		if busy, err := failingOver(ctx, r.SentinelAddress(sentinel), creds, rp.Name, view.primaryAddr); err != nil || busy {
			// A reset in the middle of a failover (a switchover a moment
			// ago) throws the failover away and the Sentinel back to the
			// primary it started from.
			continue
		}
		replicas, err := sentinelReplicas(ctx, r.SentinelAddress(sentinel), creds, rp.Name)
		if err != nil {
			log.FromContext(ctx).V(1).Info("asking a Sentinel for its replicas failed", "pod", klogRef(sentinel), "err", err)
			continue
		}
		for _, replica := range replicas {
			addr := replica["name"]
			if !strings.Contains(replica["flags"], "s_down") || !removedReplica(rp, pods, addr, r.ServerAddress) {
				continue
			}
			if err := serverDo(ctx, r.SentinelAddress(sentinel), creds, "SENTINEL", "RESET", rp.Name); err != nil {
				return fmt.Errorf("SENTINEL RESET on %s: %w", sentinel.Name, err)
			}
			r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SentinelReset", "%s listed %s, a replica that is down and no server of the instance any more: it relearns the replicas from the primary", sentinel.Name, addr)
			return nil
		}
	}
	return nil
}

// removedReplica says whether the replica a Sentinel lists at addr is gone
// for good. One named by its pod's host name (as the servers announce
// themselves) is when a scale-in took its ordinal, not while its pod is
// replaced; one named otherwise when no server pod that stays is at its
// address.
func removedReplica(rp *v1alpha1.RedisPersistence, pods []corev1.Pod, addr string, serverAddress func(*corev1.Pod) string) bool {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if pod, ok := podOfHost(rp, host); ok {
			return ordinalOf(pod) >= int(specs.ReplicasOf(rp))
		}
	}
	var staying []corev1.Pod
	for i := range pods {
		if pods[i].DeletionTimestamp.IsZero() {
			staying = append(staying, pods[i])
		}
	}
	_, known := podOfAddress(rp, staying, addr, serverAddress)
	return !known
}

// sentinelReplicas is SENTINEL REPLICAS: each replica a Sentinel knows, as
// its fields (name is host:port; flags say s_down when it is down).
func sentinelReplicas(ctx context.Context, addr string, creds serverCredentials, name string) ([]map[string]string, error) {
	c := dialServer(addr, creds)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	reply, err := c.Do(ctx, "SENTINEL", "REPLICAS", name).Slice()
	if err != nil {
		return nil, err
	}
	replicas := make([]map[string]string, 0, len(reply))
	for _, entry := range reply {
		replicas = append(replicas, sentinelFields(entry))
	}
	return replicas, nil
}

// failingOver says whether the Sentinel at addr is in the middle of a
// failover of name, or names another primary than primaryAddr (host:port).
func failingOver(ctx context.Context, addr string, creds serverCredentials, name, primaryAddr string) (bool, error) {
	c := dialServer(addr, creds)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	reply, err := c.Do(ctx, "SENTINEL", "MASTER", name).Result()
	if err != nil {
		return false, err
	}
	fields := sentinelFields(reply)
	return strings.Contains(fields["flags"], "failover_in_progress") || net.JoinHostPort(fields["ip"], fields["port"]) != primaryAddr, nil
}

// sentinelFields are the fields of one instance in a Sentinel's reply.
func sentinelFields(entry any) map[string]string {
	fields := map[string]string{}
	switch e := entry.(type) {
	case map[any]any: // RESP3
		for k, v := range e {
			fields[fmt.Sprint(k)] = fmt.Sprint(v)
		}
	case []any: // RESP2: field, value, ...
		for i := 0; i+1 < len(e); i += 2 {
			fields[fmt.Sprint(e[i])] = fmt.Sprint(e[i+1])
		}
	}
	return fields
}

// serverDo sends one command to the server or Sentinel at addr and reads
// its reply, bounded by serverRequestTimeout.
func serverDo(ctx context.Context, addr string, creds serverCredentials, args ...string) error {
	c := dialServer(addr, creds)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = a
	}
	return c.Do(ctx, cmd...).Err()
}
