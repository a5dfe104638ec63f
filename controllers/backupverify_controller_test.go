package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// verifiedSource is a namespace with a store and a Ready uring instance
// "source" that backs up there with spec.backup.verify (hourly, 50 keys
// sampled), holding 300 keys of which 20 expire in a day, with its server's
// address and the store.
func verifiedSource(t *testing.T) (ns, addr string, store *backup.Store) {
	t.Helper()
	ns, objects := namespaceWithStore(t)
	dest := destination(objects)
	dest.Verify = &v1alpha1.BackupVerifySpec{Schedule: "@every 1h", SampleKeys: ptr.To[int32](50)}
	createRP(t, ns, "source", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: dest})
	makeReady(t, ns, "source")
	addr = mustLoad(t, &serverAddrs, ns+"/source-0")
	admin := newClient(addr, instancePassword(t, ns, "source"))
	defer func() { _ = admin.Close() }()
	writeKeys(t, admin, "kept", 280)
	for i := range 20 {
		if err := admin.Set(context.Background(), fmt.Sprintf("expiring:%d", i), "v", 24*time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := backup.Open(context.Background(), backup.Destination{Endpoint: objects.Endpoint, Bucket: objects.Bucket, Region: objects.Region,
		AccessKey: objects.AccessKey, SecretKey: objects.SecretKey, Prefix: ns + "/source"})
	if err != nil {
		t.Fatal(err)
	}
	return ns, addr, s
}

// takeBackup takes the RedisBackup name of "source" with the real agent.
func takeBackup(t *testing.T, ns, name, addr string) *v1alpha1.RedisBackup {
	t.Helper()
	createBackup(t, ns, name, "source")
	if code, msg := runBackupPod(t, ns, waitJob(t, ns, name+"-backup"), addr); code != 0 {
		t.Fatalf("the backup %s failed: %s", name, msg)
	}
	return waitBackup(t, ns, name, backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))
}

// runVerification moves the verifier's clock past the next run and has it
// look at the instance; it returns the temporary instance's StatefulSet
// once it restores the backup name.
func runVerification(t *testing.T, ns, name string) *appsv1.StatefulSet {
	t.Helper()
	// A volume for the temporary instance's claim, as a provisioner would
	// make: one per run, as a released volume does not bind again.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns + "-verify-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              storageClass,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "data-source-verify-0"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/verify-" + name}},
		},
	}
	if err := k8s.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	verifyClock.SetTime(verifyClock.Now().Add(61 * time.Minute))
	updateRP(t, ns, "source", func(rp *v1alpha1.RedisPersistence) {
		rp.Annotations = map[string]string{"test/poke": verifyClock.Now().String()}
	})
	temp := &v1alpha1.RedisPersistence{}
	eventually(t, 60*time.Second, func() error {
		if err := get(t, temp, ns, "source-verify"); err != nil {
			return err
		}
		if got := temp.Annotations[specs.AnnotationVerifies]; got != name || !temp.DeletionTimestamp.IsZero() {
			return fmt.Errorf("the temporary instance verifies %q (deleting: %v), want %s", got, !temp.DeletionTimestamp.IsZero(), name)
		}
		return nil
	})
	if temp.Spec.Mode != v1alpha1.ModeUring || temp.Spec.Bootstrap.Recovery.Backup.Name != name || *temp.Spec.Exporter.Enabled {
		t.Errorf("the temporary instance's spec %+v: want mode uring, restoring %s, no exporter", temp.Spec, name)
	}
	waitBackup(t, ns, name, verificationResult(v1alpha1.VerificationRunning, "restoring the backup into the temporary instance source-verify"))
	sts := &appsv1.StatefulSet{}
	eventually(t, 30*time.Second, func() error { return get(t, sts, ns, "source-verify") })
	eventually(t, 30*time.Second, func() error {
		if err := get(t, temp, ns, "source-verify"); err != nil {
			return err
		}
		if temp.Status.Recovery == nil {
			return fmt.Errorf("status.recovery not set yet")
		}
		return nil
	})
	return sts
}

// verificationResult checks status.verification's result and that its
// message, or the Verified condition's, says want.
func verificationResult(result v1alpha1.VerificationResult, want string) func(*v1alpha1.RedisBackup) error {
	return func(b *v1alpha1.RedisBackup) error {
		v := b.Status.Verification
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionVerified)
		if v == nil || v.Result != result || c == nil || !strings.Contains(v.Message+c.Message, want) {
			return fmt.Errorf("verification %+v, condition %+v; want %s saying %q", v, c, result, want)
		}
		return nil
	}
}

// waitTemporaryGone waits for the temporary instance to go, with the
// deletion of its volume claim asked. Then it plays the kubelet, which
// removes the pod the garbage collector deleted, and the PVC protection
// controller, which lets the claim go once no pod uses it: neither runs
// here.
func waitTemporaryGone(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	claim := &corev1.PersistentVolumeClaim{}
	eventually(t, 60*time.Second, func() error {
		if err := get(t, &v1alpha1.RedisPersistence{}, ns, "source-verify"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the temporary instance is still there (%w)", err)
		}
		if err := get(t, claim, ns, "data-source-verify-0"); err != nil {
			return fmt.Errorf("the temporary instance's volume claim: %w", err)
		}
		if claim.DeletionTimestamp.IsZero() {
			return fmt.Errorf("the temporary instance's volume claim %s is kept", claim.Name)
		}
		return nil
	})
	eventually(t, 60*time.Second, func() error {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, "source-verify-0"); err == nil {
			if pod.DeletionTimestamp.IsZero() {
				return fmt.Errorf("the pod %s is not deleted yet", pod.Name)
			}
			if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
				return err
			}
			return fmt.Errorf("the pod %s was still there", pod.Name)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if err := get(t, claim, ns, claim.Name); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		claim.Finalizers = nil
		if err := k8s.Update(ctx, claim); err != nil {
			return err
		}
		return fmt.Errorf("the claim %s was still there", claim.Name)
	})
}

// TestVerifiedBackups: spec.backup.verify restores the newest backup into
// a temporary instance (the real agent restores it, a real server loads
// it), compares it with the keys the backup recorded from its snapshot,
// reports the result on the RedisBackup, in an event and in the metrics,
// and deletes the temporary instance and its claim. A backup whose
// backup.json no longer matches its snapshot, or whose snapshot was
// replaced in the store, fails, saying how.
func TestVerifiedBackups(t *testing.T) {
	ctx := context.Background()
	ns, addr, store := verifiedSource(t)

	good := takeBackup(t, ns, "good", addr)
	if good.Status.Keys == nil || *good.Status.Keys != 300 {
		t.Fatalf("status.keys %v, want the 300 keys of the snapshot", good.Status.Keys)
	}
	sts := runVerification(t, ns, "good")
	restoreAndServe(t, ns, sts)
	b := waitBackup(t, ns, "good", verificationResult(v1alpha1.VerificationVerified,
		"the restore holds 300 keys (280 without a TTL) of the 300 recorded at the backup's point; 50 sampled keys checked: all match"))
	if v := b.Status.Verification; v.Keys == nil || *v.Keys != 300 || v.FinishedAt == nil || v.Instance != "source-verify" {
		t.Errorf("status.verification %+v: want 300 keys, finishedAt and the instance", v)
	}
	waitEvent(t, ns, "good", ReasonVerified)
	waitTemporaryGone(t, ns)
	labels := prometheus.Labels{"namespace": ns, "backup": "good", "redispersistence": "source"}
	eventually(t, 10*time.Second, func() error {
		if got := testutil.ToFloat64(backupVerified.With(labels)); got != float64(b.Status.Verification.FinishedAt.Unix()) {
			return fmt.Errorf("uringredis_backup_verified_timestamp_seconds %v", got)
		}
		if got := testutil.ToFloat64(backupVerificationFailed.With(labels)); got != 0 {
			return fmt.Errorf("uringredis_backup_verification_failed %v for a verified backup", got)
		}
		return nil
	})

	// backup.json records one more key without a TTL, one fewer with.
	takeBackup(t, ns, "miscounted", addr)
	tamperMetadata(t, store, "miscounted", func(m *backup.Metadata) { m.Keyspace.DBs[0].Expires-- })
	restoreAndServe(t, ns, runVerification(t, ns, "miscounted"))
	waitBackup(t, ns, "miscounted", verificationResult(v1alpha1.VerificationFailed,
		"db 0 holds 280 keys without a TTL, the backup recorded 281; db 0 holds 20 keys with a TTL, more than the 19 the backup recorded"))
	waitEvent(t, ns, "miscounted", ReasonVerificationFailed)
	waitEvent(t, ns, "source", ReasonVerificationFailed)
	waitTemporaryGone(t, ns)
	eventually(t, 10*time.Second, func() error {
		if got := testutil.ToFloat64(backupVerificationFailed.With(prometheus.Labels{"namespace": ns, "backup": "miscounted", "redispersistence": "source"})); got != 1 {
			return fmt.Errorf("uringredis_backup_verification_failed %v, want 1", got)
		}
		return nil
	})

	// The snapshot in the store is not the one backed up: the restore
	// container refuses it, and the verification fails with its words.
	takeBackup(t, ns, "replaced", addr)
	snapshot, _ := backup.ObjectKeys("replaced")
	if err := store.PutBytes(ctx, snapshot+".zst", []byte("not the snapshot")); err != nil {
		t.Fatal(err)
	}
	sts = runVerification(t, ns, "replaced")
	code, out := runRestoreContainer(t, ns, sts, "source-verify-0", t.TempDir())
	if code == 0 {
		t.Fatalf("the restore of a replaced snapshot succeeded: %s", out)
	}
	failRestore(t, ns, "source-verify-0", int32(code), out)
	b = waitBackup(t, ns, "replaced", verificationResult(v1alpha1.VerificationFailed,
		"the restore refused the backup: uring-backup: downloading "+ns+"/source/backups/replaced/dump.rdb.zst"))
	if b.Status.Verification.Keys != nil {
		t.Errorf("a backup that did not restore has status.verification.keys %d", *b.Status.Verification.Keys)
	}
	waitTemporaryGone(t, ns)
}

// restoreAndServe plays the kubelet for the temporary instance's pod: the
// real restore container on a new volume, a real server on it, the pod
// Ready.
func restoreAndServe(t *testing.T, ns string, sts *appsv1.StatefulSet) {
	t.Helper()
	dir := t.TempDir()
	if code, out := runRestoreContainer(t, ns, sts, "source-verify-0", dir); code != 0 {
		t.Fatalf("the restore container of source-verify-0: exit %d, %q", code, out)
	}
	server := testenv.RunServer(t, dir, renderedConfig(t, ns, "source-verify"))
	t.Cleanup(func() { serverAddrs.Delete(ns + "/source-verify-0") })
	serverAddrs.Store(ns+"/source-verify-0", server.Addr)
	c := newClient(server.Addr, instancePassword(t, ns, "source-verify"))
	defer func() { _ = c.Close() }()
	waitLoaded(t, c)
	actAsKubelet(t, ns, "source-verify-0", "ext4")
}

// failRestore plays the kubelet for a pod whose restore container ended
// with code and its output as the termination message.
func failRestore(t *testing.T, ns, podName string, code int32, output string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, podName); err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodPending
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{
			Name: specs.ContainerRestore, Image: "uring-redis-operator:test", ImageID: "uring-redis-operator@sha256:0",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: output,
				StartedAt: metav1.Now(), FinishedAt: metav1.Now()}},
		}}
		return k8s.Status().Update(context.Background(), pod)
	})
}

// tamperMetadata rewrites the backup's backup.json in the store.
func tamperMetadata(t *testing.T, store *backup.Store, name string, change func(*backup.Metadata)) {
	t.Helper()
	ctx := context.Background()
	_, key := backup.ObjectKeys(name)
	raw, err := store.GetBytes(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	m, err := backup.DecodeMetadata(raw)
	if err != nil {
		t.Fatal(err)
	}
	if m.Keyspace == nil || len(m.Keyspace.DBs) == 0 || len(m.Keyspace.Sample) != 50 {
		t.Fatalf("backup.json of %s records the keyspace %+v: want the counts and 50 sampled keys", name, m.Keyspace)
	}
	change(&m)
	whole, err := m.EncodeWhole()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutBytes(ctx, key, whole); err != nil {
		t.Fatal(err)
	}
}
