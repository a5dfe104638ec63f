package controllers

// Scaling a replicated instance restarts nothing. The server count is in no
// pod template (the start scripts find the servers by name, lookups.sh), so
// a scale out only adds pods: each new server starts as a replica of the
// primary the Sentinels name, and the Sentinels learn it from the primary's
// INFO replication, as they learn any replica.
//
// A scale in removes the highest ordinals. While the primary is one of them
// the operator keeps the StatefulSet at its size and switches over first,
// through the Sentinels (SENTINEL FAILOVER): it never promotes a server
// itself. So that nothing acknowledged is lost and no writer reaches a
// server that is leaving:
//
//  1. the replicas being removed get replica-priority 0, so that a Sentinel
//     which has read it never promotes one;
//  2. the primary stops taking writes (CLIENT PAUSE WRITE, bounded by
//     switchoverPause) and every replica that replicates catches up with it;
//     a switchover waits while a replica that stays does not replicate;
//  3. a Sentinel fails over and the operator waits until the Sentinels agree
//     on a primary that confirms it; any candidate held every write;
//  4. the old primary is made a replica of the new one at once (REPLICAOF;
//     a Sentinel would do it only seconds later, and the pause blocks its
//     commands), then let go (CLIENT UNPAUSE): the writes it held are
//     refused as a replica's, never acknowledged by a server that is going.
//
// Only then does the StatefulSet shrink. A Sentinel keeps every replica it
// ever saw and reports a removed one as down forever: once a removed server
// is down and its pod gone, the operator resets the Sentinels that list it
// (SENTINEL RESET), one per reconcile, so that the others keep their quorum
// while it relearns the replicas from the primary.

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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

const (
	// switchoverPause bounds how long the old primary holds writes; the
	// operator lets them go as soon as it is a replica.
	switchoverPause = 10 * time.Second
	// switchoverCatchUp bounds the wait for the replicas to hold every
	// write the paused primary took.
	switchoverCatchUp = 3 * time.Second
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
	r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchingOver", "%s: asking the Sentinels to fail over before the StatefulSet shrinks to %d", why, wanted)
	promoted, err := r.switchOver(ctx, rp, creds, pods, view.primary, wanted)
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

// switchOver hands the primary role from primary to a server that stays,
// through the Sentinels, as the file comment describes, and returns the
// pod the Sentinels promoted.
func (r *RedisPersistenceReconciler) switchOver(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, pods []corev1.Pod, primary string, wanted int32) (string, error) {
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		if pods[i].Status.PodIP != "" && pods[i].DeletionTimestamp.IsZero() {
			byName[pods[i].Name] = &pods[i]
		}
	}
	old := byName[primary]
	if old == nil {
		return "", fmt.Errorf("the primary's pod %s has no address", primary)
	}
	var replicas []*corev1.Pod
	for name, pod := range byName {
		if name == primary {
			continue
		}
		if ordinalOf(name) >= int(wanted) {
			// One that does not answer is no candidate of the Sentinels either.
			if err := serverDo(ctx, r.ServerAddress(pod), creds, "CONFIG", "SET", "replica-priority", "0"); err != nil {
				log.FromContext(ctx).Info("setting replica-priority 0 on a server the scale-in removes failed", "pod", klogRef(pod), "err", err)
			}
		}
		replicas = append(replicas, pod)
	}

	oldAddr := r.ServerAddress(old)
	if err := serverDo(ctx, oldAddr, creds, "CLIENT", "PAUSE", strconv.FormatInt(switchoverPause.Milliseconds(), 10), "WRITE"); err != nil {
		return "", fmt.Errorf("pausing the writes of %s: %w", primary, err)
	}
	// Whatever happens next, the old primary takes writes again only as a
	// replica, or once the pause ends.
	defer func() {
		if err := serverDo(context.WithoutCancel(ctx), oldAddr, creds, "CLIENT", "UNPAUSE"); err != nil {
			log.FromContext(ctx).Info("CLIENT UNPAUSE failed; the pause ends by itself", "pod", primary, "err", err)
		}
	}()
	if err := r.waitForCatchUp(ctx, creds, oldAddr, replicas); err != nil {
		return "", err
	}
	if err := r.askSentinelsToFailOver(ctx, rp, creds); err != nil {
		return "", err
	}

	var promoted, promotedAddr string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, switchoverPause-switchoverCatchUp, true, func(ctx context.Context) (bool, error) {
		askCtx, cancel := context.WithTimeout(ctx, replicationBudget)
		defer cancel()
		view, _, err := r.observeReplication(askCtx, rp, creds)
		if err != nil || view.primary == "" || view.primary == primary {
			return false, nil
		}
		promoted, promotedAddr = view.primary, view.primaryAddr
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("the Sentinels did not agree on a new primary within %s", switchoverPause-switchoverCatchUp)
	}
	host, port, err := net.SplitHostPort(promotedAddr)
	if err == nil {
		err = serverDo(ctx, oldAddr, creds, "REPLICAOF", host, port)
	}
	if err != nil {
		// The Sentinels convert it in seconds; until then it holds writes.
		log.FromContext(ctx).Info("making the old primary a replica failed; the Sentinels will", "pod", primary, "err", err)
	}
	return promoted, nil
}

// waitForCatchUp waits until every replica that replicates holds every
// write the paused primary at primaryAddr took.
func (r *RedisPersistenceReconciler) waitForCatchUp(ctx context.Context, creds serverCredentials, primaryAddr string, replicas []*corev1.Pod) error {
	primary, err := readReplicationInfo(ctx, primaryAddr, creds)
	if err != nil {
		return fmt.Errorf("reading the paused primary's offset: %w", err)
	}
	behind := ""
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, switchoverCatchUp, true, func(ctx context.Context) (bool, error) {
		for _, pod := range replicas {
			info, err := readReplicationInfo(ctx, r.ServerAddress(pod), creds)
			if err != nil || !info.linkUp {
				continue // not replicating: a Sentinel does not promote it
			}
			if info.offset < primary.offset {
				behind = pod.Name
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not catch up with the paused primary within %s", behind, switchoverCatchUp)
	}
	return nil
}

// askSentinelsToFailOver asks the Sentinels, one after the other, until one
// starts a failover or says one is under way.
func (r *RedisPersistenceReconciler) askSentinelsToFailOver(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials) error {
	sentinels, err := r.sentinelPods(ctx, rp)
	if err != nil {
		return err
	}
	var errs []string
	for _, pod := range sentinels {
		err := serverDo(ctx, r.SentinelAddress(pod), creds, "SENTINEL", "FAILOVER", rp.Name)
		if err == nil || strings.HasPrefix(err.Error(), "INPROG") {
			return nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", pod.Name, err))
	}
	return fmt.Errorf("no Sentinel started a failover (%s)", strings.Join(errs, "; "))
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
// keep their quorum.
func (r *RedisPersistenceReconciler) forgetRemovedReplicas(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, pods []corev1.Pod, view replicationView) error {
	if view.primary == "" {
		return nil
	}
	sentinels, err := r.sentinelPods(ctx, rp)
	if err != nil {
		return err
	}
	for _, sentinel := range sentinels {
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
		replicas = append(replicas, fields)
	}
	return replicas, nil
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
