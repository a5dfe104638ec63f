package controllers

// Staged upgrades.
//
// A pod template changes for one of two reasons. The user changed the
// RedisPersistence (spec.image, the mode, resources, a startup option) or its
// password: that change applies to the instance at once. Or the operator
// changed: its default images (--redis-image, --exporter-image, the seccomp
// profile, how images are pulled) or, in a new operator version, the way it builds pods. A helm
// upgrade does the latter to every instance together; the operator then rolls
// at most --max-concurrent-upgrades instances at a time, each until its pod is
// Ready on the new template, and the others wait with UpToDate=False,
// UpgradePending.
//
// Whose change it is follows from what the StatefulSet records about the
// template it runs (RolloutAnnotations): the hash of that template, the hash
// of the template with the operator's defaults left out, and the
// RedisPersistence generation it was built for. A new template is the
// operator's when the second hash is unchanged (only defaults moved), or when
// it changed while neither the generation nor the password did (a new
// operator version builds pods differently). Everything else is the user's:
// it applies at once and carries a pending operator change along, so the
// server restarts once. (A spec edit that reaches the server without a restart,
// such as a runtime option, leaves an upgrade waiting for its turn; the one
// exception is such an edit made while a new operator version's upgrade waits,
// which the generation cannot tell from a template change: it applies at once.)
//
// A turn is the whole instance's: a sharded instance takes one for all its
// shards' StatefulSets, once every one of them has rolled out, marks them
// all, and holds the turn until the last is Ready on the new template.
//
// Turns are derived from the API, never from memory, so an operator restart
// picks up where the last one stopped: an upgrade in flight is a StatefulSet
// marked uringredis.io/upgrade-started that has not rolled out; instances
// waiting are the Ready RedisPersistences whose UpToDate condition is
// UpgradePending. An instance's first look at an upgrade only announces that
// it waits; upgradeAnnounceDelay later, when the instances the same operator
// change reaches have announced theirs, it may start if fewer than the
// maximum are in flight and no Ready instance waits ahead of it in
// namespace/name order. One decision at a time (upgradeDecisions), each waiting
// until the cache shows the mark it made, so two workers never both take the
// last turn. When an upgrade ends, its StatefulSet event wakes the next
// waiting instances in order (nextUpgrades), not all of them; a waiting
// instance also looks again every resyncInterval. The decisions themselves,
// who goes next and which upgrade holds the others, are internal/upgrade's.
//
// Two rules decide what one instance's trouble does to the others:
//   - An instance that is not Ready when its upgrade comes (unschedulable,
//     crash-looping, rolling a change of its own) takes it at once and holds
//     no turn: it serves nothing a restart could interrupt, and the new
//     template may be what it needs.
//   - An upgrade holds its turn until its pod is Ready on the new template,
//     however long that takes. One that is not Ready after
//     upgrade.ProgressDeadline (a bad image, a lost node) is reported
//     UpgradeStalled, with a warning event, and the instances waiting say they
//     wait for it: no further instance starts, since the next would most
//     likely fail the same way. It ends when the pod becomes Ready (a fix of the
//     instance, or the operator's default set back, which the stalled instance
//     takes at once), or when a person releases it with the annotation
//     uringredis.io/release-upgrade=<its start time> on the instance
//     (specs.AnnotationReleaseUpgrade), which wakes the waiting instances.

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/upgrade"
)

// upgradeAnnounceDelay is how long an instance that announced that its
// upgrade waits looks again: time for the other instances to announce theirs
// (the operator reconciles every instance when it starts), so that the first
// turns, too, go in namespace/name order.
const upgradeAnnounceDelay = 5 * time.Second

// rolloutOrigin is whose change a new pod template carries.
type rolloutOrigin int

const (
	// noRollout: the template is the running one, or there is none running yet.
	noRollout rolloutOrigin = iota
	// userRollout: the RedisPersistence or its password changed it.
	userRollout
	// operatorRollout: the operator's defaults or version changed it.
	operatorRollout
)

// rolloutOriginOf compares the StatefulSet desired with the existing one.
func rolloutOriginOf(desired, existing *appsv1.StatefulSet) rolloutOrigin {
	if existing == nil {
		return noRollout
	}
	want, have := desired.Annotations, existing.Annotations
	switch {
	case have[specs.AnnotationTemplateHash] == want[specs.AnnotationTemplateHash]:
		return noRollout
	case have[specs.AnnotationTemplateHash] == "":
		// Built by an operator from before staged upgrades: upgrading to
		// this one is the operator's change.
		return operatorRollout
	case have[specs.AnnotationSpecTemplateHash] == want[specs.AnnotationSpecTemplateHash]:
		// Only the operator's defaults moved.
		return operatorRollout
	case have[specs.AnnotationGeneration] == want[specs.AnnotationGeneration] && !passwordsChanged(desired, existing) && !restartAsked(desired, existing):
		// Neither the spec nor a password changed: a new operator
		// version builds the template differently.
		return operatorRollout
	}
	return userRollout
}

// restartAsked: the instance's specs.AnnotationRestartedAt changed, which
// changes no generation.
func restartAsked(desired, existing *appsv1.StatefulSet) bool {
	return desired.Spec.Template.Annotations[specs.AnnotationRestartedAt] != existing.Spec.Template.Annotations[specs.AnnotationRestartedAt]
}

// passwordsChanged: the server's password, or its ACL users' (a new Secret
// <name>-acl). The users appearing, as they do under the first operator
// version that makes them, is not a change of their passwords.
func passwordsChanged(desired, existing *appsv1.StatefulSet) bool {
	want, have := desired.Spec.Template.Annotations, existing.Spec.Template.Annotations
	return have[specs.AnnotationAuthHash] != want[specs.AnnotationAuthHash] ||
		have[specs.AnnotationACLHash] != "" && have[specs.AnnotationACLHash] != want[specs.AnnotationACLHash]
}

// upgradeInFlight is when the operator upgrade that sts rolls started, or nil
// when it rolls none: it was never marked, or its pod is Ready on the new
// template.
func upgradeInFlight(sts *appsv1.StatefulSet) *metav1.Time {
	if sts == nil || rolledOut(sts) {
		return nil
	}
	started, err := time.Parse(time.RFC3339, sts.Annotations[specs.AnnotationUpgradeStarted])
	if err != nil {
		return nil
	}
	return ptr.To(metav1.NewTime(started))
}

// earliestUpgrade is when the first operator upgrade in flight among
// statefulSets started (upgradeInFlight), or nil: a sharded instance's
// upgrade is in flight from its first shard marked until its last has rolled
// out.
func earliestUpgrade(statefulSets []*appsv1.StatefulSet) *metav1.Time {
	var first *metav1.Time
	for _, sts := range statefulSets {
		if started := upgradeInFlight(sts); started != nil && (first == nil || started.Before(first)) {
			first = started
		}
	}
	return first
}

// upgradeReleased is true when rp carries the annotation that releases the
// operator upgrade started at started (nil: none in flight).
func upgradeReleased(rp *v1alpha1.RedisPersistence, started *metav1.Time) bool {
	return started != nil && rp.Annotations[specs.AnnotationReleaseUpgrade] == started.UTC().Format(time.RFC3339)
}

// waitsForUpgrade is true for a Ready instance whose last reconcile, of its
// current generation, held an operator upgrade back.
func waitsForUpgrade(rp *v1alpha1.RedisPersistence) bool {
	c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionUpToDate)
	return rp.DeletionTimestamp.IsZero() && c != nil && c.Reason == ReasonUpgradePending && c.ObservedGeneration == rp.Generation &&
		meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionReady)
}

func (r *RedisPersistenceReconciler) maxConcurrentUpgrades() int {
	return max(r.MaxConcurrentUpgrades, 1)
}

// upgradeWait is an operator upgrade held back: the UpToDate condition that
// says why, and when to look again.
type upgradeWait struct {
	condition
	retry time.Duration
}

// upgradeWaitFor is the wait of an upgrade whose turn has not come: it looks
// again after upgradeAnnounceDelay when it has only announced itself, at the
// next resync (or when a turn ends) once it waits its turn.
func upgradeWaitFor(turn upgrade.Turn, announced bool, maxConcurrent int) *upgradeWait {
	retry := resyncInterval
	if !announced {
		retry = upgradeAnnounceDelay
	}
	message := fmt.Sprintf(
		"the operator's new pod template (its default images or version) waits for its turn behind %d other instances: %d upgrading, %d waiting ahead in namespace/name order; the operator upgrades at most %d at a time (--max-concurrent-upgrades)",
		turn.Rolling+turn.Ahead, turn.Rolling, turn.Ahead, maxConcurrent)
	if len(turn.Stalled) > 0 {
		message += fmt.Sprintf(
			". Stalled: %s, whose pod is not Ready on the new template %s after its upgrade started; no other upgrade starts until it is Ready or someone releases it (its UpToDate condition says how)",
			joinKeys(turn.Stalled), upgrade.ProgressDeadline)
	}
	return &upgradeWait{condition{metav1.ConditionFalse, ReasonUpgradePending, message}, retry}
}

func joinKeys(keys []types.NamespacedName) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}

// member is one StatefulSet of an instance: the instance's own, or one
// shard's.
type member struct {
	existing *appsv1.StatefulSet // nil before it is made
	// build renders the StatefulSet from the pod inputs, which carry the
	// upgrade mark and the partition.
	build func(specs.PodInputs) *appsv1.StatefulSet
	// roller moves the partition when rp.SwitchesOverOnUpdate.
	roller roller
}

// applyStatefulSets applies the StatefulSets of rp's members. An operator
// upgrade is one turn for the whole instance: it is taken when every
// existing StatefulSet has rolled out, and marks them all; while it must wait,
// the members it would change stay as they are (a new shard is made all the
// same), and the wait is returned. It returns the StatefulSets as the API
// server has them, in the order of members.
func (r *RedisPersistenceReconciler) applyStatefulSets(ctx context.Context, rp *v1alpha1.RedisPersistence, in specs.PodInputs, members []member) ([]*appsv1.StatefulSet, *upgradeWait, error) {
	origins := make([]rolloutOrigin, len(members))
	upgrading, rolled := false, true
	for i, m := range members {
		in := in
		in.UpgradeStarted = upgradeInFlight(m.existing) // an upgrade keeps its turn until its pods are Ready
		origins[i] = rolloutOriginOf(m.build(in), m.existing)
		upgrading = upgrading || origins[i] == operatorRollout
		rolled = rolled && (m.existing == nil || rolledOut(m.existing))
	}
	var turnAt *metav1.Time
	var held *upgradeWait
	if takesTurn := upgrading && rolled; takesTurn {
		r.upgradeDecisions.Lock()
		defer r.upgradeDecisions.Unlock()
		var err error
		if turnAt, held, err = r.upgradeTurn(ctx, rp); err != nil {
			return nil, nil, err
		}
	}
	applied := make([]*appsv1.StatefulSet, len(members))
	for i, m := range members {
		if held != nil && origins[i] == operatorRollout {
			applied[i] = m.existing
			continue
		}
		in := in
		in.UpgradeStarted = cmp.Or(turnAt, upgradeInFlight(m.existing))
		sts, err := r.applyMember(ctx, rp, in, m, origins[i])
		if err != nil {
			return nil, nil, err
		}
		applied[i] = sts
	}
	switch {
	case turnAt != nil:
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "Upgrading",
			"rolling the pods onto the operator's new pod template (server image %s); the operator upgrades at most %d instances at a time",
			cmp.Or(rp.Spec.Image, r.Options.RedisImage), r.maxConcurrentUpgrades())
		// The next decision reads the fleet from the cache: it must see this turn taken.
		if err := r.waitForUpgradeMarks(ctx, applied); err != nil {
			return nil, nil, err
		}
	case upgrading && held == nil:
		r.Recorder.Event(rp, corev1.EventTypeNormal, "Upgrading",
			"the servers are not all Ready: they take the operator's new pod template at once, without waiting for a turn")
	}
	return applied, held, nil
}

// upgradeTurn decides whether rp's operator upgrade may start now: it
// returns the time its turn starts, or the wait. The caller holds
// upgradeDecisions.
func (r *RedisPersistenceReconciler) upgradeTurn(ctx context.Context, rp *v1alpha1.RedisPersistence) (*metav1.Time, *upgradeWait, error) {
	fleet, err := r.upgradeFleet(ctx)
	if err != nil {
		return nil, nil, err
	}
	announced := waitsForUpgrade(rp)
	turn := fleet.Turn(client.ObjectKeyFromObject(rp), announced)
	if !turn.Start {
		return nil, upgradeWaitFor(turn, announced, fleet.MaxConcurrent), nil
	}
	return ptr.To(metav1.NewTime(turn.At)), nil, nil
}

// applyMember applies one member's StatefulSet, with the partition its
// roller chooses when rp switches over on update.
func (r *RedisPersistenceReconciler) applyMember(ctx context.Context, rp *v1alpha1.RedisPersistence, in specs.PodInputs, m member, origin rolloutOrigin) (*appsv1.StatefulSet, error) {
	if rp.SwitchesOverOnUpdate() {
		// One server at a time, the primary last (redispersistence_rollout.go).
		partition, err := r.partitionToRun(ctx, rp, m.existing, origin != noRollout, m.roller)
		if err != nil {
			return nil, err
		}
		in.Partition = &partition
	}
	sts := m.build(in)
	r.keepClaimTemplate(rp, sts, m.existing)
	if err := r.Patch(ctx, sts, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApply", "applying StatefulSet %s: %v", sts.Name, err)
		return nil, fmt.Errorf("applying StatefulSet %s: %w", sts.Name, err)
	}
	return sts, nil
}

// waitForUpgradeMarks waits until the cache holds every StatefulSet of
// applied with the generation and upgrade mark applied.
func (r *RedisPersistenceReconciler) waitForUpgradeMarks(ctx context.Context, applied []*appsv1.StatefulSet) error {
	for _, sts := range applied {
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			cached := &appsv1.StatefulSet{}
			if err := r.Get(ctx, client.ObjectKeyFromObject(sts), cached); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return cached.Generation >= sts.Generation && cached.Annotations[specs.AnnotationUpgradeStarted] == sts.Annotations[specs.AnnotationUpgradeStarted], nil
		}); err != nil {
			return fmt.Errorf("waiting for the cache to show the upgrade of StatefulSet %s: %w", sts.Name, err)
		}
	}
	return nil
}

// newUpgradeFleet is an upgrade.Fleet with this operator's limit and clock,
// and no instances yet.
func (r *RedisPersistenceReconciler) newUpgradeFleet() upgrade.Fleet {
	return upgrade.Fleet{MaxConcurrent: r.maxConcurrentUpgrades(), Clock: r.Clock}
}

// upgradeFleet is what a turn decision needs to know of every
// RedisPersistence this operator reconciles, read from the cache.
func (r *RedisPersistenceReconciler) upgradeFleet(ctx context.Context) (upgrade.Fleet, error) {
	var instances v1alpha1.RedisPersistenceList
	if err := r.List(ctx, &instances); err != nil {
		return upgrade.Fleet{}, fmt.Errorf("listing RedisPersistences: %w", err)
	}
	var sets appsv1.StatefulSetList
	if err := r.List(ctx, &sets, client.MatchingLabels{specs.LabelManagedBy: specs.FieldOwner}); err != nil {
		return upgrade.Fleet{}, fmt.Errorf("listing StatefulSets: %w", err)
	}
	byInstance := map[types.NamespacedName][]*appsv1.StatefulSet{}
	for i := range sets.Items {
		key := instanceOf(&sets.Items[i])
		byInstance[key] = append(byInstance[key], &sets.Items[i])
	}
	fleet := r.newUpgradeFleet()
	fleet.Instances = make([]upgrade.Instance, 0, len(instances.Items))
	for i := range instances.Items {
		rp := &instances.Items[i]
		if !rp.DeletionTimestamp.IsZero() {
			continue
		}
		key := client.ObjectKeyFromObject(rp)
		in := upgrade.Instance{Key: key, Waiting: waitsForUpgrade(rp)}
		if started := earliestUpgrade(byInstance[key]); started != nil {
			in.Started, in.Released = started.Time, upgradeReleased(rp, started)
		}
		fleet.Instances = append(fleet.Instances, in)
	}
	return fleet, nil
}

// upgradeTurnFreed passes the StatefulSet events that end an operator
// upgrade: its pod became Ready on the new template, the upgrade changed
// nothing the StatefulSet controller rolls (its mark lands on a StatefulSet
// rolled out already), or it went away.
var upgradeTurnFreed = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, oldOK := e.ObjectOld.(*appsv1.StatefulSet)
		updated, newOK := e.ObjectNew.(*appsv1.StatefulSet)
		if !oldOK || !newOK || upgradeInFlight(updated) != nil {
			return false
		}
		_, marked := updated.Annotations[specs.AnnotationUpgradeStarted]
		_, wasMarked := old.Annotations[specs.AnnotationUpgradeStarted]
		return upgradeInFlight(old) != nil || marked && !wasMarked
	},
	DeleteFunc: func(e event.DeleteEvent) bool {
		sts, ok := e.Object.(*appsv1.StatefulSet)
		return ok && upgradeInFlight(sts) != nil
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// upgradeReleaseAnnotated passes the RedisPersistence events that may
// release an upgrade in flight: the release annotation set or changed.
var upgradeReleaseAnnotated = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		release := e.ObjectNew.GetAnnotations()[specs.AnnotationReleaseUpgrade]
		return release != "" && release != e.ObjectOld.GetAnnotations()[specs.AnnotationReleaseUpgrade]
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// instanceOf is the RedisPersistence an object the operator made belongs to.
func instanceOf(obj client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetLabels()[specs.LabelInstance]}
}

// nextUpgrades are the instances a turn that ended makes way for (Fleet.Next).
func (r *RedisPersistenceReconciler) nextUpgrades(ctx context.Context, ended client.Object) []reconcile.Request {
	var list v1alpha1.RedisPersistenceList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing RedisPersistences for an ended upgrade")
		return nil
	}
	fleet := r.newUpgradeFleet()
	for i := range list.Items {
		fleet.Instances = append(fleet.Instances, upgrade.Instance{Key: client.ObjectKeyFromObject(&list.Items[i]), Waiting: waitsForUpgrade(&list.Items[i])})
	}
	next := fleet.Next(instanceOf(ended))
	requests := make([]reconcile.Request, 0, len(next))
	for _, key := range next {
		requests = append(requests, reconcile.Request{NamespacedName: key})
	}
	return requests
}
