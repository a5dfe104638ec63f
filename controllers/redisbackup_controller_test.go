package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

var agentBuild struct {
	once sync.Once
	path string
	err  error
}

// agentBin builds cmd/uring-backup, the agent the operator's image runs in
// backup Jobs, once per test binary.
func agentBin(t *testing.T) string {
	t.Helper()
	agentBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "uring-backup")
		if err != nil {
			agentBuild.err = err
			return
		}
		agentBuild.path = filepath.Join(dir, "uring-backup")
		cmd := exec.Command("go", "build", "-o", agentBuild.path, "./cmd/uring-backup")
		cmd.Dir = testenv.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			agentBuild.err = fmt.Errorf("go build ./cmd/uring-backup: %w\n%s", err, out)
		}
	})
	if agentBuild.err != nil {
		t.Fatal(agentBuild.err)
	}
	return agentBuild.path
}

// runAgent runs the real agent with args and the container's environment
// (Secrets, ConfigMaps and the namespace resolved, plus extraEnv), as the
// kubelet runs it, and returns its exit code, stdout and stderr.
func runAgent(t *testing.T, ns string, c *corev1.Container, args []string, extraEnv ...string) (exitCode int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentBin(t), args...)
	cmd.Env = append(resolveEnv(t, ns, c.Env), extraEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), errOut.String()
	} else if err != nil {
		t.Fatalf("running the agent: %v", err)
	}
	return 0, out.String(), errOut.String()
}

// runBackupPod plays the kubelet for the backup Job's pod: it runs the real
// agent with the pod's command line, the server at serverAddr in place of
// the pod's DNS name, and finishes the pod with the agent's exit code and
// termination message (its stderr on an error, as FallbackToLogsOnError
// does). It returns that message.
func runBackupPod(t *testing.T, ns string, job *batchv1.Job, serverAddr string) (exitCode int32, message string) {
	t.Helper()
	c := &job.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 2 || c.Command[0] != specs.BackupAgent || c.Command[1] != "take" {
		t.Fatalf("the backup container runs %q, want %s take", c.Command, specs.BackupAgent)
	}
	termLog := filepath.Join(t.TempDir(), "termination-log")
	args := []string{"take", "--termination-log=" + termLog}
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "--source=") {
			arg = "--source=" + serverAddr
		}
		args = append(args, arg)
	}
	code, _, stderr := runAgent(t, ns, c, args)
	exitCode, message = int32(code), stderr
	if code == 0 {
		b, err := os.ReadFile(termLog)
		if err != nil {
			t.Fatalf("the agent succeeded without a termination message: %v", err)
		}
		message = string(b)
	}
	finishJobPodOf(t, ns, job.Name, specs.ContainerBackup, exitCode, message)
	return exitCode, message
}

func createBackup(t *testing.T, ns, name, instance string) {
	t.Helper()
	b := &v1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.RedisBackupSpec{RedisPersistence: v1alpha1.LocalObjectReference{Name: instance}}}
	if err := k8s.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

func waitBackup(t *testing.T, ns, name string, check func(*v1alpha1.RedisBackup) error) *v1alpha1.RedisBackup {
	t.Helper()
	b := &v1alpha1.RedisBackup{}
	eventually(t, 60*time.Second, func() error {
		if err := get(t, b, ns, name); err != nil {
			return err
		}
		return check(b)
	})
	return b
}

// backupPhase checks the phase, the Complete condition's reason and that
// the message says want.
func backupPhase(phase v1alpha1.BackupPhase, reason, want string) func(*v1alpha1.RedisBackup) error {
	return func(b *v1alpha1.RedisBackup) error {
		c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionComplete)
		if b.Status.Phase != phase || c == nil || c.Reason != reason || !strings.Contains(b.Status.Message+c.Message, want) {
			return fmt.Errorf("phase %q, condition %+v, message %q; want %s, %s, %q", b.Status.Phase, c, b.Status.Message, phase, reason, want)
		}
		return nil
	}
}

// storeSecret is the Secret "store" that destination names, with store's
// access key and secretKey.
func storeSecret(ns string, store *testenv.ObjectStore, secretKey string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "store", Namespace: ns}, Data: map[string][]byte{
		"AWS_ACCESS_KEY_ID": []byte(store.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(secretKey),
	}}
}

// namespaceWithStore is a new namespace holding the Secret "store" that
// signs in to a new SeaweedFS, on a test cluster with its nodes.
func namespaceWithStore(t *testing.T) (string, *testenv.ObjectStore) {
	t.Helper()
	ensureNodes(t)
	ns := newNamespace(t)
	store := testenv.StartObjectStore(t)
	if err := k8s.Create(context.Background(), storeSecret(ns, store, store.SecretKey)); err != nil {
		t.Fatal(err)
	}
	return ns, store
}

// destination is store, signed in to with the Secret "store".
func destination(store *testenv.ObjectStore) *v1alpha1.BackupSpec {
	return &v1alpha1.BackupSpec{Destination: v1alpha1.BackupDestination{S3: v1alpha1.S3Destination{
		Endpoint: store.Endpoint, Bucket: store.Bucket, Region: store.Region,
		Credentials: v1alpha1.S3Credentials{SecretName: "store"},
	}}}
}

// TestBackupTakesASnapshot: a RedisBackup waits, saying why, while its
// instance, its destination, the store's credentials or a ready server is
// missing; then its Job's agent (run for real, against the real server and
// a real SeaweedFS) streams a snapshot into the store, and the status
// records what the store holds. The snapshot restores: a new server loads
// it with every key and TTL.
func TestBackupTakesASnapshot(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	store := testenv.StartObjectStore(t)

	createBackup(t, ns, "nightly", "cache")
	waitBackup(t, ns, "nightly", backupPhase(v1alpha1.BackupPending, ReasonBackupInstanceNotFound, "the RedisPersistence cache does not exist"))

	createRP(t, ns, "cache", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	waitBackup(t, ns, "nightly", backupPhase(v1alpha1.BackupPending, ReasonBackupNoDestination, "has no spec.backup.destination"))

	updateRP(t, ns, "cache", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Backup = destination(store) })
	waitBackup(t, ns, "nightly", backupPhase(v1alpha1.BackupPending, ReasonBackupCredentials, "the Secret store does not exist"))
	waitEvent(t, ns, "nightly", ReasonBackupCredentials)

	if err := k8s.Create(ctx, storeSecret(ns, store, store.SecretKey)); err != nil {
		t.Fatal(err)
	}
	// Nothing watches the store's Secret: a change of the instance brings
	// the backup back, as its readiness does below.
	makeReady(t, ns, "cache")
	addr, _ := serverAddrs.Load(ns + "/cache-0")
	job := waitJob(t, ns, "nightly-backup")
	waitBackup(t, ns, "nightly", func(b *v1alpha1.RedisBackup) error {
		if b.Status.Phase != v1alpha1.BackupRunning || b.Status.SourcePod != "cache-0" || b.Status.Job != job.Name || b.Status.StartedAt == nil {
			return fmt.Errorf("status %+v, want Running from cache-0 by %s", b.Status, job.Name)
		}
		return nil
	})

	admin := newClient(addr.(string), instancePassword(t, ns, "cache"))
	defer func() { _ = admin.Close() }()
	writeKeys(t, admin, "before", 500)
	if err := admin.Set(ctx, "ttl", "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	beforeAgent := time.Now()
	if code, msg := runBackupPod(t, ns, job, addr.(string)); code != 0 {
		t.Fatalf("the agent failed (%d): %s", code, msg)
	}
	b := waitBackup(t, ns, "nightly", backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))
	wantLocation := fmt.Sprintf("s3://%s/%s/cache/backups/nightly/dump.rdb.zst", store.Bucket, ns) // compressed by default
	st := b.Status
	if st.Location != wantLocation || st.Size <= 0 || len(st.SHA256) != 64 || st.ServerVersion != "8.1.1" || st.Mode != v1alpha1.ModeUring ||
		st.Point == nil || st.Point.Time.Before(beforeAgent.Add(-time.Second)) || st.CompletedAt == nil {
		t.Errorf("status %+v: want the snapshot at %s, its size, SHA-256, version 8.1.1, mode uring and the point", st, wantLocation)
	}
	waitEvent(t, ns, "nightly", ReasonBackupCompleted)
	// The instance names its newest backup.
	eventually(t, 30*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, "cache"); err != nil {
			return err
		}
		last := rp.Status.LastBackup
		if last == nil || last.Name != "nightly" || !last.Point.Equal(st.Point) || last.Size != st.Size || last.CompletedAt == nil ||
			last.Duration == nil || last.Duration.Duration != st.CompletedAt.Sub(st.StartedAt.Time) {
			return fmt.Errorf("status.lastBackup %+v, want nightly at %s, %d bytes, its duration", last, st.Point, st.Size)
		}
		return nil
	})
	backupLabels := prometheus.Labels{"namespace": ns, "backup": "nightly", "redispersistence": "cache"}
	if got := testutil.ToFloat64(backupSize.With(backupLabels)); got != float64(st.Size) {
		t.Errorf("uringredis_backup_size_bytes %v, want %d", got, st.Size)
	}
	if got := testutil.ToFloat64(backupPoint.With(backupLabels)); got != float64(st.Point.Unix()) {
		t.Errorf("uringredis_backup_point_timestamp_seconds %v, want %d", got, st.Point.Unix())
	}
	if got := testutil.ToFloat64(backupFailed.With(backupLabels)); got != 0 {
		t.Errorf("uringredis_backup_failed %v for a completed backup", got)
	}

	// What the store holds is the snapshot the status describes, and it
	// restores.
	s, err := backup.Open(ctx, backup.Destination{Endpoint: store.Endpoint, Bucket: store.Bucket, Region: store.Region,
		AccessKey: store.AccessKey, SecretKey: store.SecretKey, Prefix: ns + "/cache"})
	if err != nil {
		t.Fatal(err)
	}
	snapshotKey, metadataKey := backup.ObjectKeys("nightly")
	if n, err := s.Get(ctx, snapshotKey+".zst", io.Discard, st.SHA256); err != nil || n != st.Size {
		t.Fatalf("getting the snapshot: %d bytes, %v; want %d", n, err, st.Size)
	}
	dir := t.TempDir()
	d := backup.Destination{Endpoint: store.Endpoint, Region: store.Region, AccessKey: store.AccessKey, SecretKey: store.SecretKey}
	if ok, err := (backup.Restore{Destination: d, Location: st.Location, SHA256: st.SHA256, Backup: "nightly", DataDir: dir}).Run(ctx); !ok || err != nil {
		t.Fatalf("restoring the snapshot as dump.rdb: %v, %v", ok, err)
	}
	meta, err := s.GetBytes(ctx, metadataKey)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := backup.DecodeMetadata(meta); err != nil || m.SHA256 != st.SHA256 || m.Namespace != ns || m.Instance != "cache" {
		t.Errorf("backup.json %s (%v) does not describe the backup", meta, err)
	}
	restored := testenv.RunServer(t, dir, "appendonly no\n")
	c := newClient(restored.Addr, "")
	defer func() { _ = c.Close() }()
	if missing := missingKeys(t, c, "before", 500); missing > 0 {
		t.Errorf("the restored snapshot lacks %d of 500 keys", missing)
	}
	if ttl := c.TTL(ctx, "ttl").Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("the restored key ttl has TTL %v, want up to an hour", ttl)
	}

	// A second backup of the same name would overwrite it: the agent
	// refuses.
	if err := k8s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, &v1alpha1.RedisBackup{}, ns, "nightly"); err == nil {
			return errors.New("the RedisBackup is still there")
		}
		return nil
	})
	createBackup(t, ns, "nightly", "cache")
	job = waitJobOfNewBackup(t, ns, "nightly-backup", job.UID)
	if code, msg := runBackupPod(t, ns, job, addr.(string)); code == 0 || !strings.Contains(msg, "already holds a backup named nightly") {
		t.Errorf("a second backup named nightly: exit %d, %q; want a refusal", code, msg)
	}
}

// waitJobOfNewBackup waits for a Job name other than the one of UID old.
func waitJobOfNewBackup(t *testing.T, ns, name string, old types.UID) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	eventually(t, 60*time.Second, func() error {
		if err := get(t, job, ns, name); err != nil {
			return err
		}
		if job.UID == old {
			return errors.New("the old Job is still there")
		}
		return nil
	})
	return job
}

// TestBackupRetriesThenFails: wrong credentials fail the agent with a
// message that says so; the status and a Warning event show each failed
// attempt while the Job retries, and the backup fails with the agent's
// message when the Job does. The server keeps serving throughout.
func TestBackupRetriesThenFails(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	store := testenv.StartObjectStore(t)
	if err := k8s.Create(ctx, storeSecret(ns, store, "not-the-secret-key")); err != nil {
		t.Fatal(err)
	}
	createRP(t, ns, "cache", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store)})
	makeReady(t, ns, "cache")
	addr, _ := serverAddrs.Load(ns + "/cache-0")
	createBackup(t, ns, "denied", "cache")
	job := waitJob(t, ns, "denied-backup")

	code, msg := runBackupPod(t, ns, job, addr.(string))
	if code == 0 || !strings.Contains(msg, "credentials") {
		t.Fatalf("the agent with a wrong secret key: exit %d, %q; want an error about the credentials", code, msg)
	}
	waitBackup(t, ns, "denied", backupPhase(v1alpha1.BackupRunning, ReasonBackupAttemptFailed, "attempt 1 failed, retrying"))
	waitEvent(t, ns, "denied", ReasonBackupAttemptFailed)
	// The Job controller runs the next pods after its backoff; they fail
	// the same way.
	for range 2 {
		finishJobPodOf(t, ns, job.Name, specs.ContainerBackup, code, msg)
	}
	b := waitBackup(t, ns, "denied", backupPhase(v1alpha1.BackupFailed, ReasonBackupFailed, "after 3 attempt(s)"))
	if !strings.Contains(b.Status.Message, "credentials") {
		t.Errorf("the failed backup's message %q does not carry the agent's error", b.Status.Message)
	}
	waitEvent(t, ns, "denied", ReasonBackupFailed)
	eventually(t, 10*time.Second, func() error {
		if got := testutil.ToFloat64(backupFailed.With(prometheus.Labels{"namespace": ns, "backup": "denied", "redispersistence": "cache"})); got != 1 {
			return fmt.Errorf("uringredis_backup_failed %v, want 1", got)
		}
		return nil
	})
	if n := countSeries(t, ns, "uringredis_backup_size_bytes"); n != 0 {
		t.Errorf("a failed backup exports %d size series", n)
	}
	admin := newClient(addr.(string), instancePassword(t, ns, "cache"))
	defer func() { _ = admin.Close() }()
	if err := admin.Set(ctx, "after", "v", 0).Err(); err != nil {
		t.Errorf("the server after the failed backup: %v", err)
	}
}

// TestScheduledBackupsExpire: spec.backup.schedule creates a RedisBackup at
// each run; with retention count 1, a scheduled backup that completes lets
// the previous completed one go, and its objects leave the store before the
// RedisBackup does. Backups made by hand are never expired.
func TestScheduledBackupsExpire(t *testing.T) {
	ctx := context.Background()
	ns, store := namespaceWithStore(t)
	dest := destination(store)
	dest.Compression = v1alpha1.CompressionNone
	createRP(t, ns, "cache", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: dest})
	makeReady(t, ns, "cache")
	addr, _ := serverAddrs.Load(ns + "/cache-0")

	// A backup of yours, uncompressed, which retention leaves alone.
	createBackup(t, ns, "mine", "cache")
	if code, msg := runBackupPod(t, ns, waitJob(t, ns, "mine-backup"), addr.(string)); code != 0 {
		t.Fatalf("the agent failed: %s", msg)
	}
	waitBackup(t, ns, "mine", backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))

	updateRP(t, ns, "cache", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Backup.Schedule = "@every 3s"
		rp.Spec.Backup.Retention = &v1alpha1.BackupRetention{Count: 1}
		rp.Spec.Backup.Compression = v1alpha1.CompressionZstd // from now on: the expired one's dump.rdb.zst goes too
	})
	// takeScheduled completes the next scheduled backup after those in done.
	done := map[string]bool{}
	takeScheduled := func() *v1alpha1.RedisBackup {
		t.Helper()
		var next *v1alpha1.RedisBackup
		eventually(t, 60*time.Second, func() error {
			var list v1alpha1.RedisBackupList
			if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{specs.LabelScheduledFor: "cache"}); err != nil {
				return err
			}
			for i := range list.Items {
				if b := &list.Items[i]; !done[b.Name] && b.Status.Phase == v1alpha1.BackupRunning && (next == nil || b.Name < next.Name) {
					next = b
				}
			}
			if next == nil {
				var seen []string
				for _, b := range list.Items {
					seen = append(seen, b.Name+" "+string(b.Status.Phase)+" "+b.Status.Message)
				}
				return fmt.Errorf("no scheduled backup is running; scheduled: %q", seen)
			}
			return nil
		})
		done[next.Name] = true
		job := waitJob(t, ns, specs.BackupJobName(next))
		if code, msg := runBackupPod(t, ns, job, addr.(string)); code != 0 {
			t.Fatalf("the agent failed: %s", msg)
		}
		return waitBackup(t, ns, next.Name, backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))
	}
	first := takeScheduled()
	if !strings.HasPrefix(first.Name, "cache-") || first.Labels[specs.LabelScheduledFor] != "cache" {
		t.Errorf("scheduled backup %s with labels %v", first.Name, first.Labels)
	}
	second := takeScheduled()
	// The next run due is the schedule's first after the newest point.
	due := prometheus.Labels{"namespace": ns, "redispersistence": "cache"}
	eventually(t, 30*time.Second, func() error {
		newest := second.Status.Point.Time
		for _, name := range []string{"mine", first.Name} {
			b := &v1alpha1.RedisBackup{}
			if err := get(t, b, ns, name); err == nil && b.Status.Point != nil && b.Status.Point.After(newest) {
				newest = b.Status.Point.Time
			}
		}
		if got, want := testutil.ToFloat64(backupNextDue.With(due)), float64(newest.Add(3*time.Second).Unix()); got != want {
			return fmt.Errorf("uringredis_backup_next_due_timestamp_seconds = %v, want %v (3s after the newest point %s)", got, want, newest)
		}
		return nil
	})
	// The first goes, its objects first; the second and yours stay.
	eventually(t, 60*time.Second, func() error {
		if err := get(t, &v1alpha1.RedisBackup{}, ns, first.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the expired backup %s is still there (%w)", first.Name, err)
		}
		return nil
	})
	waitEvent(t, ns, "cache", "ExpiredBackup")
	updateRP(t, ns, "cache", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Backup.Schedule, rp.Spec.Backup.Retention = "", nil })
	eventually(t, 30*time.Second, func() error {
		if hasSeries(backupNextDue, due) {
			return fmt.Errorf("the next due backup of an instance without a schedule is still exported")
		}
		return nil
	})
	for _, name := range []string{second.Name, "mine"} {
		if err := get(t, &v1alpha1.RedisBackup{}, ns, name); err != nil {
			t.Errorf("the backup %s: %v", name, err)
		}
	}
	s, err := backup.Open(ctx, backup.Destination{Endpoint: store.Endpoint, Bucket: store.Bucket, Region: store.Region,
		AccessKey: store.AccessKey, SecretKey: store.SecretKey, Prefix: ns + "/cache"})
	if err != nil {
		t.Fatal(err)
	}
	objects, err := s.List(ctx, "backups/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objects {
		keys = append(keys, o.Key)
	}
	for name, snapshot := range map[string]string{second.Name: "dump.rdb.zst", "mine": "dump.rdb"} {
		for _, key := range []string{"backups/" + name + "/" + snapshot, "backups/" + name + "/backup.json"} {
			if !slices.Contains(keys, key) {
				t.Errorf("the store lacks %s: %v", key, keys)
			}
		}
	}
	for _, key := range keys {
		if strings.Contains(key, "/"+first.Name+"/") {
			t.Errorf("the expired backup's object %s is still in the store", key)
		}
	}
}

// hasSeries says whether v has a series with labels.
func hasSeries(v *prometheus.GaugeVec, labels prometheus.Labels) bool {
	ch := make(chan prometheus.Metric, 1024)
	v.Collect(ch)
	close(ch)
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			continue
		}
		matched := 0
		for _, l := range pb.GetLabel() {
			if want, ok := labels[l.GetName()]; ok && want == l.GetValue() {
				matched++
			}
		}
		if matched == len(labels) {
			return true
		}
	}
	return false
}
