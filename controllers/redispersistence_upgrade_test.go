package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
	"github.com/uring-redis/uring-redis-operator/internal/upgrade"
)

// upgradeTestOperator labels the RedisPersistences that an operator of a
// test's own reconciles with the test's namespace: an upgrade test restarts
// its operator with other default images, as a helm upgrade does;
// TestWatchNamespacesConfineTheOperator runs one with --watch-namespaces. The
// suite's operator leaves them alone.
const upgradeTestOperator = "test.uringredis.io/operator"

var notUpgradeTestInstances = func() labels.Selector {
	req, err := labels.NewRequirement(upgradeTestOperator, selection.DoesNotExist, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}()

// withRedisPersistenceSelector is opts with the RedisPersistence informer
// limited to selector.
func withRedisPersistenceSelector(opts cache.Options, selector labels.Selector) cache.Options {
	for obj := range opts.ByObject {
		if _, ok := obj.(*v1alpha1.RedisPersistence); ok {
			opts.ByObject[obj] = cache.ByObject{Label: selector}
		}
	}
	return opts
}

// testOperator is an operator process of an upgrade test.
type testOperator struct {
	reconciler *RedisPersistenceReconciler
	stop       func()
}

// startOperator runs an operator for the RedisPersistences labelled for ns,
// with defaults opts, until the test ends or stop is called.
func startOperator(t *testing.T, ns string, opts specs.Options, maxConcurrentUpgrades int, clock *clocktesting.FakePassiveClock) *testOperator {
	t.Helper()
	mgr, err := ctrl.NewManager(env.UserConfig(operatorUser), ctrl.Options{
		Scheme:                 scheme.Scheme,
		Cache:                  withRedisPersistenceSelector(CacheOptions(nil), labels.SelectorFromSet(labels.Set{upgradeTestOperator: ns})),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every operator of the process names its controller alike.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &RedisPersistenceReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Options:                 opts,
		MaxConcurrentReconciles: 4,
		MaxConcurrentUpgrades:   maxConcurrentUpgrades,
		Recorder:                mgr.GetEventRecorderFor("uring-redis-operator"),
		Clock:                   clock,
		ServerAddress:           testServerAddress,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	op := &testOperator{reconciler: r, stop: func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("operator: %v", err)
			}
		})
	}}
	t.Cleanup(op.stop)
	return op
}

// reconcile runs one reconcile of name now, beside the operator's own, once
// the operator's cache holds the test's last writes: the reconciler reads
// through it.
func (op *testOperator) reconcile(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error { return op.cacheCaughtUp(ns) })
	if _, err := op.reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// cacheCaughtUp says whether the operator's cache holds the
// RedisPersistences, StatefulSets and pods of ns at the resource versions
// the API server holds, as many as its informers select.
func (op *testOperator) cacheCaughtUp(ns string) error {
	ctx := context.Background()
	managed := client.MatchingLabels{specs.LabelManagedBy: specs.FieldOwner}
	for _, kind := range []struct {
		newList func() client.ObjectList
		opts    []client.ListOption
	}{
		{func() client.ObjectList { return &v1alpha1.RedisPersistenceList{} }, []client.ListOption{client.InNamespace(ns), client.MatchingLabels{upgradeTestOperator: ns}}},
		{func() client.ObjectList { return &appsv1.StatefulSetList{} }, []client.ListOption{client.InNamespace(ns), managed}},
		{func() client.ObjectList { return &corev1.PodList{} }, []client.ListOption{client.InNamespace(ns), managed}},
	} {
		server, cached := kind.newList(), kind.newList()
		if err := k8s.List(ctx, server, kind.opts...); err != nil {
			return err
		}
		if err := op.reconciler.List(ctx, cached, kind.opts...); err != nil {
			return err
		}
		if want, got := resourceVersions(server), resourceVersions(cached); !maps.Equal(want, got) {
			return fmt.Errorf("the operator's cache holds %T %v, the API server %v", server, got, want)
		}
	}
	return nil
}

// resourceVersions maps each object of list to its resource version.
func resourceVersions(list client.ObjectList) map[string]string {
	versions := map[string]string{}
	_ = meta.EachListItem(list, func(obj runtime.Object) error {
		o := obj.(client.Object)
		versions[o.GetName()] = o.GetResourceVersion()
		return nil
	})
	return versions
}

func versionOptions(redisImage string) specs.Options {
	opts := specstest.Options
	opts.RedisImage = redisImage
	opts.ExporterImage = "oliver006/redis_exporter:v1"
	return opts
}

// createUpgradeInstance creates a mode: none instance (no volume to bind)
// for the test operator of ns, pinned to image unless it is empty.
func createUpgradeInstance(t *testing.T, ns, name, image string) {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{upgradeTestOperator: ns}},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, Image: image},
	}
	if err := k8s.Create(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
}

// readyOn makes the instance's pod run and waits until the instance is
// Ready and up to date, reporting image as the server image it runs.
func readyOn(t *testing.T, ns, name, image string) {
	t.Helper()
	waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	actAsKubelet(t, ns, name+"-0", "ext4")
	waitCondition(t, ns, name, v1alpha1.ConditionUpToDate, metav1.ConditionTrue, ReasonUpToDate)
	rp := waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		if rp.Status.Image != image || rp.Status.ExporterImage != "oliver006/redis_exporter:v1" {
			return fmt.Errorf("status.image %q, status.exporterImage %q; want %q and the exporter's", rp.Status.Image, rp.Status.ExporterImage, image)
		}
		return nil
	})
}

// rollPod does what the kubelet does when the StatefulSet controller
// replaces the instance's pod: the old pod ends (removed at once: no kubelet
// confirms it) and the new one, of the StatefulSet's update revision, runs.
func rollPod(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		sts := &appsv1.StatefulSet{}
		if err := get(t, sts, ns, name); err != nil {
			return err
		}
		if sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdateRevision == "" {
			return fmt.Errorf("the StatefulSet controller has not seen generation %d", sts.Generation)
		}
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, name+"-0"); err != nil {
			return err
		}
		if pod.DeletionTimestamp == nil && pod.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision {
			return nil
		}
		if pod.DeletionTimestamp != nil {
			if err := k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return fmt.Errorf("pod %s runs revision %s, not %s", pod.Name, pod.Labels[appsv1.ControllerRevisionHashLabelKey], sts.Status.UpdateRevision)
	})
	actAsKubelet(t, ns, name+"-0", "ext4")
}

// templateImage is the server image of the instance's StatefulSet, and whether
// the StatefulSet holds an upgrade turn.
func templateImage(t *testing.T, ns, name string) (image string, upgrading bool) {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, name); err != nil {
		t.Fatal(err)
	}
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == specs.ContainerRedis {
			image = c.Image
		}
	}
	_, upgrading = sts.Annotations[specs.AnnotationUpgradeStarted]
	return image, upgrading
}

// waitTemplate waits until the instance's StatefulSet runs image.
func waitTemplate(t *testing.T, timeout time.Duration, ns, name, image string) {
	t.Helper()
	eventually(t, timeout, func() error {
		if got, _ := templateImage(t, ns, name); got != image {
			return fmt.Errorf("StatefulSet %s has server image %s, want %s", name, got, image)
		}
		return nil
	})
}

// assertTemplate checks that the instance's StatefulSet has image and whether
// it holds an upgrade turn.
func assertTemplate(t *testing.T, ns, name, image string, upgrading bool) {
	t.Helper()
	if got, gotUpgrading := templateImage(t, ns, name); got != image || gotUpgrading != upgrading {
		t.Fatalf("StatefulSet %s has server image %s (upgrade turn %v), want %s (%v)", name, got, gotUpgrading, image, upgrading)
	}
}

// waitUpgraded waits until the instance is Ready and up to date on image,
// and no longer holds an upgrade turn. (A reconcile may see the StatefulSet
// rolled out before its cache has the new pod: that intermediate status is
// corrected by the reconcile the new pod's event brings.)
func waitUpgraded(t *testing.T, ns, name, image string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionReady) || !meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionUpToDate) {
			return fmt.Errorf("%s: conditions %+v", name, rp.Status.Conditions)
		}
		if rp.Status.Image != image {
			return fmt.Errorf("%s: status.image %q, want %q", name, rp.Status.Image, image)
		}
		if _, upgrading := templateImage(t, ns, name); upgrading {
			return fmt.Errorf("%s still holds an upgrade turn once Ready", name)
		}
		return nil
	})
}

// waitMessage waits until the instance's UpToDate message says want.
func waitMessage(t *testing.T, ns, name, want string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionUpToDate); c == nil || !strings.Contains(c.Message, want) {
			return fmt.Errorf("%s: UpToDate %+v does not say %q", name, c, want)
		}
		return nil
	})
}

// A new default server image rolls the instances one at a time, in
// namespace/name order, each once the one before is Ready on it; an instance
// that pins spec.image keeps its pod; an operator restart in the middle
// carries on where the last one stopped; status.image follows what runs.
func TestUpgradeRollsOneInstanceAtATime(t *testing.T) {
	ns, clock, op := readyFleet(t, 1)
	createUpgradeInstance(t, ns, "pinned", "redis-uring:pinned")
	readyOn(t, ns, "pinned", "redis-uring:pinned")
	pinned := &appsv1.StatefulSet{}
	if err := get(t, pinned, ns, "pinned"); err != nil {
		t.Fatal(err)
	}

	// helm upgrade --set RedisImage=redis-uring:v2: a new operator process.
	op.stop()
	op = startOperator(t, ns, versionOptions("redis-uring:v2"), 1, clock)
	waitTemplate(t, 30*time.Second, ns, "a", "redis-uring:v2")
	waitCondition(t, ns, "a", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgrading)
	waitCondition(t, ns, "b", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)
	waitCondition(t, ns, "c", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)
	// The counts are those of each one's last look, which may predate a's turn.
	op.reconcile(t, ns, "b")
	waitMessage(t, ns, "b", "waits for its turn behind 1 other instances: 1 upgrading, 0 waiting ahead")
	op.reconcile(t, ns, "c")
	waitMessage(t, ns, "c", "waits for its turn behind 2 other instances: 1 upgrading, 1 waiting ahead")
	assertTemplate(t, ns, "b", "redis-uring:v1", false)
	assertTemplate(t, ns, "c", "redis-uring:v1", false)

	// The operator restarts while a rolls: the turn is a's still.
	op.stop()
	op = startOperator(t, ns, versionOptions("redis-uring:v2"), 1, clock)
	for _, name := range []string{"b", "c", "pinned"} {
		op.reconcile(t, ns, name)
	}
	assertTemplate(t, ns, "a", "redis-uring:v2", true)
	assertTemplate(t, ns, "b", "redis-uring:v1", false)
	assertTemplate(t, ns, "c", "redis-uring:v1", false)

	// Each upgrade that becomes Ready starts the next, without waiting for
	// the waiting instances' resync.
	for i, name := range []string{"a", "b", "c"} {
		rollPod(t, ns, name)
		waitUpgraded(t, ns, name, "redis-uring:v2")
		if i+1 < 3 {
			next := []string{"a", "b", "c"}[i+1]
			waitTemplate(t, 20*time.Second, ns, next, "redis-uring:v2")
			if i+2 < 3 {
				assertTemplate(t, ns, "c", "redis-uring:v1", false)
			}
		}
	}

	fresh := &appsv1.StatefulSet{}
	if err := get(t, fresh, ns, "pinned"); err != nil {
		t.Fatal(err)
	}
	if fresh.Generation != pinned.Generation {
		t.Errorf("the instance that pins spec.image rolled: StatefulSet generation %d -> %d", pinned.Generation, fresh.Generation)
	}
	got := waitCondition(t, ns, "pinned", v1alpha1.ConditionUpToDate, metav1.ConditionTrue, ReasonUpToDate)
	if got.Status.Image != "redis-uring:pinned" {
		t.Errorf("pinned: status.image %q", got.Status.Image)
	}
}

// readyFleet starts an operator whose default server image is
// redis-uring:v1, with maxConcurrentUpgrades, and brings up instances a, b and
// c, Ready on that image.
func readyFleet(t *testing.T, maxConcurrentUpgrades int) (ns string, clock *clocktesting.FakePassiveClock, op *testOperator) {
	t.Helper()
	ensureNodes(t)
	ns = newNamespace(t)
	clock = clocktesting.NewFakePassiveClock(testNow)
	op = startOperator(t, ns, versionOptions("redis-uring:v1"), maxConcurrentUpgrades, clock)
	for _, name := range []string{"a", "b", "c"} {
		createUpgradeInstance(t, ns, name, "")
	}
	for _, name := range []string{"a", "b", "c"} {
		readyOn(t, ns, name, "redis-uring:v1")
	}
	return ns, clock, op
}

// A user's own edit applies at once, carrying the pending upgrade along; an
// edit the server takes without a restart leaves the upgrade waiting.
func TestUpgradeUserEditsApplyAtOnce(t *testing.T) {
	ns, clock, op := readyFleet(t, 1)
	op.stop()
	startOperator(t, ns, versionOptions("redis-uring:v2"), 1, clock)
	waitTemplate(t, 30*time.Second, ns, "a", "redis-uring:v2")
	waitCondition(t, ns, "b", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)
	waitCondition(t, ns, "c", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)

	edit := func(name string, change func(*v1alpha1.RedisPersistenceSpec)) {
		t.Helper()
		updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) { change(&rp.Spec) })
	}

	// A runtime option: no restart, so no reason to jump the queue.
	edit("c", func(s *v1alpha1.RedisPersistenceSpec) {
		s.Config = map[string]v1alpha1.ServerOptionValue{"maxmemory-policy": "allkeys-lru"}
	})
	waitCondition(t, ns, "c", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)
	assertTemplate(t, ns, "c", "redis-uring:v1", false)

	// Pinning an image is the user's change: b rolls now, while a still holds the turn.
	edit("b", func(s *v1alpha1.RedisPersistenceSpec) { s.Image = "redis-uring:b" })
	waitTemplate(t, 20*time.Second, ns, "b", "redis-uring:b")
	assertTemplate(t, ns, "b", "redis-uring:b", false)
	waitCondition(t, ns, "b", v1alpha1.ConditionUpToDate, metav1.ConditionTrue, ReasonUpToDate)

	// A change to c's pod rolls it now, and carries the new default along.
	edit("c", func(s *v1alpha1.RedisPersistenceSpec) {
		s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
	})
	waitTemplate(t, 20*time.Second, ns, "c", "redis-uring:v2")
	assertTemplate(t, ns, "c", "redis-uring:v2", false)
	assertTemplate(t, ns, "a", "redis-uring:v2", true)
}

// An instance that is not Ready takes the upgrade at once. An upgrade that
// never becomes Ready holds its turn past upgrade.ProgressDeadline: it is
// reported stalled, with a warning and the command that releases it, the
// instances waiting name it, and none starts until a person releases it
// with the annotation, which wakes them.
func TestUpgradeStalledHoldsTheFleetUntilReleased(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	clock := clocktesting.NewFakePassiveClock(testNow)
	op := startOperator(t, ns, versionOptions("redis-uring:v1"), 1, clock)
	for _, name := range []string{"a", "b", "down"} {
		createUpgradeInstance(t, ns, name, "")
	}
	readyOn(t, ns, "a", "redis-uring:v1")
	readyOn(t, ns, "b", "redis-uring:v1")
	waitCondition(t, ns, "down", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonRolloutInProgress)
	op.stop()
	op = startOperator(t, ns, versionOptions("redis-uring:v2"), 1, clock)

	waitTemplate(t, 30*time.Second, ns, "down", "redis-uring:v2")
	assertTemplate(t, ns, "down", "redis-uring:v2", false)
	waitTemplate(t, 30*time.Second, ns, "a", "redis-uring:v2")
	waitCondition(t, ns, "b", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)

	// a never becomes Ready on v2, not even a day later.
	clock.SetTime(testNow.Add(24 * time.Hour))
	op.reconcile(t, ns, "a")
	stalled := waitCondition(t, ns, "a", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradeStalled)
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "a"); err != nil {
		t.Fatal(err)
	}
	started := sts.Annotations[specs.AnnotationUpgradeStarted]
	command := fmt.Sprintf("kubectl annotate redispersistence -n %s a %s=%s", ns, specs.AnnotationReleaseUpgrade, started)
	if c := meta.FindStatusCondition(stalled.Status.Conditions, v1alpha1.ConditionUpToDate); !strings.Contains(c.Message, command) {
		t.Errorf("the stalled upgrade's condition does not say %q: %s", command, c.Message)
	}
	waitEvent(t, ns, "a", "UpgradeStalled")
	op.reconcile(t, ns, "b")
	waitMessage(t, ns, "b", "Stalled: "+ns+"/a, whose pod is not Ready on the new template 10m0s after its upgrade started")
	assertTemplate(t, ns, "b", "redis-uring:v1", false)

	// An annotation naming another upgrade releases nothing.
	annotate := func(value string) {
		t.Helper()
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, "a"); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(rp.DeepCopy())
		metav1.SetMetaDataAnnotation(&rp.ObjectMeta, specs.AnnotationReleaseUpgrade, value)
		if err := k8s.Patch(context.Background(), rp, patch); err != nil {
			t.Fatal(err)
		}
	}
	annotate(testNow.Add(-time.Hour).Format(time.RFC3339))
	op.reconcile(t, ns, "b")
	assertTemplate(t, ns, "b", "redis-uring:v1", false)

	// Released: b starts without a reconcile of its own (it would look
	// again only after resyncInterval), and a says it no longer holds b.
	annotate(started)
	waitTemplate(t, 20*time.Second, ns, "b", "redis-uring:v2")
	assertTemplate(t, ns, "b", "redis-uring:v2", true)
	waitMessage(t, ns, "a", "released by the "+specs.AnnotationReleaseUpgrade+" annotation")
	waitEvent(t, ns, "a", "ReleasedUpgrade")
}

// A stalled upgrade ends, and the next starts, once its pod is Ready on the
// new template: a fix needs no annotation.
func TestUpgradeStalledResumesOnceReady(t *testing.T) {
	ns, clock, op := readyFleet(t, 1)
	op.stop()
	op = startOperator(t, ns, versionOptions("redis-uring:v2"), 1, clock)
	waitTemplate(t, 30*time.Second, ns, "a", "redis-uring:v2")
	waitCondition(t, ns, "b", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)
	clock.SetTime(testNow.Add(upgrade.ProgressDeadline + time.Second))
	op.reconcile(t, ns, "a")
	waitCondition(t, ns, "a", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradeStalled)
	op.reconcile(t, ns, "b")
	assertTemplate(t, ns, "b", "redis-uring:v1", false)

	rollPod(t, ns, "a")
	waitUpgraded(t, ns, "a", "redis-uring:v2")
	waitTemplate(t, 20*time.Second, ns, "b", "redis-uring:v2")
	assertTemplate(t, ns, "c", "redis-uring:v1", false)
}

// --max-concurrent-upgrades bounds the upgrades in flight.
func TestUpgradeConcurrencyIsBounded(t *testing.T) {
	ns, clock, op := readyFleet(t, 2)
	op.stop()
	op = startOperator(t, ns, versionOptions("redis-uring:v2"), 2, clock)
	waitTemplate(t, 30*time.Second, ns, "a", "redis-uring:v2")
	waitTemplate(t, 30*time.Second, ns, "b", "redis-uring:v2")
	waitCondition(t, ns, "c", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)
	op.reconcile(t, ns, "c")
	waitMessage(t, ns, "c", "2 upgrading, 0 waiting ahead in namespace/name order; the operator upgrades at most 2 at a time")
	assertTemplate(t, ns, "c", "redis-uring:v1", false)
	rollPod(t, ns, "b")
	waitTemplate(t, 20*time.Second, ns, "c", "redis-uring:v2")
}

// StatefulSets an operator from before staged upgrades made carry no record
// of their template: upgrading to this one takes turns, which end at once
// where the template is the same, restarting nothing.
func TestUpgradeFromAnOperatorBeforeStagedUpgrades(t *testing.T) {
	ns, clock, op := readyFleet(t, 1)
	names := []string{"a", "b", "c"}
	op.stop()
	generations := map[string]int64{}
	for _, name := range names {
		sts := &appsv1.StatefulSet{}
		if err := get(t, sts, ns, name); err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null,%q:null,%q:null}}}`, specs.AnnotationTemplateHash, specs.AnnotationSpecTemplateHash, specs.AnnotationGeneration)
		if err := k8s.Patch(context.Background(), sts, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		generations[name] = sts.Generation
	}

	startOperator(t, ns, versionOptions("redis-uring:v1"), 1, clock)
	// One resync of a waiting instance is a minute: the turns must chain faster.
	eventually(t, 45*time.Second, func() error {
		for _, name := range names {
			sts := &appsv1.StatefulSet{}
			if err := get(t, sts, ns, name); err != nil {
				return err
			}
			if sts.Annotations[specs.AnnotationTemplateHash] == "" || sts.Annotations[specs.AnnotationUpgradeStarted] != "" {
				return fmt.Errorf("%s: annotations %v", name, sts.Annotations)
			}
		}
		return nil
	})
	for _, name := range names {
		waitCondition(t, ns, name, v1alpha1.ConditionUpToDate, metav1.ConditionTrue, ReasonUpToDate)
		sts := &appsv1.StatefulSet{}
		if err := get(t, sts, ns, name); err != nil {
			t.Fatal(err)
		}
		if sts.Generation != generations[name] {
			t.Errorf("%s: the StatefulSet's generation went from %d to %d: its pod restarted", name, generations[name], sts.Generation)
		}
	}
}

// rolloutOriginOf tells the operator's changes from the user's.
func TestUpgradeRolloutOrigin(t *testing.T) {
	v1, v2 := versionOptions("redis-uring:v1"), versionOptions("redis-uring:v2")
	base := func() *v1alpha1.RedisPersistence {
		return specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec},
			Auth: &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "auth", Key: "password"}}})
	}
	build := func(rp *v1alpha1.RedisPersistence, opts specs.Options, password string) *appsv1.StatefulSet {
		return specs.StatefulSet(rp, opts, specs.NewPodInputs(rp, password))
	}
	withUsers := func(rp *v1alpha1.RedisPersistence, opts specs.Options, password, users string) *appsv1.StatefulSet {
		in := specs.NewPodInputs(rp, password)
		in.ACLHash = specs.ACLPasswords{Exporter: users, Benchmark: users}.Hash(rp)
		return specs.StatefulSet(rp, opts, in)
	}
	existing := build(base(), v1, "secret")
	// What an older operator version built: another template for the same spec.
	older := existing.DeepCopy()
	older.Annotations[specs.AnnotationTemplateHash], older.Annotations[specs.AnnotationSpecTemplateHash] = "older", "older"
	legacy := existing.DeepCopy()
	legacy.Annotations = nil

	edited := func(change func(*v1alpha1.RedisPersistence)) *v1alpha1.RedisPersistence {
		rp := base()
		change(rp)
		rp.Generation++
		return rp
	}
	runtimeEdit := edited(func(rp *v1alpha1.RedisPersistence) { rp.Spec.AOF.Fsync = v1alpha1.FsyncAlways })
	pin := edited(func(rp *v1alpha1.RedisPersistence) { rp.Spec.Image = "redis-uring:mine" })
	restarted := base()
	restarted.Annotations = maps.Clone(restarted.Annotations)
	if restarted.Annotations == nil {
		restarted.Annotations = map[string]string{}
	}
	restarted.Annotations[specs.AnnotationRestartedAt] = "2026-11-29T01:30:00Z"
	resources := edited(func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	})

	for _, c := range []struct {
		desc     string
		desired  *appsv1.StatefulSet
		existing *appsv1.StatefulSet
		want     rolloutOrigin
	}{
		{"a new instance", build(base(), v2, "secret"), nil, noRollout},
		{"nothing changed", build(base(), v1, "secret"), existing, noRollout},
		{"a runtime option", build(runtimeEdit, v1, "secret"), existing, noRollout},
		{"the default image", build(base(), v2, "secret"), existing, operatorRollout},
		{"the default image and a runtime option", build(runtimeEdit, v2, "secret"), existing, operatorRollout},
		{"the default image of a pinned instance", build(pin, v2, "secret"), build(pin, v1, "secret"), noRollout},
		{"pinning an image", build(pin, v1, "secret"), existing, userRollout},
		{"resources and the default image", build(resources, v2, "secret"), existing, userRollout},
		{"a new password (rotated live)", build(base(), v1, "rotated"), existing, noRollout},
		{"the password's Secret", build(edited(func(rp *v1alpha1.RedisPersistence) { rp.Spec.Auth.SecretRef.Name = "other" }), v1, "secret"), existing, userRollout},
		{"a restart asked for (kubectl uring restart)", build(restarted, v1, "secret"), existing, userRollout},
		{"a restart asked for and the default image", build(restarted, v2, "secret"), existing, userRollout},
		{"a new operator version", build(base(), v1, "secret"), older, operatorRollout},
		{"a new operator version and a spec edit", build(runtimeEdit, v1, "secret"), older, userRollout},
		{"a new operator version and a new password", build(base(), v1, "rotated"), older, operatorRollout},
		{"an operator from before staged upgrades", build(base(), v1, "secret"), legacy, operatorRollout},
		{"the ACL users appear (a new operator version)", withUsers(base(), v1, "secret", "u1"), existing, operatorRollout},
		{"the ACL users' passwords", withUsers(base(), v1, "secret", "u2"), withUsers(base(), v1, "secret", "u1"), userRollout},
	} {
		if got := rolloutOriginOf(c.desired, c.existing); got != c.want {
			t.Errorf("%s: origin %d, want %d", c.desc, got, c.want)
		}
	}
}

// An upgrade whose turn has not come says so in UpToDate, with its place in
// the queue, and looks again soon only while it announces itself.
func TestUpgradeWaitFor(t *testing.T) {
	turn := upgrade.Turn{Rolling: 1, Ahead: 2}
	for _, c := range []struct {
		announced bool
		retry     time.Duration
	}{{false, upgradeAnnounceDelay}, {true, resyncInterval}} {
		w := upgradeWaitFor(turn, c.announced, 2)
		if w.status != metav1.ConditionFalse || w.reason != ReasonUpgradePending || w.retry != c.retry {
			t.Errorf("announced %v: %+v, want %s, retry %s", c.announced, w, ReasonUpgradePending, c.retry)
		}
		if want := "behind 3 other instances: 1 upgrading, 2 waiting ahead in namespace/name order; the operator upgrades at most 2 at a time"; !strings.Contains(w.message, want) {
			t.Errorf("announced %v: message %q does not say %q", c.announced, w.message, want)
		}
		if strings.Contains(w.message, "Stalled") {
			t.Errorf("announced %v: message %q names a stalled upgrade where none is", c.announced, w.message)
		}
	}
	// The instances it waits for because they stalled are named.
	turn.Stalled = []types.NamespacedName{{Namespace: "apps", Name: "a"}, {Namespace: "apps", Name: "b"}}
	if w, want := upgradeWaitFor(turn, true, 2), "Stalled: apps/a, apps/b, whose pod is not Ready"; !strings.Contains(w.message, want) {
		t.Errorf("message %q does not say %q", w.message, want)
	}
}

// An operator upgrade of sharded instances is one turn per instance, not per
// shard: with one upgrade at a time, every shard of the first instance takes
// the new template and holds the turn while the second instance's shards
// keep theirs; the second starts once every shard of the first is Ready on
// it. (The servers are real cluster nodes: a cluster is Ready only when its
// nodes serve every slot.)
func TestUpgradeTurnsCoverEveryShard(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	clock := clocktesting.NewFakePassiveClock(testNow)
	op := startOperator(t, ns, versionOptions("redis-uring:v1"), 1, clock)
	const shards = 3
	configs := map[string]map[string]string{}
	servers := map[string]map[string]*testenv.Server{}
	for _, name := range []string{"ca", "cb"} {
		for i := range shards {
			createVolumeFor(t, ns, fmt.Sprintf("data-%s-s%d-0", name, i))
		}
		rp := &v1alpha1.RedisPersistence{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{upgradeTestOperator: ns}},
			Spec:       aofClusterSpec(shards, 1),
		}
		if err := k8s.Create(ctx, rp); err != nil {
			t.Fatal(err)
		}
		configs[name], servers[name] = runClusterNodes(t, ns, name, shards, 1)
	}
	for _, name := range []string{"ca", "cb"} {
		waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
		waitCondition(t, ns, name, v1alpha1.ConditionUpToDate, metav1.ConditionTrue, ReasonUpToDate)
	}

	// helm upgrade --set RedisImage=redis-uring:v2.
	op.stop()
	op = startOperator(t, ns, versionOptions("redis-uring:v2"), 1, clock)
	for i := range shards {
		waitTemplate(t, 30*time.Second, ns, fmt.Sprintf("ca-s%d", i), "redis-uring:v2")
	}
	waitCondition(t, ns, "cb", v1alpha1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradePending)
	op.reconcile(t, ns, "cb")
	waitMessage(t, ns, "cb", "waits for its turn behind 1 other instances: 1 upgrading")
	for i := range shards {
		assertTemplate(t, ns, fmt.Sprintf("ca-s%d", i), "redis-uring:v2", true)
		assertTemplate(t, ns, fmt.Sprintf("cb-s%d", i), "redis-uring:v1", false)
	}

	// The kubelet restarts ca's servers on the new template.
	pods := slices.Sorted(maps.Keys(servers["ca"]))
	playRollout(t, ns, pods, 3*time.Minute, func(pod string) {
		servers["ca"][pod].Stop(t)
	}, func(pod string) bool {
		sts := pod[:strings.LastIndex(pod, "-")]
		servers["ca"][pod] = testenv.RunClusterNode(t, servers["ca"][pod].Dir, configs["ca"][sts])
		serverAddrs.Store(ns+"/"+pod, servers["ca"][pod].Addr)
		actAsKubelet(t, ns, pod, "ext4")
		return true
	})
	eventually(t, 60*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, "ca"); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionReady) || !meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionUpToDate) || rp.Status.Image != "redis-uring:v2" {
			return fmt.Errorf("ca: status.image %q, conditions %+v", rp.Status.Image, rp.Status.Conditions)
		}
		for i := range shards {
			if _, upgrading := templateImage(t, ns, fmt.Sprintf("ca-s%d", i)); upgrading {
				return fmt.Errorf("ca-s%d still holds the upgrade turn", i)
			}
		}
		return nil
	})
	for i := range shards {
		waitTemplate(t, 30*time.Second, ns, fmt.Sprintf("cb-s%d", i), "redis-uring:v2")
	}
}
