package controllers

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// The operator follows the Sentinels' view of a replicated instance; it never
// decides a failover. Each reconcile asks every Sentinel for the primary
// (SENTINEL get-master-addr-by-name), takes the address most of them name,
// and believes it only once that server's INFO replication says role:master.
// Then it labels that pod uringredis.io/role: primary and every other server
// replica, demoting before promoting, so the Service <name> never selects two
// servers. Nothing is kept between reconciles: an operator restarted in the
// middle of a failover reads the same Sentinels and comes to the same labels;
// while the Sentinels disagree or their primary does not confirm, the labels
// stay as they are.

// replicationResync is how often a replicated instance is looked at without
// an event: a failover whose old primary keeps running (a hung process, a
// network partition) changes no Kubernetes object.
const replicationResync = 10 * time.Second

// Reasons of the Replicating condition.
const (
	ReasonReplicating          = "Replicating"
	ReasonSentinelsUnreachable = "SentinelsUnreachable"
	ReasonNoPrimary            = "NoPrimary"
	ReasonPrimaryUnconfirmed   = "PrimaryUnconfirmed"
	ReasonReplicasNotLinked    = "ReplicasNotLinked"
	// ReasonTooFewForAcks: fewer replicas replicate than uring.ackReplicas
	// requires, so the primary refuses writes.
	ReasonTooFewForAcks = "TooFewReplicasForAcks"
)

// replicationInfo is a server's INFO replication.
type replicationInfo struct {
	role   string // master or slave
	offset int64  // master_repl_offset (primary) or slave_repl_offset (replica)
	linkUp bool   // master_link_status:up
}

func replicationInfoFrom(fields map[string]string) replicationInfo {
	info := replicationInfo{role: fields["role"], linkUp: fields["master_link_status"] == "up"}
	key := "master_repl_offset"
	if info.role == "slave" {
		key = "slave_repl_offset"
	}
	info.offset, _ = strconv.ParseInt(fields[key], 10, 64)
	return info
}

// replicationView is what a reconcile learned of a replicated instance.
type replicationView struct {
	// primary is the pod the Sentinels name and that confirms it, or "".
	primary string
	// primaryAddr is where the Sentinels say primary is (host:port).
	primaryAddr string
	servers     []v1alpha1.ReplicaStatus
	condition   condition
}

// sentinelAnswer is one Sentinel's primary, as host:port; "" when it did not answer.
type sentinelAnswer = string

// agreedPrimary is the address most Sentinels name, and whether it is
// unambiguous: a tie (a failover half seen) is no answer.
func agreedPrimary(answers []sentinelAnswer) (addr string, answered int, ok bool) {
	counts := map[string]int{}
	for _, a := range answers {
		if a != "" {
			counts[a]++
			answered++
		}
	}
	best, tie := 0, false
	for a, n := range counts {
		switch {
		case n > best:
			addr, best, tie = a, n, false
		case n == best:
			tie = true
		}
	}
	return addr, answered, best > 0 && !tie
}

// podOfAddress is the server pod behind a Sentinel's host:port: the pod whose
// announced host name it is, or the pod the operator itself reaches there.
func podOfAddress(rp *v1alpha1.RedisPersistence, pods []corev1.Pod, addr string, serverAddress func(*corev1.Pod) string) (string, bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false
	}
	name, isPodHost := podOfHost(rp, host)
	for i := range pods {
		if isPodHost && pods[i].Name == name || pods[i].Status.PodIP != "" && serverAddress(&pods[i]) == addr {
			return pods[i].Name, true
		}
	}
	return "", false
}

// decideReplication turns what the Sentinels and servers said into the
// primary, the per-server status and the Replicating condition. It is pure:
// answers are the Sentinels' (one per Sentinel pod), infos the servers' by
// pod name (missing: no answer).
func decideReplication(rp *v1alpha1.RedisPersistence, pods []corev1.Pod, answers []sentinelAnswer, infos map[string]replicationInfo, serverAddress func(*corev1.Pod) string) replicationView {
	var view replicationView
	addr, answered, agreed := agreedPrimary(answers)
	named, known := "", false
	if agreed {
		named, known = podOfAddress(rp, pods, addr, serverAddress)
	}
	if known && infos[named].role == "master" {
		view.primary, view.primaryAddr = named, addr
	}

	names := make([]string, 0, len(pods))
	for i := range pods {
		names = append(names, pods[i].Name)
	}
	slices.Sort(names)
	primaryOffset := infos[view.primary].offset
	linked := 0
	for _, name := range names {
		st := v1alpha1.ReplicaStatus{Pod: name}
		if info, ok := infos[name]; ok {
			st.Offset = info.offset
			switch info.role {
			case "master":
				st.Role, st.LinkUp = v1alpha1.RolePrimary, true
			case "slave":
				st.Role, st.LinkUp = v1alpha1.RoleReplica, info.linkUp
				if view.primary != "" {
					st.Lag = max(primaryOffset-info.offset, 0)
				}
				if info.linkUp && view.primary != "" {
					linked++
				}
			}
		}
		view.servers = append(view.servers, st)
	}

	want := int(specs.ReplicasOf(rp)) - 1
	switch {
	case answered == 0:
		view.condition = condition{metav1.ConditionFalse, ReasonSentinelsUnreachable, "no Sentinel answered; the server pods keep their role labels"}
	case !agreed:
		view.condition = condition{metav1.ConditionFalse, ReasonNoPrimary, "the Sentinels do not agree on a primary (a failover may be under way); the server pods keep their role labels"}
	case !known:
		view.condition = condition{metav1.ConditionFalse, ReasonNoPrimary, "the Sentinels name a primary that is none of the instance's server pods; the server pods keep their role labels"}
	case view.primary == "":
		view.condition = condition{metav1.ConditionFalse, ReasonPrimaryUnconfirmed, fmt.Sprintf("the Sentinels name %s, which does not report itself primary yet; the server pods keep their role labels", named)}
	case linked < int(ackReplicasOf(rp)):
		view.condition = condition{metav1.ConditionFalse, ReasonTooFewForAcks, fmt.Sprintf("%d of %d replicas replicate from the primary %s and uring.ackReplicas is %d: the primary refuses writes (NOREPLICAS) until %d do", linked, want, view.primary, ackReplicasOf(rp), ackReplicasOf(rp))}
	case linked < want:
		view.condition = condition{metav1.ConditionFalse, ReasonReplicasNotLinked, fmt.Sprintf("%d of %d replicas replicate from the primary %s", linked, want, view.primary)}
	default:
		view.condition = condition{metav1.ConditionTrue, ReasonReplicating, fmt.Sprintf("%s is the primary; %d replicas replicate from it", view.primary, want)}
	}
	return view
}

// ackReplicasOf is spec.uring.ackReplicas, 0 outside mode: uring.
func ackReplicasOf(rp *v1alpha1.RedisPersistence) int32 {
	if rp.Spec.Mode != v1alpha1.ModeUring || rp.Spec.Uring == nil {
		return 0
	}
	return rp.Spec.Uring.AckReplicas
}

// observeReplication asks every Sentinel and every server of a replicated
// instance, all at once, each request bounded by serverRequestTimeout and all
// of them by ctx: a Sentinel or server that does not answer costs this
// reconcile one timeout, and no other instance anything.
func (r *RedisPersistenceReconciler) observeReplication(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials) (replicationView, []corev1.Pod, error) {
	var servers, sentinels corev1.PodList
	if err := r.List(ctx, &servers, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SelectorLabels(rp))); err != nil {
		return replicationView{}, nil, fmt.Errorf("listing the server pods: %w", err)
	}
	if err := r.List(ctx, &sentinels, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SentinelSelectorLabels(rp))); err != nil {
		return replicationView{}, nil, fmt.Errorf("listing the Sentinel pods: %w", err)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := make([]sentinelAnswer, len(sentinels.Items))
	for i := range sentinels.Items {
		pod := &sentinels.Items[i]
		if pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr, err := askSentinel(ctx, r.SentinelAddress(pod), creds, rp.Name)
			if err != nil {
				log.FromContext(ctx).V(1).Info("asking a Sentinel for the primary failed", "pod", klogRef(pod), "err", err)
			}
			answers[i] = addr
		}()
	}
	infos := map[string]replicationInfo{}
	for i := range servers.Items {
		pod := &servers.Items[i]
		if pod.Status.PodIP == "" || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := readReplicationInfo(ctx, r.ServerAddress(pod), creds)
			if err != nil {
				log.FromContext(ctx).V(1).Info("reading INFO replication failed", "pod", klogRef(pod), "err", err)
				return
			}
			mu.Lock()
			infos[pod.Name] = info
			mu.Unlock()
		}()
	}
	wg.Wait()
	return decideReplication(rp, servers.Items, answers, infos, r.ServerAddress), servers.Items, nil
}

// askSentinel returns the primary one Sentinel names, as host:port.
func askSentinel(ctx context.Context, addr string, creds serverCredentials, name string) (string, error) {
	c := dialServer(addr, creds)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	reply, err := c.Do(ctx, "SENTINEL", "get-master-addr-by-name", name).StringSlice()
	if err != nil || len(reply) != 2 {
		return "", err
	}
	return net.JoinHostPort(reply[0], reply[1]), nil
}

func readReplicationInfo(ctx context.Context, addr string, creds serverCredentials) (replicationInfo, error) {
	c := dialServer(addr, creds)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	sections, err := c.InfoMap(ctx, "replication").Result()
	if err != nil {
		return replicationInfo{}, err
	}
	return replicationInfoFrom(sections["Replication"]), nil
}

// labelRoles labels the confirmed primary's pod primary and every other
// server pod replica. It demotes first: for a moment the Service <name> may
// select no server, never two that take writes. promoteFirst, for a caller
// that knows every other server is a replica (they refuse writes), labels
// the primary first: for a moment the Service may select two servers, one
// of which takes writes, never none.
func (r *RedisPersistenceReconciler) labelRoles(ctx context.Context, rp *v1alpha1.RedisPersistence, pods []corev1.Pod, primary string, promoteFirst bool) error {
	if primary == "" {
		return nil
	}
	promote := func() error {
		for i := range pods {
			pod := &pods[i]
			if pod.Name != primary || pod.Labels[specs.LabelRole] == string(v1alpha1.RolePrimary) || !pod.DeletionTimestamp.IsZero() {
				continue
			}
			if err := r.labelRole(ctx, pod, v1alpha1.RolePrimary); err != nil {
				return err
			}
			r.Recorder.Eventf(rp, corev1.EventTypeNormal, "PrimaryLabelled", "the Sentinels' primary is %s: the Service %s selects it", primary, rp.Name)
		}
		return nil
	}
	if promoteFirst {
		if err := promote(); err != nil {
			return err
		}
	}
	for i := range pods {
		if pods[i].Name != primary {
			if err := r.labelRole(ctx, &pods[i], v1alpha1.RoleReplica); err != nil {
				return err
			}
		}
	}
	return promote()
}

// labelRole sets pod's role label, unless it has it already or is being
// deleted.
func (r *RedisPersistenceReconciler) labelRole(ctx context.Context, pod *corev1.Pod, role v1alpha1.ServerRole) error {
	if pod.Labels[specs.LabelRole] == string(role) || !pod.DeletionTimestamp.IsZero() {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, specs.LabelRole, role)
	if err := r.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("labelling pod %s %s: %w", pod.Name, role, err)
	}
	return nil
}

// replicationBudget bounds the requests one reconcile makes to a replicated
// instance's Sentinels and servers, which run in parallel.
const replicationBudget = 2 * serverRequestTimeout

// followSentinels applies the Sentinels' StatefulSet, reads who is primary
// and labels the server pods by role.
func (r *RedisPersistenceReconciler) followSentinels(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, in specs.PodInputs, obs *observation) error {
	sts := specs.SentinelStatefulSet(rp, r.Options, in)
	if err := r.Patch(ctx, sts, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApply", "applying StatefulSet %s: %v", sts.Name, err)
		return fmt.Errorf("applying StatefulSet %s: %w", sts.Name, err)
	}
	askCtx, cancel := context.WithTimeout(ctx, replicationBudget)
	defer cancel()
	view, pods, err := r.observeReplication(askCtx, rp, creds)
	if err != nil {
		return err
	}
	if previous := rp.Status.Primary; view.primary != "" && previous != "" && previous != view.primary {
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "FailedOver", "the Sentinels promoted %s; %s was primary", view.primary, previous)
	}
	if err := r.labelRoles(ctx, rp, pods, view.primary, false); err != nil {
		return err
	}
	resetCtx, cancelReset := context.WithTimeout(ctx, replicationBudget)
	defer cancelReset()
	if err := r.forgetRemovedReplicas(resetCtx, rp, creds, pods, view); err != nil {
		return err
	}
	obs.replication = &view
	return nil
}

// replicationObjects are the objects of a replicated instance besides its
// StatefulSets; for a single server it deletes the ones an earlier
// spec.replicas made.
func (r *RedisPersistenceReconciler) replicationObjects(ctx context.Context, rp *v1alpha1.RedisPersistence) ([]client.Object, error) {
	withPolicy := specs.NetworkPolicyEnabled(rp, r.Options.NetworkPolicy)
	if specs.Replicated(rp) {
		objects := []client.Object{specs.ReplicasService(rp), specs.SentinelService(rp)}
		for _, pdb := range specs.PodDisruptionBudgets(rp) {
			objects = append(objects, pdb)
		}
		if withPolicy {
			return append(objects, specs.SentinelNetworkPolicy(rp, r.Options.NetworkPolicy)), nil
		}
		return objects, r.deleteOwned(ctx, rp, &networkingv1.NetworkPolicy{}, specs.SentinelName(rp))
	}
	for _, gone := range []struct {
		obj  client.Object
		name string
	}{
		{&appsv1.StatefulSet{}, specs.SentinelName(rp)},
		{&corev1.Service{}, specs.SentinelName(rp)},
		{&corev1.Service{}, specs.ReplicasServiceName(rp)},
		{&policyv1.PodDisruptionBudget{}, specs.SentinelName(rp)},
		{&policyv1.PodDisruptionBudget{}, rp.Name},
		{&networkingv1.NetworkPolicy{}, specs.SentinelName(rp)},
	} {
		if err := r.deleteOwned(ctx, rp, gone.obj, gone.name); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// deleteOwned deletes the object of obj's kind named name if rp controls it.
func (r *RedisPersistenceReconciler) deleteOwned(ctx context.Context, rp *v1alpha1.RedisPersistence, obj client.Object, name string) error {
	if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, obj); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading %T %s: %w", obj, name, err)
	}
	if !metav1.IsControlledBy(obj, rp) {
		return nil // not ours: left alone
	}
	if err := r.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %T %s: %w", obj, name, err)
	}
	return nil
}

// podOfHost is the pod a server or Sentinel announces itself as: the first
// label of <pod>.<headless domain>.
func podOfHost(rp *v1alpha1.RedisPersistence, host string) (string, bool) {
	pod, domain, ok := strings.Cut(host, ".")
	return pod, ok && domain == specs.HeadlessDomain(rp)
}
