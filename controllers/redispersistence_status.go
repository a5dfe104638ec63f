package controllers

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/upgrade"
)

// Condition reasons.
const (
	ReasonScheduled         = "Scheduled"
	ReasonNoEligibleNodes   = "NoEligibleNodes"
	ReasonPending           = "Pending"
	ReasonUnschedulable     = "Unschedulable"
	ReasonFilesystemOK      = "FilesystemVerified"
	ReasonFilesystemNotExt4 = "FilesystemNotExt4"
	ReasonFilesystemUnknown = "FilesystemUnknown"
	// StorageReady: a durable mode on a volume whose fdatasync does not reach stable media.
	ReasonWriteBarrierDisabled = "WriteBarrierDisabled"
	ReasonUringActive          = "Active"
	ReasonUringFallback        = "FellBackToPosix"
	ReasonServerUnreachable    = "ServerUnreachable"
	ReasonReady                = "Ready"
	ReasonRolloutInProgress    = "RolloutInProgress"
	ReasonPodNotReady          = "PodNotReady"
	ReasonStorageNotReady      = "StorageNotReady"
	ReasonNotScheduled         = "NotScheduled"
	ReasonApplyFailed          = "ApplyFailed"
	ReasonRestarting           = "Restarting"
	ReasonStable               = "Stable"
	ReasonAuthSecretMissing    = "AuthSecretMissing"
	// A mode change waits for the running server to rewrite or snapshot its data.
	ReasonModeChangeInProgress = "ModeChangeInProgress"
	// A mode change cannot be prepared: the server is not ready or failed.
	ReasonModeChangeBlocked = "ModeChangeBlocked"
	// UpToDate: the running pod template is the one the operator builds.
	ReasonUpToDate = "UpToDate"
	// UpToDate: an upgrade from the operator waits for the ones ahead of it.
	ReasonUpgradePending = "UpgradePending"
	// UpToDate: the instance rolls an upgrade from the operator.
	ReasonUpgrading = "Upgrading"
	// UpToDate: an upgrade from the operator did not become Ready in time.
	ReasonUpgradeStalled = "UpgradeStalled"
)

// observation is everything the status is computed from, gathered by the
// reconciler; the functions below turn it into conditions without a client.
type observation struct {
	eligibleNodes int
	requirement   string
	statefulSet   *appsv1.StatefulSet
	pod           *corev1.Pod // nil until the StatefulSet created it
	node          *corev1.Node
	storage       storageReport // zero until the prepare container reported
	info          *serverInfo   // nil when the server was not asked
	infoErr       error
	// unreachableFor is how long the server's INFO has failed (0 when it
	// answered).
	unreachableFor time.Duration
	modeChange     *condition // set while a mode change holds the old configuration
	configErr      error      // why the runtime options could not be applied this reconcile
	// appliedMode is the mode of the ConfigMap last applied: the mode whose
	// files hold the data, "" for a new instance.
	appliedMode v1alpha1.PersistenceMode
	// upgradePending is set while an operator upgrade waits for its turn.
	upgradePending *condition
	// replication is what the Sentinels and servers of a replicated
	// instance said; nil for a single server.
	replication *replicationView
	// AntiAffinity keeps a replicated instance's servers apart.
	antiAffinity v1alpha1.PodAntiAffinity
	// shards are a sharded instance's StatefulSets by shard index, those
	// of shards being removed too; nil for the others.
	shards map[int]*appsv1.StatefulSet
	// cluster is what a sharded instance's servers said, once
	// convergeShards ran.
	cluster *clusterObservation
}

type condition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

func scheduledCondition(obs observation) condition {
	if obs.pod != nil && obs.pod.Spec.NodeName != "" {
		return condition{metav1.ConditionTrue, ReasonScheduled, "the server pod is bound to an eligible node"}
	}
	if obs.eligibleNodes == 0 {
		return condition{metav1.ConditionFalse, ReasonNoEligibleNodes, "no node satisfies the placement: needs " + obs.requirement}
	}
	if obs.pod != nil {
		for _, c := range obs.pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return condition{metav1.ConditionFalse, ReasonUnschedulable, c.Message}
			}
		}
	}
	return condition{metav1.ConditionFalse, ReasonPending, "waiting for the server pod to be scheduled"}
}

// needsExt4 is true for the modes whose durability this product measures
// on ext4: those that keep an AOF.
func needsExt4(rp *v1alpha1.RedisPersistence) bool { return rp.Spec.Mode.KeepsAOF() }

// uringCondition is nil for modes other than uring.
func uringCondition(rp *v1alpha1.RedisPersistence, obs observation) *condition {
	if rp.Spec.Mode != v1alpha1.ModeUring {
		return nil
	}
	switch {
	case obs.info == nil && obs.infoErr != nil:
		return &condition{metav1.ConditionUnknown, ReasonServerUnreachable, "could not read the server's INFO"}
	case obs.info == nil:
		return &condition{metav1.ConditionUnknown, ReasonPodNotReady, "waiting for the server to be ready"}
	case obs.info.uringActive:
		return &condition{metav1.ConditionTrue, ReasonUringActive, "the append-only file is written through io_uring"}
	}
	reason := obs.info.fallbackReason
	if reason == "" {
		reason = "the server did not report a reason"
	}
	return &condition{metav1.ConditionFalse, ReasonUringFallback, "io_uring is unavailable, the server runs the posix engine: " + reason}
}

func podReady(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// rolledOut is true when the StatefulSet's controller has seen the current
// spec and its one pod runs the current revision.
func rolledOut(sts *appsv1.StatefulSet) bool {
	if sts == nil {
		return false
	}
	s, replicas := sts.Status, ptr.Deref(sts.Spec.Replicas, 1)
	return s.ObservedGeneration >= sts.Generation && s.UpdateRevision != "" &&
		s.CurrentRevision == s.UpdateRevision && s.UpdatedReplicas == replicas && s.ReadyReplicas == replicas
}

func readyCondition(scheduled, storage condition, obs observation) condition {
	switch {
	case obs.modeChange != nil:
		return *obs.modeChange
	case scheduled.status != metav1.ConditionTrue:
		return condition{metav1.ConditionFalse, ReasonNotScheduled, scheduled.message}
	case storage.status == metav1.ConditionFalse:
		return condition{metav1.ConditionFalse, ReasonStorageNotReady, storage.message}
	case !rolledOut(obs.statefulSet):
		return condition{metav1.ConditionFalse, ReasonRolloutInProgress, "waiting for the server pod to run the current configuration"}
	case !podReady(obs.pod):
		return condition{metav1.ConditionFalse, ReasonPodNotReady, "the server pod is not ready"}
	}
	return condition{metav1.ConditionTrue, ReasonReady, "the server is serving"}
}

// degradedWindow is how long after the server container last ended the
// instance counts as Degraded.
const degradedWindow = 10 * time.Minute

// serverContainer is the server container's status in pod, or nil.
func serverContainer(pod *corev1.Pod) *corev1.ContainerStatus {
	if pod == nil {
		return nil
	}
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == specs.ContainerRedis {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// lastTermination is how the server container last ended, from its current
// state when it is down or from its last state, or nil if it never ended.
// In a pod being deleted (a rollout, kubectl scale, kubectl delete) the
// current state is the deletion stopping the server, not a restart: only
// the last state counts.
func lastTermination(cs *corev1.ContainerStatus, podDeleted bool) *v1alpha1.ServerTermination {
	if cs == nil {
		return nil
	}
	t := cs.State.Terminated
	if t == nil || podDeleted {
		t = cs.LastTerminationState.Terminated
	}
	if t == nil {
		return nil
	}
	signal := t.Signal
	if signal == 0 && t.ExitCode > 128 {
		// Runtimes report a process killed by a signal as exit code 128+n.
		signal = t.ExitCode - 128
	}
	return &v1alpha1.ServerTermination{Reason: t.Reason, ExitCode: t.ExitCode, Signal: signal, FinishedAt: t.FinishedAt}
}

// describeTermination says how the server ended, in words a person reads.
func describeTermination(t *v1alpha1.ServerTermination) string {
	switch {
	case t.Reason == "OOMKilled":
		return fmt.Sprintf("the server was OOM-killed (exit code %d): its memory limit is too low for its dataset", t.ExitCode)
	case t.Signal != 0:
		return fmt.Sprintf("the server was killed by signal %d (%s), exit code %d", t.Signal, syscall.Signal(t.Signal), t.ExitCode)
	}
	return fmt.Sprintf("the server exited with code %d (%s)", t.ExitCode, cmp.Or(t.Reason, "no reason given"))
}

// degradedCondition is True while the server restarts: it ended within
// degradedWindow of now, or the kubelet holds it in a crash loop.
func degradedCondition(cs *corev1.ContainerStatus, last *v1alpha1.ServerTermination, now time.Time) condition {
	crashLoop := cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	if last != nil && (crashLoop || now.Sub(last.FinishedAt.Time) < degradedWindow) {
		restarts := int32(0)
		if cs != nil {
			restarts = cs.RestartCount
		}
		return condition{metav1.ConditionTrue, ReasonRestarting,
			fmt.Sprintf("%s; %d restarts in this pod", describeTermination(last), restarts)}
	}
	return condition{metav1.ConditionFalse, ReasonStable, "the server has not restarted in the last 10 minutes"}
}

// upToDateCondition says whether the pod template is the operator's current
// one: pending while an operator upgrade waits for its turn, else from the
// upgrade mark on sts and the release annotation on rp
// (redispersistence_upgrade.go). A stalled upgrade's message names the
// command that releases it: the start time in it stays the same for as long
// as the upgrade is in flight.
func upToDateCondition(pending *condition, rp *v1alpha1.RedisPersistence, statefulSets []*appsv1.StatefulSet, now time.Time) condition {
	if pending != nil {
		return *pending
	}
	started := earliestUpgrade(statefulSets)
	switch {
	case started == nil:
		return condition{metav1.ConditionTrue, ReasonUpToDate, "the pod template is the one the operator builds"}
	case upgradeReleased(rp, started):
		return condition{metav1.ConditionFalse, ReasonUpgradeStalled,
			"the pod is not Ready on the operator's new pod template; released by the " + specs.AnnotationReleaseUpgrade +
				" annotation, the operator's other upgrades go on without it"}
	case !upgrade.Stalled(started.Time, now):
		return condition{metav1.ConditionFalse, ReasonUpgrading,
			"the pod rolls onto the operator's new pod template; the operator's other upgrades wait until it is Ready"}
	}
	at := started.UTC().Format(time.RFC3339)
	return condition{metav1.ConditionFalse, ReasonUpgradeStalled, fmt.Sprintf(
		"the pod is not Ready on the operator's new pod template %s after the upgrade started at %s, and the operator starts no other upgrade until it is: "+
			"see Ready and the pod's events, then fix the cause here or set the operator's previous default back (this instance takes it at once); "+
			"to let the other instances upgrade without this one: kubectl annotate redispersistence -n %s %s %s=%s",
		upgrade.ProgressDeadline, at, rp.Namespace, rp.Name, specs.AnnotationReleaseUpgrade, at)}
}

// reportUpToDate sets UpToDate from the StatefulSets of rp's servers.
func (r *RedisPersistenceReconciler) reportUpToDate(rp *v1alpha1.RedisPersistence, obs observation, statefulSets []*appsv1.StatefulSet) {
	upToDate := upToDateCondition(obs.upgradePending, rp, statefulSets, r.Clock.Now())
	if upToDate.status == metav1.ConditionTrue && obs.cluster != nil {
		upToDate = shardsUpToDate(obs.cluster.view)
	}
	r.reportUpgradeStall(rp, meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionUpToDate), upToDate,
		upgradeReleased(rp, earliestUpgrade(statefulSets)))
	r.setCondition(rp, v1alpha1.ConditionUpToDate, upToDate)
}

// reportUpgradeStall records an event when an operator upgrade becomes
// stalled (it holds every other upgrade back) and when a person releases it.
func (r *RedisPersistenceReconciler) reportUpgradeStall(rp *v1alpha1.RedisPersistence, was *metav1.Condition, now condition, released bool) {
	if now.reason != ReasonUpgradeStalled || was != nil && was.Reason == now.reason && was.Message == now.message {
		return
	}
	if released {
		r.Recorder.Event(rp, corev1.EventTypeNormal, "ReleasedUpgrade", now.message)
		return
	}
	r.Recorder.Event(rp, corev1.EventTypeWarning, "UpgradeStalled", now.message)
}

// runningImage is the image of pod's container name while that container
// runs, "" when the pod has no such container, and not ok when it is not
// known what runs (no pod, or the container is not running).
func runningImage(pod *corev1.Pod, name string) (image string, ok bool) {
	if pod == nil {
		return "", false
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != name {
			continue
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == name && cs.State.Running != nil {
				return c.Image, true
			}
		}
		return "", false
	}
	return "", true
}

// statusPatchTimeout bounds the deferred status patch, which runs on a context
// of its own so that a reconcile that ran out of time still reports why.
const statusPatchTimeout = 10 * time.Second

// patchStatus writes rp's status, observedGeneration only when the reconcile
// succeeded, and returns the reconcile's error, or the patch's when the
// reconcile had none.
// moving is what the reconcile found a served instance going through
// (motionOf).
func (r *RedisPersistenceReconciler) patchStatus(ctx context.Context, rp, original *v1alpha1.RedisPersistence, moving v1alpha1.InstancePhase, reconcileErr error) error {
	if reconcileErr != nil {
		r.setCondition(rp, v1alpha1.ConditionReady, condition{metav1.ConditionFalse, ReasonApplyFailed, "applying the server's objects failed; see the RedisPersistence's events"})
	} else {
		rp.Status.ObservedGeneration = rp.Generation
	}
	summarize(rp, moving)
	exportInstanceMetrics(rp)
	patchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusPatchTimeout)
	defer cancel()
	// The phase is always written: announcePhase may have written another
	// one since original was read.
	base := original.DeepCopy()
	base.Status.Phase = ""
	if err := r.Status().Patch(patchCtx, rp, client.MergeFrom(base)); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "patching status", "redispersistence", klogRef(rp))
		if reconcileErr == nil {
			return err
		}
	}
	return reconcileErr
}

func (r *RedisPersistenceReconciler) updateStatus(rp *v1alpha1.RedisPersistence, obs observation) {
	if specs.Sharded(rp) {
		r.updateClusterStatus(rp, obs)
		return
	}
	r.reportRestarts(rp, obs.pod)
	scheduled := scheduledCondition(obs)
	storage := storageCondition(rp, obs.storage)
	r.setCondition(rp, v1alpha1.ConditionScheduled, scheduled)
	r.setCondition(rp, v1alpha1.ConditionStorageReady, storage)
	if uring := uringCondition(rp, obs); uring != nil {
		r.setCondition(rp, v1alpha1.ConditionUringActive, *uring)
	} else {
		meta.RemoveStatusCondition(&rp.Status.Conditions, v1alpha1.ConditionUringActive)
	}
	r.setCondition(rp, v1alpha1.ConditionReady, readyCondition(scheduled, storage, obs))
	r.setCondition(rp, v1alpha1.ConditionConfigApplied, configAppliedCondition(rp, obs))
	r.reportUpToDate(rp, obs, []*appsv1.StatefulSet{obs.statefulSet})
	if obs.replication != nil {
		r.setCondition(rp, v1alpha1.ConditionReplicating, obs.replication.condition)
	} else {
		meta.RemoveStatusCondition(&rp.Status.Conditions, v1alpha1.ConditionReplicating)
	}

	st := &rp.Status
	st.Endpoint = net.JoinHostPort(specs.ClientHost(rp), strconv.Itoa(specs.RedisPort))
	st.Node, st.KernelVersion = "", ""
	if obs.pod != nil {
		st.Node = obs.pod.Spec.NodeName
	}
	if obs.node != nil {
		st.KernelVersion = obs.node.Status.NodeInfo.KernelVersion
	}
	if obs.storage.filesystem != "" {
		st.Filesystem = obs.storage.filesystem
		r.reportStorage(rp, obs.storage, storage)
	}
	if obs.info != nil {
		st.Engine = obs.info.engine
	}
	st.Primary, st.Replicas, st.PodAntiAffinity = "", nil, obs.antiAffinity
	if obs.replication != nil {
		st.Primary, st.Replicas = obs.replication.primary, obs.replication.servers
	}
	st.Instances, st.ReadyInstances = 0, 0
	if obs.statefulSet != nil {
		// The StatefulSet controller counts Ready pods as the Service and
		// kubectl do; the StatefulSet watch brings every change of it here.
		st.Instances, st.ReadyInstances = obs.statefulSet.Status.Replicas, obs.statefulSet.Status.ReadyReplicas
	}
	if image, ok := runningImage(obs.pod, specs.ContainerRedis); ok {
		st.Image = image
	}
	if image, ok := runningImage(obs.pod, specs.ContainerExporter); ok {
		st.ExporterImage = image
	}
}

// summarize writes the status fields that only restate others, for kubectl
// get and the scale subresource. It runs on every status patch, so they
// follow whatever outcome the reconcile recorded.
func summarize(rp *v1alpha1.RedisPersistence, moving v1alpha1.InstancePhase) {
	st := &rp.Status
	st.Phase = phaseInMotion(phaseOf(st.Conditions), moving, st.Phase)
	// READY is ready of asked for, as kubectl shows Deployments and
	// StatefulSets: right after kubectl scale it shows the new count.
	st.Ready = fmt.Sprintf("%d/%d", st.ReadyInstances, specs.Servers(rp))
	st.Selector = labels.SelectorFromSet(specs.SelectorLabels(rp)).String()
}

// phaseOf sums up the conditions in one word. Ready decides whether the
// instance serves; the reason it does not says whether it waits for something
// outside the operator (Pending), is on its way (Progressing) or needs someone
// (Failed); a serving instance whose other conditions report trouble is
// Degraded.
func phaseOf(conds []metav1.Condition) v1alpha1.InstancePhase {
	ready := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	switch {
	case ready == nil || ready.Status == metav1.ConditionUnknown:
		return v1alpha1.PhaseProgressing
	case ready.Status == metav1.ConditionTrue && impaired(conds):
		return v1alpha1.PhaseDegraded
	case ready.Status == metav1.ConditionTrue:
		return v1alpha1.PhaseReady
	}
	switch ready.Reason {
	case ReasonNotScheduled, ReasonAuthSecretMissing, ReasonTLSSecretMissing, ReasonCertManagerMissing:
		return v1alpha1.PhasePending
	case ReasonStorageNotReady, ReasonTLSSecretInvalid, ReasonApplyFailed, ReasonModeChangeBlocked:
		return v1alpha1.PhaseFailed
	case ReasonPodNotReady:
		// A pod that runs the current configuration and is not ready after
		// its server ended is a server that crashed; a rollout after a crash
		// (RolloutInProgress) is still on its way.
		if meta.IsStatusConditionTrue(conds, v1alpha1.ConditionDegraded) {
			return v1alpha1.PhaseFailed
		}
	}
	return v1alpha1.PhaseProgressing
}

// phaseInMotion is the phase of an instance whose conditions give phase,
// that moving (motionOf) says goes through a scale or a rollout and that
// had the phase previous. What it goes through replaces the phase only for
// an instance that has served since it last needed someone (previous is a
// serving phase, or one of these): a new instance's pods starting are not a
// scale, and a crash that needs someone (Failed) or a wait for something
// outside the operator (Pending) says so whatever else moves.
func phaseInMotion(phase, moving, previous v1alpha1.InstancePhase) v1alpha1.InstancePhase {
	if moving == "" || phase == v1alpha1.PhasePending || phase == v1alpha1.PhaseFailed {
		return phase
	}
	switch previous {
	case v1alpha1.PhaseReady, v1alpha1.PhaseDegraded, v1alpha1.PhaseScaling, v1alpha1.PhaseUpgrading, v1alpha1.PhaseSwitchingOver:
		return moving
	}
	return phase
}

// motion is what a served instance goes through (motionOf, clusterMotion).
func (r *RedisPersistenceReconciler) motion(rp *v1alpha1.RedisPersistence, obs observation) v1alpha1.InstancePhase {
	if obs.cluster != nil {
		return clusterMotion(rp, obs.cluster.view)
	}
	if specs.Sharded(rp) {
		return ""
	}
	return motionOf([]*appsv1.StatefulSet{obs.statefulSet}, specs.Servers(rp), rp.Status.Phase)
}

// motionOf is what an instance goes through that its conditions do not
// name, read from its StatefulSets (one, or one per shard; nil ones are
// skipped) and the pods each should run: PhaseUpgrading while one rolls its
// pods onto a new template, PhaseScaling while one adds or removes pods, ""
// for neither. A step stays named until the pods it started are Ready:
// previous is the phase the instance had.
func motionOf(statefulSets []*appsv1.StatefulSet, want int32, previous v1alpha1.InstancePhase) v1alpha1.InstancePhase {
	var moving v1alpha1.InstancePhase
	for _, sts := range statefulSets {
		if sts == nil {
			continue
		}
		s := sts.Status
		unready := s.ReadyReplicas < want
		switch {
		case s.UpdateRevision != "" && s.CurrentRevision != s.UpdateRevision, previous == v1alpha1.PhaseUpgrading && unready:
			return v1alpha1.PhaseUpgrading
		case ptr.Deref(sts.Spec.Replicas, 1) != want, s.Replicas != want, previous == v1alpha1.PhaseScaling && unready:
			moving = v1alpha1.PhaseScaling
		}
	}
	return moving
}

// announcePhase writes phase alone into rp's status, before a step that
// takes seconds (a switchover), so that kubectl get shows it while it runs;
// the reconcile's status patch writes the phase that follows. A failure is
// only logged: the step goes on all the same.
func (r *RedisPersistenceReconciler) announcePhase(ctx context.Context, rp *v1alpha1.RedisPersistence, phase v1alpha1.InstancePhase) {
	obj := rp.DeepCopy()
	before := obj.DeepCopy()
	obj.Status.Phase = phase
	if err := r.Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		log.FromContext(ctx).Info("writing the phase failed", "redispersistence", klogRef(rp), "phase", phase, "err", err)
		return
	}
	rp.Status.Phase = phase
}

// impaired is true when a serving instance's conditions report trouble: a
// recent restart, broken replication, a fallback from io_uring, an operator
// upgrade that stalled.
func impaired(conds []metav1.Condition) bool {
	upToDate := meta.FindStatusCondition(conds, v1alpha1.ConditionUpToDate)
	users := meta.FindStatusCondition(conds, v1alpha1.ConditionUsersReady)
	config := meta.FindStatusCondition(conds, v1alpha1.ConditionConfigApplied)
	return meta.IsStatusConditionTrue(conds, v1alpha1.ConditionDegraded) ||
		meta.IsStatusConditionFalse(conds, v1alpha1.ConditionReplicating) ||
		meta.IsStatusConditionFalse(conds, v1alpha1.ConditionUringActive) ||
		(upToDate != nil && upToDate.Reason == ReasonUpgradeStalled) ||
		// Some application cannot sign in as asked.
		(users != nil && users.Status == metav1.ConditionFalse && users.Reason != ReasonUsersWaiting) ||
		// A spec change has not reached a server that serves.
		(config != nil && config.Status == metav1.ConditionFalse && config.Reason != ReasonConfigWaiting)
}

// reportStorage records a new measurement of the data volume in
// status.storage and status.recommendation, with an event.
func (r *RedisPersistenceReconciler) reportStorage(rp *v1alpha1.RedisPersistence, report storageReport, storage condition) {
	st := &rp.Status
	if st.Storage == nil || st.Storage.MeasuredAt == nil || !st.Storage.MeasuredAt.Equal(&report.measuredAt) {
		if eventType, reason, message := storageEvent(report, storage); reason != "" {
			r.Recorder.Event(rp, eventType, reason, message)
		}
	}
	st.Storage = storageStatus(report)
	st.Recommendation = recommendation(report)
}

// reportRestarts records the server container's restarts and last
// termination, with a Warning event for every termination not seen before.
func (r *RedisPersistenceReconciler) reportRestarts(rp *v1alpha1.RedisPersistence, pod *corev1.Pod) {
	cs := serverContainer(pod)
	last := lastTermination(cs, pod != nil && !pod.DeletionTimestamp.IsZero())
	if seen := rp.Status.LastTermination; last != nil && (seen == nil || last.FinishedAt.After(seen.FinishedAt.Time)) {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "Restarted", "%s at %s", describeTermination(last), last.FinishedAt.UTC().Format(time.RFC3339))
		rp.Status.LastTermination = last
	}
	rp.Status.Restarts = 0
	if cs != nil {
		rp.Status.Restarts = cs.RestartCount
	}
	r.setCondition(rp, v1alpha1.ConditionDegraded, degradedCondition(cs, rp.Status.LastTermination, r.Clock.Now()))
}

func (r *RedisPersistenceReconciler) setCondition(rp *v1alpha1.RedisPersistence, conditionType string, c condition) {
	meta.SetStatusCondition(&rp.Status.Conditions, metav1.Condition{
		Type:               conditionType,
		Status:             c.status,
		Reason:             c.reason,
		Message:            c.message,
		ObservedGeneration: rp.Generation,
		LastTransitionTime: metav1.NewTime(r.Clock.Now()),
	})
}
