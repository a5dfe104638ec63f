package controllers

// A switchover a person asks for: `kubectl uring switchover`, or the two
// annotations of internal/specs/switchover.go set by hand or by a GitOps
// tool. The operator answers each request once, in status.switchover (the
// request's two values, the result, a reason and a message), with an event:
// SwitchedOver, or a Warning RefusedSwitchover or FailedSwitchover.
//
// Why an answer in the status and not the annotations removed once done: a
// GitOps tool that applies the annotations would put them back, which would
// ask again, a pause of the writes each time; and a person's `kubectl
// annotate` would race the operator's removal. The annotations stay, as
// uringredis.io/restarted-at does; a request whose values the status
// answers is done, and a new requested-at asks again.
//
// The request is taken up before anything else of the reconcile, so that
// the roles, the Service and status.primary follow the new primary in the
// same reconcile:
//
//  1. decideSwitchover (pure) refuses what cannot be met safely before
//     anything is touched: an instance that is not replicated, no primary
//     the Sentinels and the server agree on, a pod that is not a replica of
//     the instance, a replica whose link to the primary is down;
//  2. for a named server, every other replica gets replica-priority 0 and
//     the operator waits until every Sentinel that answers has read it: a
//     Sentinel reads its replicas' INFO every 10 s, and one that has not read
//     the priorities may promote another. The writes are not paused yet;
//  3. switchOver (redispersistence_switchover.go), as a rollout or a
//     scale-in runs it: the writes paused, the replicas caught up with the
//     primary (a replica that does not is a refusal, ReplicaBehind), SENTINEL
//     FAILOVER, the old primary made a replica of the new one;
//  4. the priorities go back to what they were.
//
// An answer is final: a request that failed is not tried again by itself
// (each try pauses the writes), and the backoff of the rollouts' and
// scale-ins' switchovers neither holds nor counts it.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// switchoverSentinelsRead bounds the wait for the Sentinels to read the
// replicas' priorities: their INFO period (10 s) and a margin.
const switchoverSentinelsRead = 12 * time.Second

// Reasons of status.switchover.
const (
	SwitchoverReasonSwitched              = "Switched"
	SwitchoverReasonAlreadyPrimary        = "AlreadyPrimary"
	SwitchoverReasonNotReplicated         = "NotReplicated"
	SwitchoverReasonNoPrimary             = "NoPrimary"
	SwitchoverReasonNotAReplica           = "NotAReplica"
	SwitchoverReasonReplicaNotReplicating = "ReplicaNotReplicating"
	SwitchoverReasonNoReplicaReplicating  = "NoReplicaReplicating"
	SwitchoverReasonReplicaBehind         = "ReplicaBehind"
	SwitchoverReasonNotPromotable         = "NotPromotable"
	SwitchoverReasonSentinelsNotReady     = "SentinelsNotReady"
	SwitchoverReasonPromotedAnother       = "PromotedAnother"
	SwitchoverReasonFailed                = "SwitchoverFailed"
)

// switchoverOutcome is how a request ends: status.switchover's result,
// reason and message, and the primary after it.
type switchoverOutcome struct {
	result  v1alpha1.SwitchoverResult
	reason  string
	message string
	primary string
}

func refused(reason, format string, args ...any) *switchoverOutcome {
	return &switchoverOutcome{result: v1alpha1.SwitchoverRefused, reason: reason, message: fmt.Sprintf(format, args...)}
}

// decideSwitchover says which server a switchover to `to` (a pod, or
// specs.SwitchoverToAny) promotes ("" lets the Sentinels choose), or how
// the request ends without one. view is what the Sentinels and servers
// said; it is not read for an instance that is not replicated. It is pure.
func decideSwitchover(rp *v1alpha1.RedisPersistence, to string, view replicationView) (string, *switchoverOutcome) {
	switch {
	case specs.Sharded(rp):
		return "", refused(SwitchoverReasonNotReplicated, "%s is sharded (spec.cluster): each shard's replicas take over by themselves; a switchover is for an instance of spec.replicas with Sentinels", rp.Name)
	case !specs.Replicated(rp):
		return "", refused(SwitchoverReasonNotReplicated, "%s runs one server (spec.replicas 1): there is no replica to hand the primary role to", rp.Name)
	case view.primary == "":
		return "", refused(SwitchoverReasonNoPrimary, "the primary is not known: %s", view.condition.message)
	}
	var replicas, linked []string
	var asked *v1alpha1.ReplicaStatus
	for i, s := range view.servers {
		if s.Role != v1alpha1.RoleReplica {
			continue
		}
		replicas = append(replicas, s.Pod)
		if s.LinkUp {
			linked = append(linked, s.Pod)
		}
		if s.Pod == to {
			asked = &view.servers[i]
		}
	}
	switch {
	case to == specs.SwitchoverToAny && len(linked) == 0:
		return "", refused(SwitchoverReasonNoReplicaReplicating, "no replica replicates from the primary %s", view.primary)
	case to == specs.SwitchoverToAny:
		return "", nil
	case to == view.primary:
		return "", &switchoverOutcome{result: v1alpha1.SwitchoverSucceeded, reason: SwitchoverReasonAlreadyPrimary,
			message: fmt.Sprintf("%s is the primary already: nothing to do", to), primary: to}
	case asked == nil:
		return "", refused(SwitchoverReasonNotAReplica, "%s is not a replica of %s (its replicas: %s; the primary is %s)", to, rp.Name, orNone(replicas), view.primary)
	case !asked.LinkUp:
		return "", refused(SwitchoverReasonReplicaNotReplicating, "%s's link to the primary %s is down: it does not hold the primary's writes", to, view.primary)
	}
	return to, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// switchOverOnRequest answers the switchover rp's annotations ask for, when
// they ask for one that status.switchover has not answered. Only a failure
// to read the server pods is an error; the request is then taken up again.
func (r *RedisPersistenceReconciler) switchOverOnRequest(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials) error {
	req, pending := specs.SwitchoverRequestOf(rp)
	if !pending {
		return nil
	}
	var view replicationView
	var pods []corev1.Pod
	if specs.Replicated(rp) && !specs.Sharded(rp) {
		askCtx, cancel := context.WithTimeout(ctx, replicationBudget)
		var err error
		view, pods, err = r.observeReplication(askCtx, rp, creds)
		cancel()
		if err != nil {
			return err
		}
	}
	target, outcome := decideSwitchover(rp, req.To, view)
	if outcome == nil {
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchingOver", "asked for with %s=%s: handing the primary role from %s to %s",
			specs.AnnotationSwitchoverTo, req.To, view.primary, cmp.Or(target, "the replica the Sentinels choose"))
		outcome = r.switchOverTo(ctx, rp, creds, pods, view.primary, target)
	}
	log.FromContext(ctx).Info("answered a switchover asked for", "redispersistence", klogRef(rp), "to", req.To, "requestedAt", req.RequestedAt,
		"result", outcome.result, "reason", outcome.reason, "message", outcome.message)
	rp.Status.Switchover = &v1alpha1.SwitchoverStatus{
		To: req.To, RequestedAt: req.RequestedAt,
		Result: outcome.result, Reason: outcome.reason, Message: outcome.message,
		From: view.primary, Primary: outcome.primary,
		FinishedAt: metav1.NewTime(r.Clock.Now()),
	}
	switch outcome.result {
	case v1alpha1.SwitchoverSucceeded:
		r.Recorder.Event(rp, corev1.EventTypeNormal, "SwitchedOver", outcome.message)
		if outcome.primary != "" {
			// The primary the Sentinels now name is the one asked for, not
			// a failover followSentinels would report.
			rp.Status.Primary = outcome.primary
		}
	case v1alpha1.SwitchoverRefused:
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "RefusedSwitchover", "%s: %s", outcome.reason, outcome.message)
	default:
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedSwitchover", "%s: %s", outcome.reason, outcome.message)
	}
	return nil
}

// switchOverTo hands the primary role from primary to target (any replica
// the Sentinels choose when ""), as the file comment describes.
func (r *RedisPersistenceReconciler) switchOverTo(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, pods []corev1.Pod, primary, target string) *switchoverOutcome {
	passOver := func(pod string) bool { return target != "" && pod != target && pod != primary }
	if target != "" {
		if p := r.replicaPriorities(ctx, creds, pods, func(pod string) bool { return pod == target })[target]; p == "0" {
			return refused(SwitchoverReasonNotPromotable, "%s has replica-priority 0: the Sentinels never promote it", target)
		}
	}
	priorities := r.replicaPriorities(ctx, creds, pods, passOver)
	defer r.restorePriorities(context.WithoutCancel(ctx), creds, pods, priorities)
	promoted, err := r.switchOver(ctx, rp, creds, pods, primary, target, passOver)
	var behind *replicaBehindError
	switch {
	case errors.Is(err, errSentinelsNotReady):
		return &switchoverOutcome{result: v1alpha1.SwitchoverFailed, reason: SwitchoverReasonSentinelsNotReady, primary: primary,
			message: fmt.Sprintf("the writes were not paused: %v", err)}
	case errors.As(err, &behind):
		return &switchoverOutcome{result: v1alpha1.SwitchoverRefused, reason: SwitchoverReasonReplicaBehind, primary: primary,
			message: fmt.Sprintf("%v; the writes were paused that long and let go on %s", err, primary)}
	case err != nil:
		return &switchoverOutcome{result: v1alpha1.SwitchoverFailed, reason: SwitchoverReasonFailed, primary: primary, message: err.Error()}
	case target != "" && promoted != target:
		return &switchoverOutcome{result: v1alpha1.SwitchoverFailed, reason: SwitchoverReasonPromotedAnother, primary: promoted,
			message: fmt.Sprintf("the Sentinels promoted %s, not %s; %s was primary and is its replica", promoted, target, primary)}
	}
	return &switchoverOutcome{result: v1alpha1.SwitchoverSucceeded, reason: SwitchoverReasonSwitched, primary: promoted,
		message: fmt.Sprintf("the Sentinels promoted %s; %s was primary and is its replica", promoted, primary)}
}

// waitForSentinelsToPassOver waits until every Sentinel that answers lists
// target as a replica it may promote and reads replica-priority 0 on every
// other replica that is up; with target "", until it reads replica-priority
// 0 on every replica that is up and has it (those passed over).
func (r *RedisPersistenceReconciler) waitForSentinelsToPassOver(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, pods []corev1.Pod, target string, passOver func(pod string) bool) error {
	sentinels, err := r.sentinelPods(ctx, rp)
	if err != nil {
		return err
	}
	why := "no Sentinel answered"
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, switchoverSentinelsRead, true, func(ctx context.Context) (bool, error) {
		answered := 0
		for _, sentinel := range sentinels {
			askCtx, cancel := context.WithTimeout(ctx, switchoverRound)
			replicas, err := sentinelReplicas(askCtx, r.SentinelAddress(sentinel), creds, rp.Name)
			cancel()
			if err != nil {
				continue // one that does not answer starts no failover either
			}
			answered++
			if waiting := sentinelPassesOver(rp, pods, replicas, target, passOver, r.ServerAddress); waiting != "" {
				why = sentinel.Name + " " + waiting
				return false, nil
			}
		}
		return answered > 0, nil
	})
	if err != nil {
		return fmt.Errorf("after %s %s", switchoverSentinelsRead, why)
	}
	return nil
}

// sentinelPassesOver says what a Sentinel whose replicas are replicas
// (SENTINEL REPLICAS) has not read yet for a switchover to target, "" when
// it would promote target and no other. With target "" the servers passed
// over are those passedOver names: "" when it reads replica-priority 0 on
// each that is up.
func sentinelPassesOver(rp *v1alpha1.RedisPersistence, pods []corev1.Pod, replicas []map[string]string, target string, passedOver func(pod string) bool, serverAddress func(*corev1.Pod) string) string {
	listed := false
	for _, replica := range replicas {
		pod, known := podOfAddress(rp, pods, replica["name"], serverAddress)
		down := strings.Contains(replica["flags"], "s_down") || strings.Contains(replica["flags"], "disconnected")
		switch {
		case !known:
		case target != "" && pod == target && down:
			return "sees " + target + " down"
		case target != "" && pod == target:
			listed = true
		case target == "" && !passedOver(pod):
		case !down && replica["slave-priority"] != "0":
			return fmt.Sprintf("reads replica-priority %s on %s", replica["slave-priority"], pod)
		}
	}
	if target != "" && !listed {
		return "does not list " + target + " among the replicas"
	}
	return ""
}
