package controllers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// What the operator does on the running server, over the network: mode
// changes that carry the dataset across the RDB/AOF line, and runtime options
// applied with CONFIG SET instead of a restart.
//
// A mode change is a change of the files the data lives in. aof and uring
// share the append-only file (only the engine that writes it differs); rdb
// and none read dump.rdb at start (none never writes one on its own). A new
// server started on the other kind of file would start from nothing, or from
// a stale snapshot, so before the ConfigMap and the StatefulSet change the
// operator brings the running server there live:
//
//   - into aof or uring from rdb or none: CONFIG SET appendonly yes, which
//     rewrites the AOF from memory; done once the rewrite finished
//     (aof_rewrite_in_progress:0, aof_rewrite_scheduled:0,
//     aof_last_bgrewrite_status:ok).
//   - into rdb or none from anything else: a snapshot (BGSAVE, waited for),
//     then the new save rules and appendonly no. A restart of an rdb server
//     then loads everything (a graceful stop snapshots again under its save
//     rules); a none server comes back to the dataset of the switch.
//   - aof <-> uring: nothing to prepare; the engine is a runtime option.
//
// Only when the server confirmed does the operator write the new mode to the
// ConfigMap (AnnotationMode, the record of which files hold the data) and the
// StatefulSet, which rolls the pod where the pod template changed. While the
// server cannot be reached the old objects stay, Ready says why, and the
// operator retries.

// modeChangeRetry is how soon a mode change that waits on the server is looked at again.
const modeChangeRetry = 2 * time.Second

// modeChangeWait is how long one reconcile waits for a rewrite or snapshot
// before it lets go of the worker and requeues.
const modeChangeWait = 5 * time.Second

type modeChange struct {
	from, to v1alpha1.PersistenceMode
}

// needsServer is true when the running server must write the data in the new
// mode's files before a server may start in that mode.
func (c modeChange) needsServer() bool {
	if c.from == "" || c.from == c.to {
		return false
	}
	return !c.to.KeepsAOF() || !c.from.KeepsAOF()
}

// renderedModeHeader finds the mode in the header of a redis.conf rendered
// before the ConfigMap carried AnnotationMode.
var renderedModeHeader = regexp.MustCompile(`^# Rendered by uring-redis-operator from RedisPersistence \S+ \(mode (none|rdb|aof|uring)\)`)

// appliedMode is the mode of the configuration the server was last given:
// the mode whose files hold the data. "" for a new instance.
func appliedMode(cm *corev1.ConfigMap) v1alpha1.PersistenceMode {
	if cm == nil {
		return ""
	}
	if mode, ok := cm.Annotations[specs.AnnotationMode]; ok {
		return v1alpha1.PersistenceMode(mode)
	}
	if m := renderedModeHeader.FindStringSubmatch(cm.Data["redis.conf"]); m != nil {
		return v1alpha1.PersistenceMode(m[1])
	}
	return ""
}

// snapshots remembers the BGSAVE a mode change asked each server for, so a
// snapshot that outlasts one reconcile is waited for, not asked for again.
// Forgetting it (an operator restart) only costs another snapshot.
type snapshots struct {
	sync.Mutex
	requested map[types.UID]snapshotRequest
}

type snapshotRequest struct {
	runID       string // the server process asked
	savesBefore int64  // its rdb_saves before the request
}

var (
	errSnapshotFailed = errors.New("the server's snapshot failed (rdb_last_bgsave_status:err); it is retried")
	errRewriteFailed  = errors.New("the append-only file rewrite failed (aof_last_bgrewrite_status:err); the server retries it")
)

// snapshotTaken reports whether a snapshot started after the first call for
// uid has completed on this server, asking for one if none is under way.
func (s *snapshots) snapshotTaken(ctx context.Context, server *redis.Client, uid types.UID, info *serverInfo) (bool, error) {
	s.Lock()
	defer s.Unlock()
	if s.requested == nil {
		s.requested = map[types.UID]snapshotRequest{}
	}
	if req, ok := s.requested[uid]; ok && req.runID == info.runID {
		switch {
		case info.bgsaveInProgress || info.rdbSaves <= req.savesBefore:
			return false, nil
		case !info.lastBgsaveOK:
			delete(s.requested, uid)
			return false, errSnapshotFailed
		}
		delete(s.requested, uid)
		return true, nil
	}
	if info.bgsaveInProgress {
		// Started before the request: it may miss recent writes.
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	// SCHEDULE: an AOF rewrite in progress delays the snapshot instead of refusing it.
	if err := server.Do(ctx, "BGSAVE", "SCHEDULE").Err(); err != nil {
		return false, fmt.Errorf("BGSAVE: %w", err)
	}
	s.requested[uid] = snapshotRequest{runID: info.runID, savesBefore: info.rdbSaves}
	return false, nil
}

// prepareStep moves the server one step towards change.to and reports
// whether it is there; progress says what it waits for.
func (r *RedisPersistenceReconciler) prepareStep(ctx context.Context, server *redis.Client, rp *v1alpha1.RedisPersistence, change modeChange) (done bool, progress string, err error) {
	info, err := infoOf(ctx, server)
	if err != nil {
		return false, "", err
	}
	if change.to.KeepsAOF() {
		switch {
		case !info.aofEnabled:
			if err := configSet(ctx, server, "appendonly", "yes"); err != nil {
				return false, "", err
			}
			return false, "rewriting the append-only file from memory", nil
		case info.rewriteRunning:
			return false, "rewriting the append-only file from memory", nil
		case !info.lastRewriteOK:
			return false, "", errRewriteFailed
		}
		return true, "", nil
	}
	taken, err := r.snapshots.snapshotTaken(ctx, server, rp.UID, info)
	if !taken || err != nil {
		return false, "taking a snapshot of the dataset", err
	}
	if err := configSet(ctx, server, "save", specs.SaveRules(rp)); err != nil {
		return false, "", err
	}
	if info.aofEnabled {
		if err := configSet(ctx, server, "appendonly", "no"); err != nil {
			return false, "", err
		}
	}
	return true, "", nil
}

// prepareModeChange runs prepareStep until the server is there, an error, or
// modeChangeWait.
func (r *RedisPersistenceReconciler) prepareModeChange(ctx context.Context, addr string, creds serverCredentials, rp *v1alpha1.RedisPersistence, change modeChange) (done bool, progress string, err error) {
	server := dialServer(addr, creds)
	defer func() { _ = server.Close() }()
	deadline := time.Now().Add(modeChangeWait)
	for {
		done, progress, err = r.prepareStep(ctx, server, rp, change)
		if done || err != nil || time.Now().After(deadline) {
			return done, progress, err
		}
		select {
		case <-ctx.Done():
			return false, progress, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func configSet(ctx context.Context, server *redis.Client, name, value string) error {
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	if err := server.ConfigSet(ctx, name, value).Err(); err != nil {
		return fmt.Errorf("CONFIG SET %s: %w", name, err)
	}
	return nil
}

// applyRuntimeSettings sets every runtime option whose value on the running
// server differs from settings, and returns the names it changed.
func applyRuntimeSettings(ctx context.Context, addr string, creds serverCredentials, settings []specs.ServerSetting) ([]string, error) {
	server := dialServer(addr, creds)
	defer func() { _ = server.Close() }()
	var changed []string
	for _, s := range settings {
		getCtx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
		values, err := server.ConfigGet(getCtx, s.Name).Result()
		cancel()
		if err != nil {
			return changed, fmt.Errorf("CONFIG GET %s: %w", s.Name, err)
		}
		current, known := values[s.Name]
		if !known && len(values) == 1 {
			// An alias (slave-read-only) answers under its canonical name.
			for _, v := range values {
				current, known = v, true
			}
		}
		switch {
		case !known && s.Implicit:
			continue
		case !known:
			return changed, fmt.Errorf("%w %s", errUnknownOption, s.Name)
		case current == s.Value:
			continue
		}
		if err := configSet(ctx, server, s.Name, s.Value); err != nil {
			return changed, err
		}
		changed = append(changed, s.Name)
	}
	return changed, nil
}

// convergeMode holds a mode change until the running server has written its
// data in the new mode's files, which a server started in that mode reads:
// until then the old ConfigMap and StatefulSet stay, and it returns the Ready
// condition that says why and when to look again.
func (r *RedisPersistenceReconciler) convergeMode(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, obs observation) (*condition, ctrl.Result) {
	change := modeChange{from: obs.appliedMode, to: rp.Spec.Mode}
	if !change.needsServer() {
		return nil, ctrl.Result{}
	}
	if !specs.Sharded(rp) {
		return r.switchMode(ctx, rp, creds, change, obs.pod, specs.DataClaimName(rp, 0))
	}
	// Every server of every shard: a shard without replicas has no other
	// copy of its keys, and a replica restarted in the new mode loads its
	// own files before it syncs.
	for _, claim := range specs.DataClaimNames(rp) {
		pod := &corev1.Pod{}
		podName := strings.TrimPrefix(claim, "data-")
		if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: podName}, pod); apierrors.IsNotFound(err) {
			pod = nil
		} else if err != nil {
			return &condition{metav1.ConditionFalse, ReasonModeChangeBlocked, fmt.Sprintf("reading pod %s: %v", podName, err)}, ctrl.Result{Requeue: true}
		}
		if held, retry := r.switchMode(ctx, rp, creds, change, pod, claim); held != nil {
			held.message = podName + ": " + held.message
			return held, retry
		}
	}
	return nil, ctrl.Result{}
}

// switchMode prepares the running server for change and returns nil once a
// server may start in the new mode, or the Ready condition that says what the
// change waits for and when to look again: in modeChangeRetry while the server
// rewrites or snapshots (no event announces the end), at the pod's next event
// while it is not ready, with the workqueue's exponential backoff while the
// server fails.
func (r *RedisPersistenceReconciler) switchMode(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, change modeChange, pod *corev1.Pod, claim string) (*condition, ctrl.Result) {
	what := fmt.Sprintf("changing mode from %s to %s", change.from, change.to)
	if !podReady(pod) || pod.Status.PodIP == "" {
		// No server holds the data in memory: only a volume that was never
		// bound may start over in the new mode.
		inUse, err := r.volumeInUse(ctx, rp, claim)
		if err == nil && !inUse {
			return nil, ctrl.Result{}
		}
		retry := ctrl.Result{}
		if err != nil {
			retry.Requeue = true
		}
		return &condition{metav1.ConditionFalse, ReasonModeChangeBlocked,
			what + " needs the running server to write its data in the new mode's files first, and the server pod is not ready; the previous configuration stays until it is"}, retry
	}
	key := client.ObjectKeyFromObject(rp)
	done, progress, err := r.prepareModeChange(ctx, r.ServerAddress(pod), creds, rp, change)
	r.probes.forget(key) // the server's persistence changed under its last INFO
	switch {
	case done:
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "SwitchedPersistence", "%s: the running server has its data in the files of mode %s; applying the new configuration", what, change.to)
		return nil, ctrl.Result{}
	case err == nil:
		return &condition{metav1.ConditionFalse, ReasonModeChangeInProgress, what + ": " + progress}, ctrl.Result{RequeueAfter: modeChangeRetry}
	}
	log.FromContext(ctx).Info("preparing a mode change failed", "redispersistence", klogRef(rp), "from", change.from, "to", change.to, "err", err)
	r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedSwitchPersistence", "%s: %v", what, err)
	reason := "the server did not answer (see the RedisPersistence's events)"
	if errors.Is(err, errSnapshotFailed) || errors.Is(err, errRewriteFailed) {
		reason = err.Error()
	}
	return &condition{metav1.ConditionFalse, ReasonModeChangeBlocked, what + " waits for the running server: " + reason + "; the previous configuration stays until it succeeds"}, ctrl.Result{Requeue: true}
}

// volumeInUse is true when the data volume's claim is bound: it may hold data
// written in the previous mode.
func (r *RedisPersistenceReconciler) volumeInUse(ctx context.Context, rp *v1alpha1.RedisPersistence, name string) (bool, error) {
	if !specs.HasVolume(rp) {
		return false, nil
	}
	claim := &corev1.PersistentVolumeClaim{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, claim)
	if apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return true, err
	}
	return claim.Status.Phase == corev1.ClaimBound, nil
}

// ConfigApplied reasons; ServerUnreachable as for the other conditions.
const (
	ReasonConfigApplied = "Applied"
	// A server refused a runtime option; the message is its error.
	ReasonConfigRefused = "ConfigRefused"
	// No server of the current configuration is ready to take them yet.
	ReasonConfigWaiting = "WaitingForServers"
)

// configRetry is how soon runtime options a server did not take, because it
// did not answer, are tried again.
const configRetry = 10 * time.Second

// errUnknownOption: the server answers CONFIG GET with nothing for an option
// it does not know.
var errUnknownOption = errors.New("the server does not know the option")

// refusedByServer is true for an error the server answered with, false for
// one of the network (it did not answer, or not in time).
func refusedByServer(err error) bool {
	var serverErr redis.Error
	return errors.As(err, &serverErr) || errors.Is(err, errUnknownOption)
}

// configAppliedCondition says whether the running servers have the spec's
// runtime options, from status.appliedConfigHash and what applying them
// returned this reconcile (obs.configErr). Until they do, Ready may well be
// True: the servers serve, with the options they had.
func configAppliedCondition(rp *v1alpha1.RedisPersistence, obs observation) condition {
	applyErr := obs.configErr
	switch {
	case rp.Status.AppliedConfigHash == specs.RuntimeConfigHash(rp):
		return condition{metav1.ConditionTrue, ReasonConfigApplied, "the running servers have the spec's runtime options"}
	case obs.modeChange != nil:
		return condition{metav1.ConditionFalse, ReasonConfigWaiting, "the new mode's runtime options take effect once the mode change is done"}
	case applyErr != nil && refusedByServer(applyErr):
		return condition{metav1.ConditionFalse, ReasonConfigRefused, "a running server refused the spec's runtime options and keeps the ones it had: " + applyErr.Error()}
	case applyErr != nil:
		return condition{metav1.ConditionFalse, ReasonServerUnreachable, "the spec's runtime options wait for a running server that does not answer: " + applyErr.Error()}
	case obs.infoErr != nil:
		return condition{metav1.ConditionFalse, ReasonServerUnreachable, "the spec's runtime options wait for the running server, whose INFO could not be read: " + obs.infoErr.Error()}
	}
	return condition{metav1.ConditionFalse, ReasonConfigWaiting, "no server of the current configuration is ready yet; one that starts reads the options from the ConfigMap"}
}

// convergeRuntimeConfig sets the runtime options on a server of the current
// revision (a pod about to be replaced starts from the new ConfigMap anyway),
// when they changed or the server process is one they were not applied to,
// and returns why it could not.
func (r *RedisPersistenceReconciler) convergeRuntimeConfig(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, obs observation) error {
	if specs.Sharded(rp) {
		// Every server that runs, as to a replicated instance's.
		if rp.Status.AppliedConfigHash != specs.RuntimeConfigHash(rp) {
			return r.applyClusterRuntimeConfig(ctx, rp, creds)
		}
		return nil
	}
	if obs.info == nil || !runsCurrentRevision(obs.pod, obs.statefulSet) {
		return nil
	}
	if rp.Status.AppliedConfigHash != specs.RuntimeConfigHash(rp) || !r.probes.appliedOn(client.ObjectKeyFromObject(rp), obs.info.runID) {
		return r.applyRuntimeConfig(ctx, rp, creds, obs.pod, obs.info.runID)
	}
	return nil
}

// applyRuntimeConfig sets the runtime options on the running server process
// runID and, for a replicated instance, on the other running servers, and
// records them in status.appliedConfigHash. A server that cannot be reached
// or refuses an option leaves the hash as it was, so the next reconcile tries
// again; one that starts later reads them from the ConfigMap.
func (r *RedisPersistenceReconciler) applyRuntimeConfig(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, pod *corev1.Pod, runID string) error {
	key := client.ObjectKeyFromObject(rp)
	changed, err := applyRuntimeSettings(ctx, r.ServerAddress(pod), creds, specs.RuntimeSettings(rp))
	if err == nil && specs.Replicated(rp) {
		var others []string
		others, err = r.applyRuntimeConfigToReplicas(ctx, rp, creds, pod.Name)
		changed = append(changed, others...)
		slices.Sort(changed)
		changed = slices.Compact(changed)
	}
	if len(changed) > 0 {
		r.probes.forget(key)
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "AppliedConfig", "set %s on the running server (CONFIG SET), without a restart", strings.Join(changed, ", "))
	}
	if err != nil {
		log.FromContext(ctx).Info("applying runtime options failed", "pod", klogRef(pod), "err", err)
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApplyConfig", "setting runtime options on the running server: %v", err)
		return err
	}
	rp.Status.AppliedConfigHash = specs.RuntimeConfigHash(rp)
	r.probes.setAppliedOn(key, runID)
	return nil
}

// applyRuntimeConfigToReplicas sets the runtime options on every running
// server of a replicated or sharded instance but the pod done, and returns
// the options any of them changed.
func (r *RedisPersistenceReconciler) applyRuntimeConfigToReplicas(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, done string) ([]string, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SelectorLabels(rp))); err != nil {
		return nil, fmt.Errorf("listing the server pods: %w", err)
	}
	var changed []string
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Name == done || !podReady(pod) || pod.Status.PodIP == "" {
			continue
		}
		names, err := applyRuntimeSettings(ctx, r.ServerAddress(pod), creds, specs.RuntimeSettings(rp))
		changed = append(changed, names...)
		if err != nil {
			return changed, fmt.Errorf("%s: %w", pod.Name, err)
		}
	}
	return changed, nil
}

// runsCurrentRevision is true when pod runs the StatefulSet's current template.
func runsCurrentRevision(pod *corev1.Pod, sts *appsv1.StatefulSet) bool {
	return pod != nil && sts.Status.ObservedGeneration >= sts.Generation && sts.Status.UpdateRevision != "" &&
		pod.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision
}
