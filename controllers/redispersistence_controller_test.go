package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

const storageClass = "test-local"

func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	var last error
	if wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	}) != nil {
		t.Fatalf("after %s: %v", timeout, last)
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rp-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func createRP(t *testing.T, ns, name string, spec v1alpha1.RedisPersistenceSpec) *v1alpha1.RedisPersistence {
	t.Helper()
	if spec.Storage == nil {
		spec.Storage = &v1alpha1.StorageSpec{StorageClassName: storageClass}
	}
	createVolumeFor(t, ns, "data-"+name+"-0")
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if err := k8s.Create(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	return rp
}

// createVolumeFor makes a PersistentVolume reserved for one claim, as a
// cluster's provisioner would; the real volume binder then binds them.
func createVolumeFor(t *testing.T, ns, claim string) {
	t.Helper()
	createVolumeOfClass(t, ns, claim, storageClass)
}

// createVolumeOfClass is createVolumeFor with a StorageClass of the test's choosing.
func createVolumeOfClass(t *testing.T, ns, claim, class string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + claim}},
		},
	}
	if err := k8s.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, obj client.Object, ns, name string) error {
	t.Helper()
	return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
}

// updateRP applies change to the RedisPersistence's latest version and
// updates it, again on a conflict: the operator writes its status (a new
// resourceVersion) at any moment.
func updateRP(t *testing.T, ns, name string, change func(*v1alpha1.RedisPersistence)) *v1alpha1.RedisPersistence {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		change(rp)
		return k8s.Update(context.Background(), rp)
	}); err != nil {
		t.Fatal(err)
	}
	return rp
}

// condition waits until the RedisPersistence has the condition with status
// and reason, for its current generation.
func waitCondition(t *testing.T, ns, name, condType string, status metav1.ConditionStatus, reason string) *v1alpha1.RedisPersistence {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	eventually(t, 60*time.Second, func() error {
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		c := meta.FindStatusCondition(rp.Status.Conditions, condType)
		if c == nil || c.Status != status || c.Reason != reason || rp.Status.ObservedGeneration != rp.Generation {
			return fmt.Errorf("%s is %+v (observedGeneration %d, generation %d), want %s/%s", condType, c, rp.Status.ObservedGeneration, rp.Generation, status, reason)
		}
		return nil
	})
	return rp
}

// Nodes are cluster-wide: every test shares these.
var nodesOnce = map[string]string{
	"kernel-5-15": "5.15.0-119-generic",
	"kernel-6-1":  "6.1.0-28-cloud-amd64",
	"kernel-6-8":  "6.8.0-1015-aws",
}

func ensureNodes(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for name, kernel := range nodesOnce {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
		if err := k8s.Create(ctx, node); apierrors.IsAlreadyExists(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
		node.Status = corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			NodeInfo:   corev1.NodeSystemInfo{KernelVersion: kernel, KubeletVersion: "v1.31.4", OperatingSystem: "linux", Architecture: "amd64"},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}
		if err := k8s.Status().Update(ctx, node); err != nil {
			t.Fatal(err)
		}
		// The API server taints new nodes not-ready; the node lifecycle
		// controller would lift it once the (absent) kubelet reports Ready.
		if err := k8s.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"taints":null}}`))); err != nil {
			t.Fatal(err)
		}
	}
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: storageClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if err := k8s.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for name, kernel := range nodesOnce {
		want, _ := kernelVersionLabels(kernel)
		eventually(t, 30*time.Second, func() error {
			node := &corev1.Node{}
			if err := get(t, node, "", name); err != nil {
				return err
			}
			for k, v := range want {
				if node.Labels[k] != v {
					return fmt.Errorf("node %s: label %s=%q, want %q", name, k, node.Labels[k], v)
				}
			}
			return nil
		})
	}
}

// actAsKubelet reports the pod the way a kubelet would once its containers
// run: the prepare container's termination message and readiness.
func actAsKubelet(t *testing.T, ns, podName, filesystem string) {
	t.Helper()
	actAsKubeletReporting(t, ns, podName, "filesystem="+filesystem+"\n", metav1.Now())
}

// actAsKubeletReporting is actAsKubelet with the whole termination message
// of the prepare container (its storage report) and the time it ended.
func actAsKubeletReporting(t *testing.T, ns, podName, report string, finishedAt metav1.Time) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, podName); err != nil {
			return err
		}
		if pod.Spec.NodeName == "" {
			return fmt.Errorf("pod %s is not scheduled yet", podName)
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = "127.0.0.1"
		pod.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{
			Name: specs.ContainerPrepare, Ready: true, Image: "redis-uring:test", ImageID: "redis-uring@sha256:0",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: report, StartedAt: finishedAt, FinishedAt: finishedAt}},
		}}
		pod.Status.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Ready: true, Started: ptr.To(true), Image: c.Image, ImageID: c.Image + "@sha256:0",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		return k8s.Status().Update(context.Background(), pod)
	})
}

// renderedConfig is the instance's redis.conf as a server of the test runs
// it: its include files are what the prepare container writes (the
// password, the ACL users and spec.users), rendered by renderIncludes.
func renderedConfig(t *testing.T, ns, name string) string {
	t.Helper()
	return renderedConfigOf(t, ns, name, name)
}

// renderedConfigOf is renderedConfig with the includes the prepare
// container of StatefulSet statefulSet writes (a shard's, for a sharded
// instance).
func renderedConfigOf(t *testing.T, ns, name, statefulSet string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := get(t, cm, ns, name+"-config"); err != nil {
		t.Fatal(err)
	}
	auth, users := renderIncludes(t, ns, statefulSet)
	// The server's command line includes the users (specs.UsersInclude).
	return strings.Replace(cm.Data["redis.conf"], "include "+specs.RunDir+"/auth.conf\n", auth, 1) + users
}

// instancePassword is the password the operator gives the instance's pods,
// "" without one.
func instancePassword(t *testing.T, ns, name string) string {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	if err := get(t, rp, ns, name); err != nil {
		t.Fatal(err)
	}
	ref := specs.AuthSecretRef(rp)
	if ref == nil {
		return ""
	}
	secret := &corev1.Secret{}
	if err := get(t, secret, ns, ref.Name); err != nil {
		t.Fatal(err)
	}
	return string(secret.Data[ref.Key])
}

// withPassword replaces the auth include of a rendered redis.conf with what
// the prepare container writes there.
func withPassword(config, password string) string {
	include := "include " + specs.RunDir + "/auth.conf\n"
	if password == "" {
		return strings.Replace(config, include, "", 1)
	}
	return strings.Replace(config, include, fmt.Sprintf("requirepass %q\n", password), 1)
}

func TestLifecycle(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	rp := createRP(t, ns, "cache", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}})

	// Every object the server needs, owned by the RedisPersistence.
	sts := &appsv1.StatefulSet{}
	eventually(t, 30*time.Second, func() error { return get(t, sts, ns, "cache") })
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.Service{}} {
		name := map[bool]string{true: "cache-config", false: "cache"}[fmt.Sprintf("%T", obj) == "*v1.ConfigMap"]
		if err := get(t, obj, ns, name); err != nil {
			t.Fatalf("%T %s: %v", obj, name, err)
		}
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != rp.UID {
			t.Errorf("%T %s is not controlled by the RedisPersistence: %v", obj, name, ref)
		}
	}
	headless := &corev1.Service{}
	if err := get(t, headless, ns, "cache-headless"); err != nil || headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("headless service: %v %+v", err, headless.Spec)
	}
	if !strings.Contains(renderedConfig(t, ns, "cache"), "appendfsync everysec\n") {
		t.Fatalf("redis.conf does not carry the fsync policy")
	}
	firstHash := sts.Spec.Template.Annotations[specs.AnnotationConfigHash]

	// The real scheduler binds the pod; the status follows it to the node.
	got := waitCondition(t, ns, "cache", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	if nodesOnce[got.Status.Node] == "" || got.Status.KernelVersion != nodesOnce[got.Status.Node] {
		t.Errorf("status node %q kernel %q", got.Status.Node, got.Status.KernelVersion)
	}
	if got.Status.Endpoint != "cache."+ns+".svc:6379" {
		t.Errorf("endpoint %q", got.Status.Endpoint)
	}

	// Once the pod runs, the operator asks the real server what it does.
	serverAddrs.Store(ns+"/cache-0", testenv.StartServer(t, renderedConfig(t, ns, "cache")))
	actAsKubelet(t, ns, "cache-0", "ext4")
	got = waitCondition(t, ns, "cache", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	if got.Status.Engine != "posix" || got.Status.Filesystem != "ext4" {
		t.Errorf("engine %q filesystem %q, want posix on ext4", got.Status.Engine, got.Status.Filesystem)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStorageReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("StorageReady %+v", c)
	}
	if meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUringActive) != nil {
		t.Errorf("mode aof must not carry UringActive")
	}

	// A reconcile of an unchanged spec writes nothing.
	assertNoOpReconcile(t, ns, "cache")

	// A runtime option reaches the ConfigMap and the running server, and
	// leaves the pod alone.
	updateRP(t, ns, "cache", func(rp *v1alpha1.RedisPersistence) { rp.Spec.AOF.Fsync = v1alpha1.FsyncAlways })
	server := newClient(serverAddress(t, ns, "cache-0"), instancePassword(t, ns, "cache"))
	defer func() { _ = server.Close() }()
	eventually(t, 30*time.Second, func() error {
		if !strings.Contains(renderedConfig(t, ns, "cache"), "appendfsync always\n") {
			return fmt.Errorf("redis.conf still has the old policy")
		}
		got, err := server.ConfigGet(context.Background(), "appendfsync").Result()
		if err != nil || got["appendfsync"] != "always" {
			return fmt.Errorf("the server's appendfsync is %v (err %w)", got, err)
		}
		return nil
	})
	if err := get(t, sts, ns, "cache"); err != nil {
		t.Fatal(err)
	}
	if sts.Spec.Template.Annotations[specs.AnnotationConfigHash] != firstHash {
		t.Error("a runtime option changed the config hash: the pod would restart")
	}

	// What the server reads only at start rolls the pod.
	rp = updateRP(t, ns, "cache", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Image = "redis-uring:next" })
	waitCondition(t, ns, "cache", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonRolloutInProgress)

	// Deleting the RedisPersistence lets the real garbage collector remove what it owned.
	if err := k8s.Delete(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		obj  client.Object
		name string
	}{{&appsv1.StatefulSet{}, "cache"}, {&corev1.ConfigMap{}, "cache-config"}, {&corev1.Service{}, "cache"}, {&corev1.Service{}, "cache-headless"}} {
		eventually(t, 90*time.Second, func() error {
			if err := get(t, c.obj, ns, c.name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still exists (err %w)", c.obj, c.name, err)
			}
			return nil
		})
	}
}

func assertNoOpReconcile(t *testing.T, ns, name string) {
	t.Helper()
	objects := []client.Object{&v1alpha1.RedisPersistence{}, &appsv1.StatefulSet{}, &corev1.ConfigMap{}, &corev1.Service{}, &corev1.Service{}, &corev1.Secret{}}
	names := []string{name, name, name + "-config", name, name + "-headless", name + "-app"}
	versions := func() []string {
		var out []string
		for i, obj := range objects {
			if err := get(t, obj, ns, names[i]); err != nil {
				t.Fatal(err)
			}
			out = append(out, obj.GetResourceVersion())
		}
		return out
	}
	before := versions()
	for i := 0; i < 2; i++ {
		if _, err := reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if after := versions(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("reconciling an unchanged spec changed objects: resourceVersions %v -> %v", before, after)
	}
}

func TestKernelPlacement(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)

	// 6.5 is met by kernel-6-8 only: the real scheduler must pick it.
	createRP(t, ns, "recent", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{MinKernelVersion: "6.5"}})
	got := waitCondition(t, ns, "recent", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	if got.Status.Node != "kernel-6-8" {
		t.Errorf("minKernelVersion 6.5 scheduled on %s", got.Status.Node)
	}

	// The 6.0 default admits 6.1 and 6.8, never 5.15.
	createRP(t, ns, "default", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	got = waitCondition(t, ns, "default", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	if got.Status.Node == "kernel-5-15" {
		t.Errorf("uring scheduled on a 5.15 kernel")
	}

	// No node has 7.0: the operator says so, naming the requirement.
	createRP(t, ns, "future", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{MinKernelVersion: "7.0"}})
	got = waitCondition(t, ns, "future", v1alpha1.ConditionScheduled, metav1.ConditionFalse, ReasonNoEligibleNodes)
	msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionScheduled).Message
	if !strings.Contains(msg, "kernel >= 7.0") || !strings.Contains(msg, specs.OperatorKernelLabels.Major) {
		t.Errorf("NoEligibleNodes message does not name the requirement: %q", msg)
	}
	waitCondition(t, ns, "future", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonNotScheduled)
}

func TestFilesystemNotExt4(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "onxfs", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF})
	waitCondition(t, ns, "onxfs", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	actAsKubelet(t, ns, "onxfs-0", "xfs")
	got := waitCondition(t, ns, "onxfs", v1alpha1.ConditionStorageReady, metav1.ConditionFalse, ReasonFilesystemNotExt4)
	if got.Status.Filesystem != "xfs" {
		t.Errorf("filesystem %q", got.Status.Filesystem)
	}
	waitCondition(t, ns, "onxfs", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonStorageNotReady)
}

func TestPodMonitorOnlyWhenServed(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	spec := v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF}
	spec.Monitoring.PodMonitor.Labels = map[string]string{"release": "kube-prometheus-stack"}
	createRP(t, ns, "monitored", spec)
	waitCondition(t, ns, "monitored", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)

	podMonitor := &monitoringv1.PodMonitor{}
	if err := get(t, podMonitor, ns, "monitored"); !meta.IsNoMatchError(err) {
		t.Fatalf("before the CRD is installed the kind must not be served, got %v", err)
	}

	if err := env.InstallCRDs(testenv.PrometheusOperatorCRD(t, "podmonitors")); err != nil {
		t.Fatal(err)
	}
	// Installing a CRD is no event for the controller; its next resync would do.
	if _, err := reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "monitored"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error { return get(t, podMonitor, ns, "monitored") })
	if podMonitor.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PodMonitor labels %v lack the release label", podMonitor.Labels)
	}
	endpoints := podMonitor.Spec.PodMetricsEndpoints
	if len(endpoints) != 1 || endpoints[0].Port != "metrics" || endpoints[0].Interval != "30s" {
		t.Fatalf("PodMonitor endpoints %+v", endpoints)
	}
	// Every exporter series, up included, names its instance (the chart's RedisExporterDown selects on it).
	if relabel := endpoints[0].RelabelConfigs; len(relabel) != 1 || relabel[0].TargetLabel != "redispersistence" ||
		len(relabel[0].SourceLabels) != 1 || relabel[0].SourceLabels[0] != "__meta_kubernetes_pod_label_app_kubernetes_io_instance" {
		t.Errorf("PodMonitor relabelings %+v", relabel)
	}
	if selector := podMonitor.Spec.Selector.MatchLabels; selector[specs.LabelInstance] != "monitored" {
		t.Errorf("PodMonitor selects %v", selector)
	}
	if ref := metav1.GetControllerOf(podMonitor); ref == nil || ref.Name != "monitored" {
		t.Errorf("PodMonitor owner %v", ref)
	}

	// Owned PodMonitors are watched: one deleted behind the operator's back
	// comes back.
	if err := k8s.Delete(context.Background(), podMonitor); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() error {
		fresh := &monitoringv1.PodMonitor{}
		if err := get(t, fresh, ns, "monitored"); err != nil {
			return err
		}
		if fresh.UID == podMonitor.UID {
			return fmt.Errorf("the deleted PodMonitor is still there")
		}
		return nil
	})

	// Turning monitoring off deletes the PodMonitor the operator made.
	updateRP(t, ns, "monitored", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Monitoring.PodMonitor.Enabled = ptr.To(false)
	})
	eventually(t, 30*time.Second, func() error {
		err := get(t, &monitoringv1.PodMonitor{}, ns, "monitored")
		switch {
		case err == nil:
			return fmt.Errorf("the PodMonitor of a RedisPersistence with monitoring off is still there")
		case !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})

	// Turning it off in the spec removes nothing it did not create, and creates nothing.
	noExporter := v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Exporter: v1alpha1.ExporterSpec{Enabled: ptr.To(false)}}
	createRP(t, ns, "unmonitored", noExporter)
	waitCondition(t, ns, "unmonitored", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	if err := get(t, podMonitor, ns, "unmonitored"); !apierrors.IsNotFound(err) {
		t.Errorf("a server without exporter got a PodMonitor (err %v)", err)
	}
}

// mode: none without spec.storage claims nothing, so it schedules on a
// cluster without a default StorageClass (this test bed has none).
func TestNoneWithoutStorageNeedsNoClaim(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "ephemeral", Namespace: ns}, Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone}}
	if err := k8s.Create(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "ephemeral", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "ephemeral"); err != nil {
		t.Fatal(err)
	}
	if n := len(sts.Spec.VolumeClaimTemplates); n != 0 {
		t.Errorf("%d volume claim templates, want none", n)
	}
	var claims corev1.PersistentVolumeClaimList
	if err := k8s.List(context.Background(), &claims, client.InNamespace(ns)); err != nil || len(claims.Items) != 0 {
		t.Errorf("claims %v (err %v), want none", claims.Items, err)
	}
}
