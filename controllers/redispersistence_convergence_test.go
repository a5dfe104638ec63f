package controllers

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// proxy forwards connections to a real server, counting them and delaying
// every chunk a client sends by delay: a server behind a slow network.
type proxy struct {
	addr        string
	connections atomic.Int64
}

func startProxy(t *testing.T, upstream string, delay time.Duration) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &proxy{addr: ln.Addr().String()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.connections.Add(1)
			go p.forward(conn, upstream, delay)
		}
	}()
	return p
}

func (p *proxy) forward(conn net.Conn, upstream string, delay time.Duration) {
	defer func() { _ = conn.Close() }()
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	go func() { _, _ = io.Copy(conn, up) }()
	buf := make([]byte, 64<<10)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		time.Sleep(delay)
		if _, err := up.Write(buf[:n]); err != nil {
			return
		}
	}
}

func reconcileNow(t *testing.T, ns, name string) (ctrl.Result, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	return res, time.Since(start)
}

// readyInstance creates an instance of spec with a real server behind it,
// reached through a proxy with delay, and waits until it is Ready.
func readyInstance(t *testing.T, ns, name string, spec v1alpha1.RedisPersistenceSpec, delay time.Duration) *proxy {
	t.Helper()
	createRP(t, ns, name, spec)
	waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	p := startProxy(t, testenv.StartServer(t, renderedConfig(t, ns, name)), delay)
	serverAddrs.Store(ns+"/"+name+"-0", p.addr)
	actAsKubelet(t, ns, name+"-0", "ext4")
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	return p
}

// A burst of reconciles asks the server for its INFO once, not once each;
// a Ready server whose options are applied is not asked to apply them again.
func TestServerInfoIsRateLimited(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	p := readyInstance(t, ns, "probed", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF}, 0)
	before := p.connections.Load()
	for range 5 {
		reconcileNow(t, ns, "probed")
	}
	if n := p.connections.Load() - before; n > 1 {
		t.Errorf("5 reconciles within %s dialled the server %d times, want at most once", infoMaxAge, n)
	}
}

// However slow the server, a reconcile gives up on it after serverBudget.
func TestReconcileIsBoundedOnASlowServer(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	// Options at their defaults: each is one more CONFIG GET when the runtime options change.
	defaults := map[string]v1alpha1.ServerOptionValue{
		"hz": "10", "maxmemory-policy": "noeviction", "lazyfree-lazy-eviction": "no", "lazyfree-lazy-expire": "no",
		"slowlog-log-slower-than": "10000", "slowlog-max-len": "128", "latency-monitor-threshold": "0", "timeout": "0",
		"tcp-keepalive": "300", "activerehashing": "yes", "busy-reply-threshold": "5000", "list-max-listpack-size": "-2",
		"hash-max-listpack-entries": "128", "set-max-intset-entries": "512",
	}
	readyInstance(t, ns, "slow", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Config: defaults}, 0)
	// Every request now takes about a second (under the 2 s read timeout),
	// and a changed runtime option makes the reconcile CONFIG GET all 22.
	slow := startProxy(t, serverAddress(t, ns, "slow-0"), 900*time.Millisecond)
	serverAddrs.Store(ns+"/slow-0", slow.addr)
	rp := updateRP(t, ns, "slow", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Uring = &v1alpha1.UringSpec{QueueDepth: 512} })
	eventually(t, 30*time.Second, func() error {
		cached := &v1alpha1.RedisPersistence{}
		if err := reconciler.Get(context.Background(), client.ObjectKeyFromObject(rp), cached); err != nil {
			return err
		}
		if cached.Generation != rp.Generation {
			return fmt.Errorf("the operator's cache has generation %d, want %d", cached.Generation, rp.Generation)
		}
		return nil
	})
	// serverBudget (8 s) and the reconcile's requests to the API server,
	// which a machine busy with the other test packages slows by seconds
	// (10.8 s seen in CI); without the budget it takes over 20 s.
	_, took := reconcileNow(t, ns, "slow")
	t.Logf("a reconcile took %s on the slow server", took)
	if took < 4*time.Second {
		t.Fatalf("the reconcile took %s: it did not wait on the slow server, the test lost its premise", took)
	}
	if limit := serverBudget + 4*time.Second; took > limit {
		t.Errorf("a reconcile took %s on a slow server, want at most %s", took, limit)
	}
}

// A mode change the server cannot serve is retried with the workqueue's
// backoff, not every few seconds for as long as it fails.
func TestBlockedModeChangeBacksOff(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "stuck", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF})
	waitCondition(t, ns, "stuck", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	actAsKubelet(t, ns, "stuck-0", "ext4") // ready, but no server behind it
	updateRP(t, ns, "stuck", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Mode, rp.Spec.AOF = v1alpha1.ModeRDB, nil
		rp.Spec.RDB = &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 60, Changes: 1}}}
	})
	waitCondition(t, ns, "stuck", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonModeChangeBlocked)
	if res, _ := reconcileNow(t, ns, "stuck"); res.RequeueAfter != 0 || !res.Requeue {
		t.Errorf("result %+v: want a requeue with backoff (Requeue), not a fixed RequeueAfter", res)
	}
}

// Node Feature Discovery appearing on the nodes, or leaving them, changes no
// pod template: no server restarts.
func TestNodeRelabellingKeepsThePodTemplate(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "steady", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	waitCondition(t, ns, "steady", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "steady"); err != nil {
		t.Fatal(err)
	}
	template := sts.Spec.Template.DeepCopy()
	revisions := func() int {
		var list appsv1.ControllerRevisionList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	eventually(t, 30*time.Second, func() error {
		if revisions() == 0 {
			return fmt.Errorf("the StatefulSet controller made no revision yet")
		}
		return nil
	})
	before := revisions()

	relabel := func(nfd bool) {
		for name, kernel := range nodesOnce {
			major, minor, _ := specs.ParseMajorMinor(kernel)
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null,%q:null}}}`, specs.NFDKernelLabels.Major, specs.NFDKernelLabels.Minor)
			if nfd {
				patch = fmt.Sprintf(`{"metadata":{"labels":{%q:"%d",%q:"%d"}}}`, specs.NFDKernelLabels.Major, major, specs.NFDKernelLabels.Minor, minor)
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if err := k8s.Patch(context.Background(), node, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { relabel(false) })
	for _, nfd := range []bool{true, false} {
		relabel(nfd)
		// The node watch reconciles every instance; one more, once the
		// operator's cache holds the new labels, to be sure one ran after
		// the relabelling.
		eventually(t, 30*time.Second, func() error {
			for name := range nodesOnce {
				node := &corev1.Node{}
				if err := reconciler.Get(context.Background(), client.ObjectKey{Name: name}, node); err != nil {
					return err
				}
				if _, labelled := node.Labels[specs.NFDKernelLabels.Major]; labelled != nfd {
					return fmt.Errorf("the operator's cache holds node %s with the labels %v", name, node.Labels)
				}
			}
			return nil
		})
		reconcileNow(t, ns, "steady")
		if err := get(t, sts, ns, "steady"); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(sts.Spec.Template, *template) {
			t.Errorf("NFD labels present=%v changed the pod template: %s", nfd, cmp.Diff(*template, sts.Spec.Template))
		}
		if n := revisions(); n != before {
			t.Errorf("NFD labels present=%v: %d controller revisions, was %d", nfd, n, before)
		}
	}
}

// The operator's informers hold only the objects it manages (and, for
// Secrets, metadata without annotations).
func TestCacheHoldsOnlyManagedObjects(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns}}
	managed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "managed", Namespace: ns, Labels: map[string]string{specs.LabelManagedBy: specs.FieldOwner}}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "auth", Namespace: ns,
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"c2VjcmV0"}}`}}}
	for _, obj := range []client.Object{foreign, managed, secret} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, func() error {
		return reconciler.Get(ctx, client.ObjectKeyFromObject(managed), &corev1.ConfigMap{})
	})
	if err := reconciler.Get(ctx, client.ObjectKeyFromObject(foreign), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("a ConfigMap the operator did not make is cached (err %v)", err)
	}
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	eventually(t, 30*time.Second, func() error { return reconciler.Get(ctx, client.ObjectKeyFromObject(secret), cached) })
	if len(cached.Annotations) != 0 {
		t.Errorf("the cached Secret metadata keeps annotations %v", cached.Annotations)
	}
}

// spec.storage.size grows the claim where the StorageClass allows expansion
// and says why not elsewhere; the StatefulSet keeps its claim template.
func TestStorageGrows(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	ctx := context.Background()
	expandable := expandableClass(t)
	createRP(t, ns, "fixed", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF})
	createVolumeOfClass(t, ns, "data-growing-0", expandable.Name)
	growing := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "growing", Namespace: ns}, Spec: v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, Storage: &v1alpha1.StorageSpec{StorageClassName: expandable.Name}}}
	if err := k8s.Create(ctx, growing); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fixed", "growing"} {
		waitCondition(t, ns, name, v1alpha1.ConditionStorageResized, metav1.ConditionTrue, ReasonVolumeSized)
		updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) {
			rp.Spec.Storage.Size = ptr.To(resource.MustParse("16Gi"))
		})
	}

	got := waitCondition(t, ns, "fixed", v1alpha1.ConditionStorageResized, metav1.ConditionFalse, ReasonExpansionNotAllowed)
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStorageResized).Message; !strings.Contains(msg, `"`+storageClass+`" does not allow volume expansion`) {
		t.Errorf("message %q does not name the class and why", msg)
	}
	waitCondition(t, ns, "growing", v1alpha1.ConditionStorageResized, metav1.ConditionFalse, ReasonVolumeExpanding)
	claim := &corev1.PersistentVolumeClaim{}
	if err := get(t, claim, ns, "data-growing-0"); err != nil {
		t.Fatal(err)
	}
	if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("16Gi")) != 0 {
		t.Errorf("the claim asks for %s, want 16Gi", got.String())
	}
	for _, name := range []string{"fixed", "growing"} {
		sts := &appsv1.StatefulSet{}
		if err := get(t, sts, ns, name); err != nil {
			t.Fatal(err)
		}
		if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("8Gi")) != 0 {
			t.Errorf("%s: the claim template changed to %s; it cannot", name, got.String())
		}
		if c := meta.FindStatusCondition(fetchRP(t, ns, name).Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == ReasonApplyFailed {
			t.Errorf("%s: Ready %+v: applying failed", name, c)
		}
	}
}

// A sharded instance's data claims grow as a single server's do: every
// shard's, through the same resize.
func TestShardStorageGrows(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	expandable := expandableClass(t)
	claims := []string{"data-shards-s0-0", "data-shards-s1-0", "data-shards-s2-0"}
	for _, claim := range claims {
		createVolumeOfClass(t, ns, claim, expandable.Name)
	}
	createRP(t, ns, "shards", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF,
		Cluster: &v1alpha1.ClusterSpec{Shards: 3, ReplicasPerShard: ptr.To[int32](0)},
		Storage: &v1alpha1.StorageSpec{StorageClassName: expandable.Name}})
	waitCondition(t, ns, "shards", v1alpha1.ConditionStorageResized, metav1.ConditionTrue, ReasonVolumeSized)
	updateRP(t, ns, "shards", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Storage.Size = ptr.To(resource.MustParse("16Gi"))
	})
	waitCondition(t, ns, "shards", v1alpha1.ConditionStorageResized, metav1.ConditionFalse, ReasonVolumeExpanding)
	for _, name := range claims {
		claim := &corev1.PersistentVolumeClaim{}
		if err := get(t, claim, ns, name); err != nil {
			t.Fatal(err)
		}
		if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("16Gi")) != 0 {
			t.Errorf("the claim %s asks for %s, want 16Gi", name, got.String())
		}
	}
}

// expandableClass is a StorageClass that allows volume expansion.
func expandableClass(t *testing.T) *storagev1.StorageClass {
	t.Helper()
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: "test-expandable"},
		Provisioner:          "kubernetes.io/no-provisioner",
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}
	if err := k8s.Create(context.Background(), class); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return class
}

func fetchRP(t *testing.T, ns, name string) *v1alpha1.RedisPersistence {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	if err := get(t, rp, ns, name); err != nil {
		t.Fatal(err)
	}
	return rp
}
