//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
)

// backedUp is an instance with known keys and a Completed RedisBackup of
// them, taken once by the first test that needs it: TestBackupToObjectStore
// checks the backup, TestRestoreFromBackup restores it.
type backedUp struct {
	instance string
	backup   *v1alpha1.RedisBackup
	// keys are every key written before the backup, with its value; the
	// ones in expiring were written with an expiry an hour away.
	keys     map[string]string
	expiring []string
	// written is when the last key was acknowledged by a replica too.
	written time.Time
}

var sharedBackup struct {
	sync.Mutex
	attempted bool
	b         *backedUp
}

// backupOfKnownKeys returns the shared backup, taking it on first use.
func backupOfKnownKeys(t *testing.T) *backedUp {
	t.Helper()
	sharedBackup.Lock()
	defer sharedBackup.Unlock()
	if sharedBackup.attempted {
		if sharedBackup.b == nil {
			t.Fatal("the backup of known keys failed in an earlier test")
		}
		return sharedBackup.b
	}
	sharedBackup.attempted = true
	sharedBackup.b = takeBackupOfKnownKeys(t)
	return sharedBackup.b
}

// backupSpec is spec.backup for the suite's object store, signing in with
// the Secret secretName of the test namespace.
func backupSpec(endpoint, secretName string) *v1alpha1.BackupSpec {
	return &v1alpha1.BackupSpec{Destination: v1alpha1.BackupDestination{S3: v1alpha1.S3Destination{
		Endpoint: endpoint, Bucket: storeBucket, Region: storeRegion,
		Credentials: v1alpha1.S3Credentials{SecretName: secretName},
	}}}
}

// createStoreSecret makes the credentials Secret name in the test namespace,
// with the store's access key and secretKey.
func createStoreSecret(t *testing.T, name, secretKey string) {
	t.Helper()
	createStoreSecretIn(t, namespace, name, storeAccessKey, secretKey)
}

// createStoreSecretIn is createStoreSecret in the namespace ns.
func createStoreSecretIn(t *testing.T, ns, name, accessKey, secretKey string) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(accessKey), "AWS_SECRET_ACCESS_KEY": []byte(secretKey)},
	}
	if err := k8s.Create(context.Background(), secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// archiveInterval is how often the backed-up instance ships its AOF.
const archiveInterval = 5 * time.Second

// replicatedBackupSource is the spec of the instance the backups are taken
// of and restored into: uring durable, a primary, a replica and a Sentinel,
// its backups encrypted by the store (SSE-S3) and its AOF archived.
func replicatedBackupSource(endpoint string) v1alpha1.RedisPersistenceSpec {
	storage := localNVMe
	backupTo := backupSpec(endpoint, "backup-store")
	backupTo.Destination.S3.ServerSideEncryption = v1alpha1.SSES3
	backupTo.Archive = &v1alpha1.ArchiveSpec{Interval: &metav1.Duration{Duration: archiveInterval}}
	return v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable},
		Replicas: 2, Sentinel: &v1alpha1.SentinelSpec{Count: 1, Quorum: 1},
		Storage: &storage,
		Backup:  backupTo,
	}
}

func takeBackupOfKnownKeys(t *testing.T) *backedUp {
	t.Helper()
	const name = "backup-src"
	endpoint := objectStore(t)
	createStoreSecret(t, "backup-store", storeSecretKey)
	// Not create(): the instance outlives this test when TestRestoreFromBackup
	// runs next, which deletes it; otherwise the suite's namespace goes with it.
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: replicatedBackupSource(endpoint)}
	if err := k8s.Create(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	rp = waitFor(t, name, 6*time.Minute, hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating"))

	b := &backedUp{instance: name, keys: map[string]string{}}
	var script strings.Builder
	for i := range 500 {
		key, value := fmt.Sprintf("before:%04d", i), fmt.Sprintf("value:%d", i)
		b.keys[key] = value
		fmt.Fprintf(&script, "SET %s %s\n", key, value)
	}
	for i := range 20 {
		key := fmt.Sprintf("expiring:%02d", i)
		b.keys[key], b.expiring = "soon", append(b.expiring, key)
		fmt.Fprintf(&script, "SET %s soon EX 3600\n", key)
	}
	writeAndReplicate(t, rp.Status.Primary, script.String(), len(b.keys))
	b.written = time.Now()

	manifest := fmt.Sprintf("apiVersion: persistence.uringredis.io/v1alpha1\nkind: RedisBackup\nmetadata: {name: %s, namespace: %s}\nspec: {redisPersistence: {name: %s}}\n",
		name, namespace, name)
	start := time.Now()
	kubectlApply(t, manifest)
	b.backup = waitBackup(t, name, v1alpha1.BackupCompleted, 5*time.Minute)
	st := b.backup.Status
	took := time.Since(start).Round(100 * time.Millisecond)
	var job time.Duration
	if st.StartedAt != nil && st.CompletedAt != nil {
		job = st.CompletedAt.Sub(st.StartedAt.Time).Round(100 * time.Millisecond)
	}
	t.Logf("backup %s of %d keys: %d bytes from %s, Completed %s after kubectl apply (Job started to verified in the store: %s)",
		name, len(b.keys), st.Size, st.SourcePod, took, job)
	return b
}

// writeAndReplicate sends script's writes to the primary on one connection
// and waits until a replica has them (WAIT is about the connection's own
// writes), so a snapshot from the replica holds all of them.
func writeAndReplicate(t *testing.T, primary, script string, writes int) {
	t.Helper()
	out := podExec(t, primary, script+"WAIT 1 10000\n", "valkey-cli")
	lines := strings.Split(out, "\n")
	if acked := strings.Count(out, "OK"); acked != writes || lines[len(lines)-1] != "1" {
		t.Fatalf("%d of %d writes acknowledged, WAIT answered %q: %.300q", acked, writes, lines[len(lines)-1], out)
	}
}

// TestBackupToObjectStore: a RedisBackup of a replicated uring durable
// instance is taken from its replica, lands in the object store as an RDB,
// encrypted by the store, whose SHA-256 is the one in its status, and a server started on that RDB
// holds exactly the keys written before it, expiries included. A backup
// whose credentials the store refuses fails after its attempts, says to
// check the credentials, and its instance keeps serving writes.
func TestBackupToObjectStore(t *testing.T) {
	endpoint := objectStore(t)
	createStoreSecret(t, "backup-wrong-key", "not-the-secret-key")
	const refused = "backup-refused"
	create(t, refused, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable},
		Backup: backupSpec(endpoint, "backup-wrong-key"),
	})

	b := backupOfKnownKeys(t)
	st := b.backup.Status
	rp := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: b.instance}, rp); err != nil {
		t.Fatal(err)
	}
	if st.SourcePod == "" || st.SourcePod == rp.Status.Primary || !slices.ContainsFunc(rp.Status.Replicas, func(r v1alpha1.ReplicaStatus) bool {
		return r.Pod == st.SourcePod && r.Role == v1alpha1.RoleReplica
	}) {
		t.Errorf("status.sourcePod %q, want a replica (primary %s, replicas %+v)", st.SourcePod, rp.Status.Primary, rp.Status.Replicas)
	}
	if st.Size <= 0 || len(st.SHA256) != 64 || st.Point == nil || !strings.HasPrefix(st.Location, "s3://"+storeBucket+"/") {
		t.Fatalf("status: size %d, sha256 %q, point %v, location %q", st.Size, st.SHA256, st.Point, st.Location)
	}
	// The point is after the writes a replica acknowledged (one-second
	// precision in the status) and before the backup was verified.
	if st.Point.Time.Before(b.written.Truncate(time.Second)) || (st.CompletedAt != nil && st.Point.After(st.CompletedAt.Time)) {
		t.Errorf("status.point %s, want between the last write %s and completedAt %v", st.Point, b.written.UTC(), st.CompletedAt)
	}

	rdb, sse := getObject(t, st.Location)
	if sse != string(v1alpha1.SSES3) {
		t.Errorf("the store reports x-amz-server-side-encryption %q for %s, want %s", sse, st.Location, v1alpha1.SSES3)
	}
	sum := sha256.Sum256(rdb)
	if got := hex.EncodeToString(sum[:]); got != st.SHA256 || int64(len(rdb)) != st.Size {
		t.Fatalf("the object %s: %d bytes, sha256 %s; status says %d bytes, %s", st.Location, len(rdb), got, st.Size, st.SHA256)
	}
	// Compressed by default: the object is a zstd stream of the RDB.
	if !strings.HasSuffix(st.Location, "/dump.rdb.zst") {
		t.Fatalf("status.location %s, want the compressed snapshot dump.rdb.zst", st.Location)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	stored := len(rdb)
	if rdb, err = dec.DecodeAll(rdb, nil); err != nil {
		t.Fatalf("the object %s is no zstd stream: %v", st.Location, err)
	}
	t.Logf("the snapshot: %d bytes of RDB stored as %d", len(rdb), stored)
	if _, _, err := backup.VerifyRDB(bytes.NewReader(rdb)); err != nil {
		t.Fatalf("the object %s is not an RDB the server loads: %v", st.Location, err)
	}
	checkKeys(t, loadRDB(t, getPod(t, b.instance+"-0").Spec.Containers[0].Image, rdb), b)

	// Refused credentials: the attempts fail, the instance serves on.
	waitReady(t, refused)
	kubectlApply(t, fmt.Sprintf("apiVersion: persistence.uringredis.io/v1alpha1\nkind: RedisBackup\nmetadata: {name: %s, namespace: %s}\nspec: {redisPersistence: {name: %s}}\n",
		refused, namespace, refused))
	start := time.Now()
	failed := waitBackup(t, refused, v1alpha1.BackupFailed, 5*time.Minute)
	t.Logf("backup %s Failed %s after kubectl apply: %s", refused, time.Since(start).Round(100*time.Millisecond), failed.Status.Message)
	if msg := failed.Status.Message; !strings.Contains(msg, "3 attempt(s)") || !strings.Contains(msg, "credentials") {
		t.Errorf("status.message %q, want the failed attempts and the credentials named", msg)
	}
	if c := meta.FindStatusCondition(failed.Status.Conditions, v1alpha1.ConditionComplete); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Failed" {
		t.Errorf("condition Complete %+v, want False Failed", c)
	}
	if out := cli(t, refused, "SET", "after-failed-backup", "1"); out != "OK" {
		t.Errorf("SET after the failed backup: %q", out)
	}
	waitReady(t, refused)
}

// TestRestoreFromBackup: more keys are written after the backup, the time
// is noted, more again; the instance backed up is lost with its volumes.
// Disaster recovery from the bucket alone: in a new namespace, which holds
// no RedisBackup and never held the instance, one of the same name
// bootstraps from the backup found in the store (storedBackup, its
// backup.json), and in another the archive is recovered up to the noted
// time: the first's servers hold exactly the keys written before the
// backup, the second's exactly those written before the noted time,
// expiries kept, and neither holds a key written after. (The suite's own
// namespace, which the other scenarios share, is not deleted: the new ones
// stand in for a namespace or a cluster made again.)
func TestRestoreFromBackup(t *testing.T) {
	ctx := context.Background()
	b := backupOfKnownKeys(t)
	name := b.instance
	rp := waitFor(t, name, 2*time.Minute, hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating"))
	endpoint := rp.Spec.Backup.Destination.S3.Endpoint
	uptoTarget := &backedUp{keys: maps.Clone(b.keys), expiring: b.expiring}
	var middle, late strings.Builder
	for i := range 50 {
		key := fmt.Sprintf("middle:%02d", i)
		uptoTarget.keys[key] = "value"
		fmt.Fprintf(&middle, "SET %s value\n", key)
		fmt.Fprintf(&late, "SET late:%02d value\n", i)
	}
	writeAndReplicate(t, rp.Status.Primary, middle.String(), 50)
	// The AOF stamps its entries with whole seconds: the target is the
	// second the middle keys were acknowledged in, and the late ones are
	// written from the next second on.
	target := time.Now().Truncate(time.Second)
	time.Sleep(time.Until(target.Add(time.Second + 200*time.Millisecond)))
	writeAndReplicate(t, rp.Status.Primary, late.String(), 50)
	lateWritten := time.Now()
	last := waitArchived(t, rp, lateWritten)
	t.Logf("the archive reached %s, %s after the last write (interval %s)", last.Format(time.RFC3339), last.Sub(lateWritten).Round(100*time.Millisecond), archiveInterval)

	// The instance and its volumes are lost: the new instance of the same
	// name starts once nothing of the old one is left (the garbage collector
	// deletes its objects in the background).
	if err := k8s.Delete(ctx, rp); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "RedisPersistence "+name, func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(rp), &v1alpha1.RedisPersistence{}) }, nil)
	var left []string
	eventually(t, 3*time.Minute, func() bool {
		left = leftOf(t, rp)
		return len(left) == 0
	})
	if len(left) > 0 {
		t.Fatalf("3m after %s was deleted, %v are left", name, left)
	}
	for _, ordinal := range []string{"0", "1"} {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name + "-" + ordinal, Namespace: namespace}}
		if err := k8s.Delete(ctx, claim); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		waitGone(t, "claim "+claim.Name, func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim) }, nil)
	}

	// Nothing of the lost instance is read from Kubernetes from here on:
	// the namespaces below know only the bucket, its path and credentials.
	dr := newRestrictedNamespace(t, namespace+"-dr")
	createStoreSecretIn(t, dr, "backup-store", storeAccessKey, storeSecretKey)
	spec := replicatedBackupSource(endpoint)
	spec.Bootstrap = &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{StoredBackup: &v1alpha1.StoredBackupRecovery{
		Path: namespace + "/" + name, Name: b.backup.Name,
	}}}
	start := time.Now()
	createIn(t, dr, name, spec)
	rp = waitForIn(t, dr, name, 8*time.Minute, hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating"))
	rp = waitForIn(t, dr, name, 4*time.Minute, hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready"))
	t.Logf("restored %s/%s from the stored backup %s (%d bytes): Replicating and Ready %s after it was created", dr, name, b.backup.Name, b.backup.Status.Size, time.Since(start).Round(time.Second))
	if rec := rp.Status.Recovery; rec == nil || rec.Backup != b.backup.Name || rec.SHA256 != b.backup.Status.SHA256 || rec.Location != b.backup.Status.Location {
		t.Errorf("status.recovery %+v, want backup %s, its location and sha256", rec, b.backup.Name)
	}
	for _, r := range rp.Status.Replicas {
		t.Run(r.Pod, func(t *testing.T) { checkKeysIn(t, dr, r.Pod, b) })
	}

	// The instance restored above archives under its own path, on a
	// timeline whose base is the backup; the recovery to the noted time
	// replays the lost instance's timeline, into a namespace that never
	// knew it or its backups.
	pitrNS := newRestrictedNamespace(t, namespace+"-pitr")
	createStoreSecretIn(t, pitrNS, "backup-store", storeAccessKey, storeSecretKey)
	storage := localNVMe
	start = time.Now()
	createIn(t, pitrNS, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}, Storage: &storage,
		Backup: backupSpec(endpoint, "backup-store"),
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Archive: &v1alpha1.ArchiveRecovery{
			Path: namespace + "/" + name, TargetTime: &metav1.Time{Time: target},
		}}},
	})
	rp = waitForIn(t, pitrNS, name, 4*time.Minute, hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready"))
	t.Logf("recovered %s/%s from the archive of %s/%s up to %s: Ready %s after it was created", pitrNS, name, namespace, name, target.UTC().Format(time.RFC3339), time.Since(start).Round(time.Second))
	if rec := rp.Status.Recovery; rec == nil || rec.Archive != "s3://"+storeBucket+"/"+namespace+"/"+name || rec.TargetTime == nil || !rec.TargetTime.Time.Equal(target) {
		t.Errorf("status.recovery %+v, want the archive of %s up to %s", rec, name, target)
	}
	checkKeysIn(t, pitrNS, name+"-0", uptoTarget)
}

// newRestrictedNamespace creates the namespace name under the Pod Security
// level restricted, as the suite's own, and deletes it with everything in
// it when t passes.
func newRestrictedNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: restrictedLabels}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = k8s.Delete(context.Background(), ns)
		}
	})
	return name
}

// waitArchived waits until rp's archive covers after, and returns the last
// point it covers.
func waitArchived(t *testing.T, rp *v1alpha1.RedisPersistence, after time.Time) time.Time {
	t.Helper()
	addr, stop := portForward(t, storeNamespace, storeName, storePort)
	defer stop()
	store, err := backup.Open(context.Background(), backup.Destination{
		Endpoint: "http://" + addr, Bucket: storeBucket, Region: storeRegion, Prefix: namespace + "/" + rp.Name,
		AccessKey: storeAccessKey, SecretKey: storeSecretKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	var lastErr error
	eventually(t, 4*archiveInterval+30*time.Second, func() bool {
		archive, err := backup.ReadArchive(context.Background(), store)
		if lastErr = err; err != nil {
			return false
		}
		_, last, _ = archive.Recoverable()
		return !last.Before(after)
	})
	if last.Before(after) {
		t.Fatalf("the archive of %s reaches %s (err %v), not %s", rp.Name, last, lastErr, after)
	}
	return last
}

// leftOf names what is left of the deleted instance rp: its server and
// Sentinel pods, and the objects it owned.
func leftOf(t *testing.T, rp *v1alpha1.RedisPersistence) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, rp.Name+"-") && p.Labels["batch.kubernetes.io/job-name"] == "" {
			left = append(left, "pod/"+p.Name)
		}
	}
	lists := map[string]client.ObjectList{
		"statefulset": &appsv1.StatefulSetList{}, "service": &corev1.ServiceList{},
		"secret": &corev1.SecretList{}, "configmap": &corev1.ConfigMapList{},
	}
	for kind, list := range lists {
		if err := k8s.List(ctx, list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			if obj := o.(client.Object); slices.ContainsFunc(obj.GetOwnerReferences(), func(ref metav1.OwnerReference) bool { return ref.UID == rp.UID }) {
				left = append(left, kind+"/"+obj.GetName())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(left)
	return left
}

// checkKeys checks that the server in pod holds exactly b's keys, with
// their values, and that the expiring ones still expire.
func checkKeys(t *testing.T, pod string, b *backedUp) {
	t.Helper()
	checkKeysIn(t, namespace, pod, b)
}

// checkKeysIn is checkKeys in the namespace ns.
func checkKeysIn(t *testing.T, ns, pod string, b *backedUp) {
	t.Helper()
	scan := podExecIn(t, ns, pod, "", "valkey-cli", "--scan")
	got := strings.Fields(scan)
	slices.Sort(got)
	want := slices.Sorted(maps.Keys(b.keys))
	if !slices.Equal(got, want) {
		extra, missing := difference(got, want), difference(want, got)
		t.Fatalf("%s holds %d keys, want %d: %d missing %q, %d not in the backup %q",
			pod, len(got), len(want), len(missing), missing[:min(5, len(missing))], len(extra), extra[:min(5, len(extra))])
	}
	var script strings.Builder
	for _, key := range want {
		fmt.Fprintf(&script, "GET %s\n", key)
	}
	for _, key := range b.expiring {
		fmt.Fprintf(&script, "TTL %s\n", key)
	}
	answers := strings.Split(podExecIn(t, ns, pod, script.String(), "valkey-cli"), "\n")
	if len(answers) != len(want)+len(b.expiring) {
		t.Fatalf("%d answers to %d GETs and %d TTLs", len(answers), len(want), len(b.expiring))
	}
	for i, key := range want {
		if answers[i] != b.keys[key] {
			t.Errorf("%s: %s is %q, want %q", pod, key, answers[i], b.keys[key])
		}
	}
	for i, key := range b.expiring {
		if ttl, err := strconv.Atoi(answers[len(want)+i]); err != nil || ttl <= 0 || ttl > 3600 {
			t.Errorf("%s: TTL %s is %q, want 1..3600 seconds", pod, key, answers[len(want)+i])
		}
	}
}

func difference(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}

// loadRDB starts a throwaway server pod from image on rdb and returns the
// pod's name, once the server has loaded it.
func loadRDB(t *testing.T, image string, rdb []byte) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rdb-check", Namespace: namespace},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            "redis", // tryPodExec execs here
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sleep", "600"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](999),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod) })
	eventually(t, 2*time.Minute, func() bool {
		return k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod) == nil && pod.Status.Phase == corev1.PodRunning
	})
	if pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("the pod %s is %s: %+v", pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses)
	}
	podExec(t, pod.Name, string(rdb), "sh", "-c", "cat > /data/dump.rdb")
	podExec(t, pod.Name, "", "valkey-server", "--dir", "/data", "--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no",
		"--daemonize", "yes", "--pidfile", "/data/valkey.pid", "--logfile", "/data/valkey.log")
	var pong string
	eventually(t, time.Minute, func() bool {
		pong, _ = tryPodExec(pod.Name, "valkey-cli", "PING")
		return pong == "PONG"
	})
	if pong != "PONG" {
		log, _ := tryPodExec(pod.Name, "tail", "-20", "/data/valkey.log")
		t.Fatalf("the server on the backup's RDB answers %q:\n%s", pong, log)
	}
	return pod.Name
}

func kubectlApply(t *testing.T, manifest string) {
	t.Helper()
	cmd := exec.Command(kubectl[0], append(kubectl[1:], "apply", "-f", "-")...)
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// waitBackup waits until the RedisBackup name is in phase want, and fails
// at once when it ends in the other final phase.
func waitBackup(t *testing.T, name string, want v1alpha1.BackupPhase, timeout time.Duration) *v1alpha1.RedisBackup {
	t.Helper()
	b := &v1alpha1.RedisBackup{}
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, b); err != nil {
			return false, nil
		}
		if b.Status.Phase == v1alpha1.BackupCompleted || b.Status.Phase == v1alpha1.BackupFailed {
			return true, nil
		}
		return false, nil
	})
	if err != nil || b.Status.Phase != want {
		t.Log(describeBackup(name))
		t.Fatalf("RedisBackup %s is %q after %s, want %s: %s", name, b.Status.Phase, timeout, want, b.Status.Message)
	}
	return b
}

// describeBackup is what a person looks at when a backup does not end as
// expected: the backups, the Job's pods and their logs, the events.
func describeBackup(name string) string {
	var out bytes.Buffer
	run := func(args ...string) {
		fmt.Fprintf(&out, "$ kubectl %s\n", strings.Join(args, " "))
		cmd := exec.Command(kubectl[0], append(append(kubectl[1:], "-n", namespace), args...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		_ = cmd.Run()
	}
	run("get", "rbak", "-o", "wide")
	run("get", "rbak", name, "-o", "yaml")
	run("get", "jobs,pods", "-l", "batch.kubernetes.io/job-name="+name+"-backup", "-o", "wide")
	run("logs", "-l", "batch.kubernetes.io/job-name="+name+"-backup", "--prefix", "--tail", "40")
	run("get", "events", "--field-selector", "involvedObject.name="+name, "--sort-by=.lastTimestamp")
	return out.String()
}
