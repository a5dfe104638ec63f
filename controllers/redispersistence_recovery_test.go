package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// runRestoreContainer plays the kubelet for the restore container of the
// StatefulSet's pod podName: the real agent with the container's command
// line and environment (Secrets and ConfigMap resolved), on dataDir.
func runRestoreContainer(t *testing.T, ns string, sts *appsv1.StatefulSet, podName, dataDir string) (exitCode int, output string) {
	t.Helper()
	c := specstest.ContainerNamed(t, sts, specs.ContainerRestore)
	args := []string{"restore"}
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "--data-dir=") {
			arg = "--data-dir=" + dataDir
		}
		args = append(args, arg)
	}
	code, stdout, stderr := runAgent(t, ns, &c, args, "HOSTNAME="+podName)
	return code, stdout + stderr
}

// backupSource is a namespace with a store and, in it, a Ready uring
// instance "source" that backs up there, with its server's address and a
// client of it.
func backupSource(t *testing.T) (ns string, store *testenv.ObjectStore, addr string, admin *redis.Client) {
	t.Helper()
	ns, store = namespaceWithStore(t)
	createRP(t, ns, "source", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store)})
	makeReady(t, ns, "source")
	addr = mustLoad(t, &serverAddrs, ns+"/source-0")
	admin = newClient(addr, instancePassword(t, ns, "source"))
	t.Cleanup(func() { _ = admin.Close() })
	return ns, store, addr, admin
}

// TestRestoreFromBackup: an instance with spec.bootstrap.recovery makes no
// server while its RedisBackup is not Completed; then its pods' restore
// container (the real agent, against a real SeaweedFS) puts the backup into
// ordinal 0's empty volume, and the server loads exactly the backed-up keys.
// Once the instance is Ready the restore is recorded and the container
// restores nothing more, on that volume or any other, without a change to
// the pod template.
func TestRestoreFromBackup(t *testing.T) {
	ctx := context.Background()
	ns, store, sourceAddr, admin := backupSource(t)
	writeKeys(t, admin, "backed-up", 300)
	createBackup(t, ns, "nightly", "source")
	job := waitJob(t, ns, "nightly-backup")

	// The copy waits for the backup.
	createRP(t, ns, "copy", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store),
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Backup: &v1alpha1.LocalObjectReference{Name: "nightly"}}}})
	waitCondition(t, ns, "copy", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonRecoveryWaiting)
	if err := get(t, &appsv1.StatefulSet{}, ns, "copy"); !apierrors.IsNotFound(err) {
		t.Fatalf("the copy has a StatefulSet (err %v) before its backup is Completed", err)
	}

	if code, msg := runBackupPod(t, ns, job, sourceAddr); code != 0 {
		t.Fatalf("the backup failed: %s", msg)
	}
	b := waitBackup(t, ns, "nightly", backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))
	if err := admin.Set(ctx, "after-backup", "not restored", 0).Err(); err != nil {
		t.Fatal(err)
	}

	sts := &appsv1.StatefulSet{}
	eventually(t, 30*time.Second, func() error { return get(t, sts, ns, "copy") })
	rp := &v1alpha1.RedisPersistence{}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rp, ns, "copy"); err != nil {
			return err
		}
		if rec := rp.Status.Recovery; rec == nil || rec.Backup != "nightly" || rec.Location != b.Status.Location || rec.SHA256 != b.Status.SHA256 {
			return fmt.Errorf("status.recovery %+v, want the backup nightly's snapshot", rp.Status.Recovery)
		}
		return nil
	})
	beforeRestore := rp.DeepCopy()
	template := sts.Spec.Template.DeepCopy()

	// A replica's volume is never restored into.
	if code, out := runRestoreContainer(t, ns, sts, "copy-1", t.TempDir()); code != 0 || !strings.Contains(out, "not ordinal 0") {
		t.Errorf("the restore container of copy-1: exit %d, %q; want it to do nothing", code, out)
	}
	dir := t.TempDir()
	if code, out := runRestoreContainer(t, ns, sts, "copy-0", dir); code != 0 || !strings.Contains(out, "restored backup nightly") {
		t.Fatalf("the restore container of copy-0: exit %d, %q", code, out)
	}
	server := testenv.RunServer(t, dir, renderedConfig(t, ns, "copy"))
	serverAddrs.Store(ns+"/copy-0", server.Addr)
	restored := newClient(server.Addr, instancePassword(t, ns, "copy"))
	defer func() { _ = restored.Close() }()
	waitLoaded(t, restored)
	if missing := missingKeys(t, restored, "backed-up", 300); missing > 0 {
		t.Errorf("the restored server lacks %d of the 300 backed-up keys", missing)
	}
	if n, err := restored.Exists(ctx, "after-backup").Result(); err != nil || n != 0 {
		t.Errorf("the restored server has the key written after the backup (%d, %v)", n, err)
	}

	actAsKubelet(t, ns, "copy-0", "ext4")
	waitCondition(t, ns, "copy", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rp, ns, "copy"); err != nil {
			return err
		}
		if rp.Status.Recovery == nil || rp.Status.Recovery.RestoredAt == nil {
			return fmt.Errorf("status.recovery %+v, want restoredAt", rp.Status.Recovery)
		}
		cm := &corev1.ConfigMap{}
		if err := get(t, cm, ns, specs.RecoveryConfigMapName(rp)); err != nil {
			return err
		}
		if cm.Data[specs.RecoveryLocationKey] != "" {
			return fmt.Errorf("the ConfigMap still names %q", cm.Data[specs.RecoveryLocationKey])
		}
		return nil
	})
	waitEvent(t, ns, "copy", "Restored")

	// From now on the container restores nothing: a lost volume starts empty
	// as any other, and the template is the one the servers started with.
	if code, out := runRestoreContainer(t, ns, sts, "copy-0", t.TempDir()); code != 0 || !strings.Contains(out, "nothing to restore") {
		t.Errorf("the restore container after the restore: exit %d, %q; want it to do nothing", code, out)
	}
	if err := get(t, sts, ns, "copy"); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(template, &sts.Spec.Template) {
		t.Error("the pod template changed when the restore finished: the pods would restart")
	}

	// A reconcile whose cache still holds the instance as it was before the
	// restore finished (the operator's own status write not seen yet) must
	// not name the backup again, not even until it empties the ConfigMap
	// once more: the ConfigMap, already as it should stay, is not written.
	cm := &corev1.ConfigMap{}
	if err := get(t, cm, ns, specs.RecoveryConfigMapName(rp)); err != nil {
		t.Fatal(err)
	}
	written := cm.ResourceVersion
	stale := &RedisPersistenceReconciler{Client: cacheBehind{Client: k8s, rp: beforeRestore}, APIReader: k8s, Options: reconciler.Options,
		Recorder: reconciler.Recorder, Clock: reconciler.Clock, ServerAddress: reconciler.ServerAddress, SentinelAddress: reconciler.SentinelAddress, cache: reconciler.cache}
	stale.probes.clock = reconciler.probes.clock
	if _, err := stale.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rp)}); err != nil {
		t.Fatalf("a reconcile from a stale cache: %v", err)
	}
	if err := get(t, cm, ns, specs.RecoveryConfigMapName(rp)); err != nil {
		t.Fatal(err)
	}
	if cm.ResourceVersion != written || cm.Data[specs.RecoveryLocationKey] != "" {
		t.Errorf("a reconcile from a stale cache wrote the ConfigMap %s (resourceVersion %s -> %s, location now %q): it named the backup again, for any volume starting then",
			cm.Name, written, cm.ResourceVersion, cm.Data[specs.RecoveryLocationKey])
	}
}

// cacheBehind reads the RedisPersistence rp as it was, as a cache does that
// has not seen the latest writes yet; every other read and every write goes
// to the API server.
type cacheBehind struct {
	client.Client
	rp *v1alpha1.RedisPersistence
}

func (c cacheBehind) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if rp, ok := obj.(*v1alpha1.RedisPersistence); ok && key == client.ObjectKeyFromObject(c.rp) {
		c.rp.DeepCopyInto(rp)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestRestoreFromStoredBackup: the namespace that took the backups, and
// every RedisBackup object, are gone; the bucket is not. An instance in
// another namespace restores from the store alone
// (spec.bootstrap.recovery.storedBackup): the newest backup when it names
// none, the named one otherwise, each found by its backup.json and checked
// as a RedisBackup's would be. A name the store does not hold waits, saying
// where it looked.
func TestRestoreFromStoredBackup(t *testing.T) {
	ctx := context.Background()
	ns, store, sourceAddr, admin := backupSource(t)
	backUp := func(name string) *v1alpha1.RedisBackup {
		t.Helper()
		createBackup(t, ns, name, "source")
		if code, msg := runBackupPod(t, ns, waitJob(t, ns, name+"-backup"), sourceAddr); code != 0 {
			t.Fatalf("the backup %s failed: %s", name, msg)
		}
		return waitBackup(t, ns, name, backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))
	}
	writeKeys(t, admin, "first", 200)
	first := backUp("first")
	writeKeys(t, admin, "second", 100)
	second := backUp("second")
	// What a lost cluster leaves: nothing but the store.
	for _, obj := range []client.Object{first, second, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "source"}}} {
		if err := k8s.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	elsewhere := newNamespace(t)
	if err := k8s.Create(ctx, storeSecret(elsewhere, store, store.SecretKey)); err != nil {
		t.Fatal(err)
	}
	path := ns + "/source" // the source's spec.backup.destination.s3.path, which it left to the default
	restore := func(name, backupName string, want *v1alpha1.RedisBackup) *redis.Client {
		t.Helper()
		createRP(t, elsewhere, name, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store),
			Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{StoredBackup: &v1alpha1.StoredBackupRecovery{Path: path, Name: backupName}}}})
		rp := &v1alpha1.RedisPersistence{}
		eventually(t, 30*time.Second, func() error {
			if err := get(t, rp, elsewhere, name); err != nil {
				return err
			}
			if rec := rp.Status.Recovery; rec == nil || rec.Backup != want.Name || rec.Location != want.Status.Location || rec.SHA256 != want.Status.SHA256 {
				return fmt.Errorf("status.recovery %+v, want the backup %s (%s)", rp.Status.Recovery, want.Name, want.Status.Location)
			}
			return nil
		})
		sts := &appsv1.StatefulSet{}
		eventually(t, 30*time.Second, func() error { return get(t, sts, elsewhere, name) })
		dir := t.TempDir()
		if code, out := runRestoreContainer(t, elsewhere, sts, name+"-0", dir); code != 0 || !strings.Contains(out, "restored backup "+want.Name) {
			t.Fatalf("the restore container of %s-0: exit %d, %q", name, code, out)
		}
		server := testenv.RunServer(t, dir, renderedConfig(t, elsewhere, name))
		c := newClient(server.Addr, instancePassword(t, elsewhere, name))
		t.Cleanup(func() { _ = c.Close() })
		waitLoaded(t, c)
		return c
	}

	newest := restore("newest", "", second)
	if missing := missingKeys(t, newest, "first", 200) + missingKeys(t, newest, "second", 100); missing > 0 {
		t.Errorf("restored from the newest backup, the server lacks %d of the 300 keys", missing)
	}
	named := restore("named", "first", first)
	if missing := missingKeys(t, named, "first", 200); missing > 0 {
		t.Errorf("restored from the backup first, the server lacks %d of its 200 keys", missing)
	}
	if n, err := named.DBSize(ctx).Result(); err != nil || n != 200 {
		t.Errorf("restored from the backup first, the server holds %d keys (%v), want its 200", n, err)
	}

	createRP(t, elsewhere, "missing", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store),
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{StoredBackup: &v1alpha1.StoredBackupRecovery{Path: path, Name: "nope"}}}})
	waitConditionMessage(t, elsewhere, "missing", ReasonRecoveryWaiting, "s3://"+store.Bucket+"/"+path+"/backups/nope/backup.json does not exist")
	if err := get(t, &appsv1.StatefulSet{}, elsewhere, "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("an instance whose stored backup is not in the store has a StatefulSet (err %v)", err)
	}
}
