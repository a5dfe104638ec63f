package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func TestPhaseOf(t *testing.T) {
	cond := func(condType string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: condType, Status: status, Reason: reason}
	}
	ready := cond(v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	notReady := func(reason string) metav1.Condition {
		return cond(v1alpha1.ConditionReady, metav1.ConditionFalse, reason)
	}
	stable := cond(v1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonStable)
	restarting := cond(v1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonRestarting)
	cases := []struct {
		desc  string
		conds []metav1.Condition
		want  v1alpha1.InstancePhase
	}{
		{"not reconciled yet", nil, v1alpha1.PhaseProgressing},
		{"readiness unknown", []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionUnknown, "")}, v1alpha1.PhaseProgressing},
		{"serving", []metav1.Condition{ready, stable, cond(v1alpha1.ConditionUpToDate, metav1.ConditionTrue, ReasonUpToDate)}, v1alpha1.PhaseReady},
		{"serving, io_uring active", []metav1.Condition{ready, cond(v1alpha1.ConditionUringActive, metav1.ConditionTrue, ReasonUringActive)}, v1alpha1.PhaseReady},
		{"serving, io_uring not asked yet", []metav1.Condition{ready, cond(v1alpha1.ConditionUringActive, metav1.ConditionUnknown, ReasonServerUnreachable)}, v1alpha1.PhaseReady},
		{"serving, an upgrade waits its turn", []metav1.Condition{ready, cond(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)}, v1alpha1.PhaseReady},
		{"serving after a restart", []metav1.Condition{ready, restarting}, v1alpha1.PhaseDegraded},
		{"serving on the posix engine", []metav1.Condition{ready, cond(v1alpha1.ConditionUringActive, metav1.ConditionFalse, ReasonUringFallback)}, v1alpha1.PhaseDegraded},
		{"serving, replicas not linked", []metav1.Condition{ready, cond(v1alpha1.ConditionReplicating, metav1.ConditionFalse, ReasonReplicasNotLinked)}, v1alpha1.PhaseDegraded},
		{"serving, upgrade stalled", []metav1.Condition{ready, cond(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradeStalled)}, v1alpha1.PhaseDegraded},
		{"serving, a user's rule refused", []metav1.Condition{ready, cond(v1alpha1.ConditionUsersReady, metav1.ConditionFalse, ReasonUserRulesRefused)}, v1alpha1.PhaseDegraded},
		{"serving, a user's Secret missing", []metav1.Condition{ready, cond(v1alpha1.ConditionUsersReady, metav1.ConditionFalse, ReasonUserSecretMissing)}, v1alpha1.PhaseDegraded},
		{"serving, users applied", []metav1.Condition{ready, cond(v1alpha1.ConditionUsersReady, metav1.ConditionTrue, ReasonUsersApplied)}, v1alpha1.PhaseReady},
		{"serving, users wait for a server", []metav1.Condition{ready, cond(v1alpha1.ConditionUsersReady, metav1.ConditionFalse, ReasonUsersWaiting)}, v1alpha1.PhaseReady},
		{"serving, runtime options applied", []metav1.Condition{ready, cond(v1alpha1.ConditionConfigApplied, metav1.ConditionTrue, ReasonConfigApplied)}, v1alpha1.PhaseReady},
		{"serving, runtime options wait for a server", []metav1.Condition{ready, cond(v1alpha1.ConditionConfigApplied, metav1.ConditionFalse, ReasonConfigWaiting)}, v1alpha1.PhaseReady},
		{"serving, a spec change did not reach the server", []metav1.Condition{ready, cond(v1alpha1.ConditionConfigApplied, metav1.ConditionFalse, ReasonServerUnreachable)}, v1alpha1.PhaseDegraded},
		{"serving, a runtime option refused", []metav1.Condition{ready, cond(v1alpha1.ConditionConfigApplied, metav1.ConditionFalse, ReasonConfigRefused)}, v1alpha1.PhaseDegraded},
		{"no node", []metav1.Condition{notReady(ReasonNotScheduled)}, v1alpha1.PhasePending},
		{"password Secret missing", []metav1.Condition{notReady(ReasonAuthSecretMissing)}, v1alpha1.PhasePending},
		{"TLS Secret missing", []metav1.Condition{notReady(ReasonTLSSecretMissing)}, v1alpha1.PhasePending},
		{"cert-manager missing", []metav1.Condition{notReady(ReasonCertManagerMissing)}, v1alpha1.PhasePending},
		{"rolling out", []metav1.Condition{notReady(ReasonRolloutInProgress), stable}, v1alpha1.PhaseProgressing},
		{"rolling out after a crash", []metav1.Condition{notReady(ReasonRolloutInProgress), restarting}, v1alpha1.PhaseProgressing},
		{"starting", []metav1.Condition{notReady(ReasonPodNotReady), stable}, v1alpha1.PhaseProgressing},
		{"mode change in progress", []metav1.Condition{notReady(ReasonModeChangeInProgress)}, v1alpha1.PhaseProgressing},
		{"crashed, not back", []metav1.Condition{notReady(ReasonPodNotReady), restarting}, v1alpha1.PhaseFailed},
		{"volume without write barriers", []metav1.Condition{notReady(ReasonStorageNotReady)}, v1alpha1.PhaseFailed},
		{"TLS Secret invalid", []metav1.Condition{notReady(ReasonTLSSecretInvalid)}, v1alpha1.PhaseFailed},
		{"apply failed", []metav1.Condition{notReady(ReasonApplyFailed)}, v1alpha1.PhaseFailed},
		{"mode change blocked", []metav1.Condition{notReady(ReasonModeChangeBlocked)}, v1alpha1.PhaseFailed},
		{"a reason not known here", []metav1.Condition{notReady("SomethingNew")}, v1alpha1.PhaseProgressing},
	}
	for _, tc := range cases {
		if got := phaseOf(tc.conds); got != tc.want {
			t.Errorf("%s: phase %q, want %q", tc.desc, got, tc.want)
		}
	}
}

func TestPhaseInMotion(t *testing.T) {
	const (
		none      = v1alpha1.InstancePhase("")
		scaling   = v1alpha1.PhaseScaling
		upgrading = v1alpha1.PhaseUpgrading
	)
	cases := []struct {
		desc                    string
		phase, moving, previous v1alpha1.InstancePhase
		want                    v1alpha1.InstancePhase
	}{
		{"nothing moves", v1alpha1.PhaseReady, none, v1alpha1.PhaseReady, v1alpha1.PhaseReady},
		{"a scale of a serving instance", v1alpha1.PhaseProgressing, scaling, v1alpha1.PhaseReady, scaling},
		{"a rollout of a degraded instance", v1alpha1.PhaseDegraded, upgrading, v1alpha1.PhaseDegraded, upgrading},
		{"a rollout after a switchover", v1alpha1.PhaseProgressing, upgrading, v1alpha1.PhaseSwitchingOver, upgrading},
		{"a scale goes on", v1alpha1.PhaseProgressing, scaling, scaling, scaling},
		{"a new instance starts its pods", v1alpha1.PhaseProgressing, scaling, none, v1alpha1.PhaseProgressing},
		{"a new instance, still on its way", v1alpha1.PhaseProgressing, scaling, v1alpha1.PhaseProgressing, v1alpha1.PhaseProgressing},
		{"a crash during a scale", v1alpha1.PhaseFailed, scaling, scaling, v1alpha1.PhaseFailed},
		{"a scale onto no node", v1alpha1.PhasePending, scaling, v1alpha1.PhaseReady, v1alpha1.PhasePending},
		{"a rollout after a crash", v1alpha1.PhaseProgressing, upgrading, v1alpha1.PhaseFailed, v1alpha1.PhaseProgressing},
	}
	for _, tc := range cases {
		if got := phaseInMotion(tc.phase, tc.moving, tc.previous); got != tc.want {
			t.Errorf("%s: phase %q, want %q", tc.desc, got, tc.want)
		}
	}
}

func TestMotionOf(t *testing.T) {
	sts := func(spec, replicas, ready int32, current, update string) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			Spec: appsv1.StatefulSetSpec{Replicas: &spec},
			Status: appsv1.StatefulSetStatus{Replicas: replicas, ReadyReplicas: ready,
				CurrentRevision: current, UpdateRevision: update},
		}
	}
	const none = v1alpha1.InstancePhase("")
	cases := []struct {
		desc     string
		sets     []*appsv1.StatefulSet
		previous v1alpha1.InstancePhase
		want     v1alpha1.InstancePhase
	}{
		{"steady", []*appsv1.StatefulSet{sts(4, 4, 4, "a", "a")}, v1alpha1.PhaseReady, none},
		{"no StatefulSet yet", []*appsv1.StatefulSet{nil}, none, none},
		{"scale asked", []*appsv1.StatefulSet{sts(4, 3, 3, "a", "a")}, v1alpha1.PhaseReady, v1alpha1.PhaseScaling},
		{"scale-in held by the operator", []*appsv1.StatefulSet{sts(5, 5, 5, "a", "a")}, v1alpha1.PhaseReady, v1alpha1.PhaseScaling},
		{"the new pod not ready yet", []*appsv1.StatefulSet{sts(4, 4, 3, "a", "a")}, v1alpha1.PhaseScaling, v1alpha1.PhaseScaling},
		{"a pod not ready, nothing asked", []*appsv1.StatefulSet{sts(4, 4, 3, "a", "a")}, v1alpha1.PhaseReady, none},
		{"rolling", []*appsv1.StatefulSet{sts(4, 4, 4, "a", "b")}, v1alpha1.PhaseReady, v1alpha1.PhaseUpgrading},
		{"rolled, the last pod not ready", []*appsv1.StatefulSet{sts(4, 4, 3, "b", "b")}, v1alpha1.PhaseUpgrading, v1alpha1.PhaseUpgrading},
		{"one shard rolls, another scales", []*appsv1.StatefulSet{sts(4, 3, 3, "a", "a"), sts(4, 4, 4, "a", "b")}, v1alpha1.PhaseReady, v1alpha1.PhaseUpgrading},
	}
	for _, tc := range cases {
		want := int32(4)
		if got := motionOf(tc.sets, want, tc.previous); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// phaseRecorder keeps every phase a watch of one RedisPersistence sees, in
// order, each once per run: what kubectl get -w would have printed.
type phaseRecorder struct {
	mu     sync.Mutex
	phases []v1alpha1.InstancePhase
}

// recordPhases watches ns/name until the test ends.
func recordPhases(t *testing.T, ns, name string) *phaseRecorder {
	t.Helper()
	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(context.Background(), &v1alpha1.RedisPersistenceList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	rec := &phaseRecorder{}
	go func() {
		for ev := range w.ResultChan() {
			rp, ok := ev.Object.(*v1alpha1.RedisPersistence)
			if !ok {
				continue
			}
			rec.mu.Lock()
			if n := len(rec.phases); rp.Status.Phase != "" && (n == 0 || rec.phases[n-1] != rp.Status.Phase) {
				rec.phases = append(rec.phases, rp.Status.Phase)
			}
			rec.mu.Unlock()
		}
	}()
	return rec
}

// since returns the phases seen from the n-th on, and how many were seen.
func (r *phaseRecorder) since(n int) ([]v1alpha1.InstancePhase, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.phases[min(n, len(r.phases)):]), len(r.phases)
}

// scaleTo does what kubectl scale --replicas does: a merge patch of the
// scale subresource.
func scaleTo(t *testing.T, key types.NamespacedName, replicas int32) {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	if err := k8s.SubResource("scale").Patch(context.Background(), rp, patch, client.WithSubResourceBody(&autoscalingv1.Scale{})); err != nil {
		t.Fatalf("scaling %s to %d: %v", key, replicas, err)
	}
}

// waitScale waits until the scale subresource reports replicas wanted and
// current, with the server pods' selector.
func waitScale(t *testing.T, key types.NamespacedName, replicas int32) {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	wantSelector := "app.kubernetes.io/instance=" + key.Name + ",app.kubernetes.io/name=redis"
	eventually(t, 60*time.Second, func() error {
		scale := &autoscalingv1.Scale{}
		if err := k8s.SubResource("scale").Get(context.Background(), rp, scale); err != nil {
			return err
		}
		if scale.Spec.Replicas != replicas || scale.Status.Replicas != replicas || scale.Status.Selector != wantSelector {
			return fmt.Errorf("scale %+v, want %d replicas selected by %s", scale, replicas, wantSelector)
		}
		return nil
	})
}

// waitReady waits until status says ready of replicas servers are ready.
func waitReady(t *testing.T, key types.NamespacedName, ready, replicas int32) *v1alpha1.RedisPersistence {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	eventually(t, 60*time.Second, func() error {
		if err := get(t, rp, key.Namespace, key.Name); err != nil {
			return err
		}
		st := rp.Status
		if st.ReadyInstances != ready || st.Ready != fmt.Sprintf("%d/%d", ready, replicas) || st.ObservedGeneration != rp.Generation {
			return fmt.Errorf("ready %q (readyInstances %d, instances %d, observedGeneration %d of %d), want %d/%d",
				st.Ready, st.ReadyInstances, st.Instances, st.ObservedGeneration, rp.Generation, ready, replicas)
		}
		return nil
	})
	return rp
}

// kubectl scale rp/x --replicas=3 grows an instance through the scale
// subresource; the status reports the servers as kubectl get shows them,
// and the Scale reports them as a HorizontalPodAutoscaler reads them.
func TestScaleSubresource(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = "scaled"
	for _, claim := range []string{"data-" + name + "-1", "data-" + name + "-2"} {
		createVolumeFor(t, ns, claim)
	}
	createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}})
	key := types.NamespacedName{Namespace: ns, Name: name}
	got := waitReady(t, key, 0, 1)
	if got.Status.Phase == "" || got.Status.Phase == v1alpha1.PhaseReady {
		t.Errorf("phase %q before the pod runs", got.Status.Phase)
	}

	serverAddrs.Store(ns+"/"+name+"-0", testenv.StartServer(t, renderedConfig(t, ns, name)))
	actAsKubelet(t, ns, name+"-0", "ext4")
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	got = waitReady(t, key, 1, 1)
	if got.Status.Phase != v1alpha1.PhaseReady || got.Status.Instances != 1 {
		t.Errorf("phase %q, instances %d; want Ready, 1", got.Status.Phase, got.Status.Instances)
	}
	waitScale(t, key, 1)

	scaleTo(t, key, 3)
	if err := get(t, got, ns, name); err != nil || got.Spec.Replicas != 3 {
		t.Fatalf("spec.replicas %d after kubectl scale --replicas=3 (%v)", got.Spec.Replicas, err)
	}
	if got = waitReady(t, key, 1, 3); got.Status.Phase != v1alpha1.PhaseScaling && got.Status.Phase != v1alpha1.PhaseUpgrading {
		t.Errorf("phase %q while the StatefulSet adds servers, want Scaling or Upgrading", got.Status.Phase)
	}
	waitReady(t, key, 1, 3)
	sts := &appsv1.StatefulSet{}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, sts, ns, name); err != nil {
			return err
		}
		if *sts.Spec.Replicas != 3 {
			return fmt.Errorf("the StatefulSet asks for %d servers", *sts.Spec.Replicas)
		}
		return nil
	})
	// The StatefulSet creates a pod once the one before it is Ready.
	markRunning(t, ns, name+"-1")
	waitReady(t, key, 2, 3)
	markRunning(t, ns, name+"-2")
	got = waitReady(t, key, 3, 3)
	waitScale(t, key, 3)
	// One server to three changes the pod template too (a single server
	// becomes a primary with replicas), and the first server still runs the
	// old one: a rollout, which the operator goes on with.
	if got.Status.Phase != v1alpha1.PhaseUpgrading {
		t.Errorf("phase %q with a server on the old template, want Upgrading", got.Status.Phase)
	}
}
