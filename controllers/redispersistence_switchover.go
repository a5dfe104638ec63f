package controllers

// A switchover hands the primary role of a replicated instance to another
// server while the primary still runs: before a scale-in removes it
// (redispersistence_scale.go) and before a rolling change restarts it
// (redispersistence_rollout.go). It goes through the Sentinels (SENTINEL
// FAILOVER): the operator never promotes a server itself. So that nothing
// acknowledged is lost and no writer keeps writing to the old primary:
//
//  1. the replicas the caller passes over (leaving with a scale-in, or not
//     restarted yet by a rollout) get replica-priority 0, so that a
//     Sentinel which has read it never promotes one;
//  2. the primary stops taking writes (CLIENT PAUSE WRITE, bounded by
//     switchoverPause) and every replica that replicates catches up with it;
//  3. a Sentinel fails over and the operator waits until the Sentinels agree
//     on a primary that confirms it; any candidate held every write;
//  4. the old primary is made a replica of the new one at once (REPLICAOF;
//     a Sentinel would do it only seconds later, and the pause blocks its
//     commands), its clients are let go so that they reconnect, the role
//     labels the Service <name> selects by move to the new primary, and
//     the other replicas are pointed at it as the Sentinel does;
//  5. the old primary is let go (CLIENT UNPAUSE): the writes it held are
//     refused as a replica's, never acknowledged by a server that is going.
//
// Writers see one pause: from CLIENT PAUSE until the old primary is a
// replica and they reconnect to the new one, through the Service once its
// endpoints follow the labels. The log line "switchover" gives the time
// from the pause to each step.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

const (
	// switchoverPause bounds how long the old primary holds writes; the
	// operator lets them go as soon as it is a replica.
	switchoverPause = 10 * time.Second
	// switchoverCatchUp bounds the wait for the replicas to hold every
	// write the paused primary took.
	switchoverCatchUp = 3 * time.Second
	// switchoverRound bounds each look at the Sentinels and servers while
	// the writes are paused: one that does not answer within it (down, or
	// its address unreachable, a dial that times out after seconds) counts
	// as no answer, as it would if it were down, instead of stretching the
	// pause every writer sees.
	switchoverRound = 250 * time.Millisecond
	// switchoverRetry and switchoverRetryMax space the attempts at a
	// switchover that failed (switchoverBackoff).
	switchoverRetry    = 15 * time.Second
	switchoverRetryMax = 5 * time.Minute
)

// switchoverBackoff spaces the attempts at a switchover that failed. Each
// attempt pauses the primary's writes (up to switchoverPause); one that
// failed for a reason that lasts (a replica that never catches up, Sentinels
// that do not agree) would otherwise pause them again at every reconcile,
// every replicationResync. The first retry waits switchoverRetry, each next
// one twice as long, at most switchoverRetryMax; a switchover that succeeds
// forgets the failures. The callers check it before they announce an
// attempt. It runs on real time, as the INFO rate limit does, also where a
// test fixes the reconciler's Clock.
type switchoverBackoff struct {
	mu     sync.Mutex
	failed map[types.NamespacedName]failedSwitchovers
}

type failedSwitchovers struct {
	count int
	last  time.Time
}

// wait is how long key's next switchover must wait, 0 for none.
func (b *switchoverBackoff) wait(key types.NamespacedName, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.failed[key]
	if !ok {
		return 0
	}
	delay := switchoverRetry << min(f.count-1, 10)
	return max(min(delay, switchoverRetryMax)-now.Sub(f.last), 0)
}

// record notes how key's switchover at now ended.
func (b *switchoverBackoff) record(key types.NamespacedName, now time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil {
		delete(b.failed, key)
		return
	}
	if b.failed == nil {
		b.failed = map[types.NamespacedName]failedSwitchovers{}
	}
	b.failed[key] = failedSwitchovers{count: b.failed[key].count + 1, last: now}
}

// forget drops what it knows of key (the instance is gone), its shards'
// StatefulSets' (<name>-s<i>) too.
func (b *switchoverBackoff) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.failed {
		shard, isShard := strings.CutPrefix(k.Name, key.Name+"-s")
		if _, err := strconv.Atoi(shard); k == key || k.Namespace == key.Namespace && isShard && err == nil {
			delete(b.failed, k)
		}
	}
}

// errSentinelsNotReady: a switchover to a named replica does not pause the
// writes while a Sentinel may still promote another.
var errSentinelsNotReady = errors.New("the Sentinels have not read the replica priorities")

// switchOver hands the primary role from primary to another server,
// through the Sentinels, as the file comment describes, and returns the
// pod the Sentinels promoted. passOver names the replicas that must not be
// promoted (they get replica-priority 0). target is the replica asked for,
// "" for any: with a target, the writes are paused only once every Sentinel
// lists it as promotable and has read the others' priorities, else the error
// wraps errSentinelsNotReady; without, switchOver goes on after
// switchoverSentinelsRead all the same, as it did before it waited.
func (r *RedisPersistenceReconciler) switchOver(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, pods []corev1.Pod, primary, target string, passOver func(pod string) bool) (promoted string, err error) {
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
	r.announcePhase(ctx, rp, v1alpha1.PhaseSwitchingOver)
	var replicas []*corev1.Pod
	for name, pod := range byName {
		if name != primary {
			replicas = append(replicas, pod)
		}
	}
	if r.passOverReplicas(ctx, creds, replicas, passOver) > 0 || target != "" {
		// A Sentinel reads its replicas' INFO every 10 s: one that has not
		// read the priorities yet may promote a server passed over, and the
		// writes would be paused for a second switchover. The writes go on
		// while it waits.
		if err := r.waitForSentinelsToPassOver(ctx, rp, creds, pods, target, passOver); err != nil && target != "" {
			return "", fmt.Errorf("%w: %w", errSentinelsNotReady, err)
		} else if err != nil {
			log.FromContext(ctx).Info("the Sentinels have not read every replica-priority 0; switching over all the same", "redispersistence", klogRef(rp), "err", err)
		}
	}

	oldAddr := r.ServerAddress(old)
	took := switchoverTimes{began: time.Now()}
	if err := serverDo(ctx, oldAddr, creds, "CLIENT", "PAUSE", strconv.FormatInt(switchoverPause.Milliseconds(), 10), "WRITE"); err != nil {
		return "", fmt.Errorf("pausing the writes of %s: %w", primary, err)
	}
	// Whatever happens next, the old primary takes writes again only as a
	// replica, or once the pause ends.
	defer func() {
		if err := serverDo(context.WithoutCancel(ctx), oldAddr, creds, "CLIENT", "UNPAUSE"); err != nil {
			log.FromContext(ctx).Info("CLIENT UNPAUSE failed; the pause ends by itself", "pod", primary, "err", err)
		}
		took.mark(&took.paused)
		log.FromContext(ctx).Info("switchover", "redispersistence", klogRef(rp), "from", primary, "to", promoted,
			"caughtUp", took.caughtUp, "promoted", took.promoted, "labelled", took.labelled, "paused", took.paused)
	}()
	if err := r.waitForCatchUp(ctx, creds, oldAddr, replicas); err != nil {
		return "", err
	}
	took.mark(&took.caughtUp)
	if err := r.askSentinelsToFailOver(ctx, rp, creds); err != nil {
		return "", err
	}

	var promotedAddr string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, switchoverPause-switchoverCatchUp, true, func(ctx context.Context) (bool, error) {
		askCtx, cancel := context.WithTimeout(ctx, switchoverRound)
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
	took.mark(&took.promoted)
	r.handOver(ctx, rp, creds, pods, replicas, old, promoted, promotedAddr)
	took.mark(&took.labelled)
	return promoted, nil
}

// handOver is a switchover's part once the Sentinels agree on promoted, at
// promotedAddr, while the old primary (the pod old) still holds the writes:
// it makes the old primary and every other replica replicas of the new one,
// lets the old primary's clients go and moves the role labels.
func (r *RedisPersistenceReconciler) handOver(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, pods []corev1.Pod, replicas []*corev1.Pod, old *corev1.Pod, promoted, promotedAddr string) {
	primary, oldAddr := old.Name, r.ServerAddress(old)
	host, port, err := net.SplitHostPort(promotedAddr)
	if err == nil {
		err = serverDo(ctx, oldAddr, creds, "REPLICAOF", host, port)
	}
	// A replica now, the old primary lets its clients go, as a Sentinel does
	// when it reconfigures a server: they (their held writes never ran)
	// reconnect, through the Service, to the new primary, instead of keeping
	// connections that a replica answers with READONLY.
	demoted := err == nil
	if !demoted {
		// The Sentinels convert it in seconds; until then it holds writes.
		log.FromContext(ctx).Info("making the old primary a replica failed; the Sentinels will", "pod", primary, "err", err)
	} else if err := serverDo(ctx, oldAddr, creds, "CLIENT", "KILL", "TYPE", "normal"); err != nil {
		log.FromContext(ctx).Info("closing the old primary's client connections failed; they get READONLY until they reconnect", "pod", primary, "err", err)
	}
	// The Service follows the role labels: moved now, before the writes are
	// let go, a writer that reconnects reaches the new primary as soon as
	// the endpoints follow, not a reconcile later. The old primary, now a
	// replica that refuses writes, keeps its label until the new one has
	// it: a Service that selects no server for a moment refuses every
	// connection until kube-proxy's next sync, one that selects both sends
	// a writer that lands on the replica to try again.
	if err := r.labelRoles(ctx, rp, pods, promoted, demoted); err != nil {
		log.FromContext(ctx).Info("labelling the new primary failed; the next reconcile does", "pod", promoted, "err", err)
	}
	r.followPromoted(ctx, creds, replicas, promoted, host, port)
}

// followPromoted makes every replica but the one promoted a replica of the
// new primary at host:port, as the Sentinel that failed over does. The
// Sentinel's REPLICAOF reaches a server only over a live link: one that
// restarted a moment ago, which it still holds for down, would go on
// replicating the old primary, and, once that one is gone (a scale-in),
// nobody, until a Sentinel reconnected and noticed.
func (r *RedisPersistenceReconciler) followPromoted(ctx context.Context, creds serverCredentials, replicas []*corev1.Pod, promoted, host, port string) {
	for _, pod := range replicas {
		if pod.Name == promoted || host == "" {
			continue
		}
		if err := serverDo(ctx, r.ServerAddress(pod), creds, "REPLICAOF", host, port); err != nil {
			log.FromContext(ctx).Info("making a replica follow the new primary failed; the Sentinels will", "pod", klogRef(pod), "err", err)
		}
	}
}

// switchoverTimes are the times from the pause of a switchover's writes to
// each of its steps, for its log line.
type switchoverTimes struct {
	began                                time.Time
	caughtUp, promoted, labelled, paused time.Duration
}

func (t *switchoverTimes) mark(d *time.Duration) { *d = time.Since(t.began).Round(time.Millisecond) }

// passOverReplicas sets replica-priority 0 on the replicas passOver names,
// so that a Sentinel which has read it never promotes one, and returns how
// many it named.
func (r *RedisPersistenceReconciler) passOverReplicas(ctx context.Context, creds serverCredentials, replicas []*corev1.Pod, passOver func(pod string) bool) int {
	named := 0
	for _, pod := range replicas {
		if !passOver(pod.Name) {
			continue
		}
		named++
		// One that does not answer is no candidate of the Sentinels either.
		if err := serverDo(ctx, r.ServerAddress(pod), creds, "CONFIG", "SET", "replica-priority", "0"); err != nil {
			log.FromContext(ctx).Info("setting replica-priority 0 on a server the Sentinels must not promote failed", "pod", klogRef(pod), "err", err)
		}
	}
	return named
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
		return &replicaBehindError{pod: behind}
	}
	return nil
}

// replicaBehindError: a replica did not hold every write of the paused
// primary within switchoverCatchUp, so no switchover was asked of the
// Sentinels.
type replicaBehindError struct{ pod string }

func (e *replicaBehindError) Error() string {
	return fmt.Sprintf("%s did not catch up with the paused primary within %s", e.pod, switchoverCatchUp)
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

// replicaPriorities are the replica-priority of the servers passOver names,
// by pod, before a switchover sets them to 0; a server that does not answer
// is left out.
func (r *RedisPersistenceReconciler) replicaPriorities(ctx context.Context, creds serverCredentials, pods []corev1.Pod, passOver func(pod string) bool) map[string]string {
	priorities := map[string]string{}
	for i := range pods {
		if pods[i].Status.PodIP == "" || !passOver(pods[i].Name) {
			continue
		}
		c := dialServer(r.ServerAddress(&pods[i]), creds)
		getCtx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
		values, err := c.ConfigGet(getCtx, "replica-priority").Result()
		cancel()
		_ = c.Close()
		if v, ok := values["replica-priority"]; err == nil && ok {
			priorities[pods[i].Name] = v
		}
	}
	return priorities
}

// restorePriorities sets each server's replica-priority back to what
// replicaPriorities read.
func (r *RedisPersistenceReconciler) restorePriorities(ctx context.Context, creds serverCredentials, pods []corev1.Pod, priorities map[string]string) {
	for i := range pods {
		v, ok := priorities[pods[i].Name]
		if !ok {
			continue
		}
		if err := serverDo(ctx, r.ServerAddress(&pods[i]), creds, "CONFIG", "SET", "replica-priority", v); err != nil {
			log.FromContext(ctx).Info("setting replica-priority back failed; the server has it again when it restarts", "pod", klogRef(&pods[i]), "err", err)
		}
	}
}
