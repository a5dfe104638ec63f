package controllers

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/dashboards"
	"github.com/uring-redis/uring-redis-operator/internal/promtest"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// startArchiveContainer plays the kubelet for the archive container of the
// StatefulSet's pod: the real agent with the container's command line and
// environment, the server at serverAddr and its data in dataDir, and
// extraArgs after the container's. stop
// sends SIGTERM, as the kubelet does, waits for the agent's last pass and
// returns its output.
func startArchiveContainer(t *testing.T, ns string, sts *appsv1.StatefulSet, serverAddr, dataDir string, extraArgs ...string) (stop func() string) {
	t.Helper()
	c := specstest.ContainerNamed(t, sts, specs.ContainerArchive)
	if len(c.Command) != 2 || c.Command[0] != specs.BackupAgent || c.Command[1] != "archive" {
		t.Fatalf("the archive container runs %q, want %s archive", c.Command, specs.BackupAgent)
	}
	args := []string{"archive"}
	for _, arg := range c.Args {
		switch {
		case strings.HasPrefix(arg, "--source="):
			arg = "--source=" + serverAddr
		case strings.HasPrefix(arg, "--data-dir="):
			arg = "--data-dir=" + dataDir
		}
		args = append(args, arg)
	}
	// Of a flag given twice, the last wins.
	args = append(args, extraArgs...)
	cmd := exec.Command(agentBin(t), args...)
	cmd.Env = resolveEnv(t, ns, c.Env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() string {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Errorf("the archive container ended with %v after SIGTERM:\n%s", err, out.String())
			}
		}
		return out.String()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// nextSecond sleeps into the second after t's, and a little more: the AOF
// stamps its entries with whole seconds.
func nextSecond(t time.Time) {
	time.Sleep(time.Until(t.Truncate(time.Second).Add(time.Second + 200*time.Millisecond)))
}

// TestRecoverFromArchive: the archive container of an instance with
// spec.backup.archive (the real agent, against the real server and a real
// SeaweedFS) ships its AOF; a new instance with spec.bootstrap.recovery.archive
// makes no server until the archive covers its targetTime, refuses one before
// the archive's first base, and its restore container replays the archive up
// to the target: the server loads every key written before it and none
// written after. The dashboard's backup panel draws the source.
func TestRecoverFromArchive(t *testing.T) {
	ns, store := namespaceWithStore(t)
	archived := destination(store)
	archived.Archive = &v1alpha1.ArchiveSpec{Interval: &metav1.Duration{Duration: time.Second}}
	createRP(t, ns, "source", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: archived})
	waitCondition(t, ns, "source", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	config := renderedConfig(t, ns, "source")
	if !strings.Contains(config, "aof-timestamp-enabled yes") {
		t.Fatalf("the archived server's config does not stamp its AOF:\n%s", config)
	}
	dataDir := t.TempDir()
	server := testenv.RunServer(t, dataDir, config)
	serverAddrs.Store(ns+"/source-0", server.Addr)
	actAsKubelet(t, ns, "source-0", "ext4")
	waitCondition(t, ns, "source", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "source"); err != nil {
		t.Fatal(err)
	}
	stopArchive := startArchiveContainer(t, ns, sts, server.Addr, dataDir)

	admin := newClient(server.Addr, instancePassword(t, ns, "source"))
	defer func() { _ = admin.Close() }()
	writeKeys(t, admin, "before", 200)
	target := time.Now()
	nextSecond(target)
	writeKeys(t, admin, "after", 50)

	// An instance whose target the archive has not reached waits for it.
	createRP(t, ns, "future", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store),
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Archive: &v1alpha1.ArchiveRecovery{
			Path: ns + "/source", TargetTime: &metav1.Time{Time: time.Now().Add(time.Hour)}}}}})
	waitConditionMessage(t, ns, "future", ReasonArchiveWaiting, "does not reach targetTime")
	// One before the archive's first base never starts.
	createRP(t, ns, "too-early", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store),
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Archive: &v1alpha1.ArchiveRecovery{
			Path: ns + "/source", TargetTime: &metav1.Time{Time: time.Now().Add(-time.Hour)}}}}})
	waitConditionMessage(t, ns, "too-early", ReasonArchiveWaiting, "nothing before its first base can be recovered")
	for _, name := range []string{"future", "too-early"} {
		if err := get(t, &appsv1.StatefulSet{}, ns, name); !apierrors.IsNotFound(err) {
			t.Errorf("%s has a StatefulSet (err %v) while it waits for the archive", name, err)
		}
	}

	// The operator reads how far the archive reaches into the source's
	// status and metrics.
	written := time.Now()
	source := &v1alpha1.RedisPersistence{}
	eventually(t, 60*time.Second, func() error {
		if err := get(t, source, ns, "source"); err != nil {
			return err
		}
		st := source.Status.Archive
		if st == nil || st.FirstRecoverableTime == nil || st.LastArchivedTime == nil || st.Timelines != 1 || st.Message != "" {
			return fmt.Errorf("status.archive %+v", st)
		}
		if st.LastArchivedTime.Time.Before(written.Truncate(time.Second)) || st.FirstRecoverableTime.After(target) {
			return fmt.Errorf("status.archive covers %s to %s, want %s to at least %s", st.FirstRecoverableTime, st.LastArchivedTime, target, written)
		}
		return nil
	})
	l := prometheus.Labels{"namespace": ns, "redispersistence": "source"}
	if got := testutil.ToFloat64(archiveLast.With(l)); got != float64(source.Status.Archive.LastArchivedTime.Unix()) {
		t.Errorf("uringredis_archive_last_archived_timestamp_seconds = %v, want %d", got, source.Status.Archive.LastArchivedTime.Unix())
	}
	if got := testutil.ToFloat64(archiveInterval.With(l)); got != 1 {
		t.Errorf("uringredis_archive_interval_seconds = %v, want 1", got)
	}

	// A backup of the source: the instance dashboard's backup panel draws it
	// and its archive, from a real Prometheus scraping the operator.
	createBackup(t, ns, "nightly", "source")
	if code, msg := runBackupPod(t, ns, waitJob(t, ns, "nightly-backup"), server.Addr); code != 0 {
		t.Fatalf("the backup agent failed (%d): %s", code, msg)
	}
	waitBackup(t, ns, "nightly", backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))
	prom := promtest.Prometheus(t, fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs: [{job_name: operator, static_configs: [{targets: [%q]}]}]\n", operatorMetrics(t)))
	queries, err := dashboards.AllQueries("5s")
	if err != nil {
		t.Fatal(err)
	}
	for desc, q := range queries {
		if !dashboards.NeedsBackups(desc) {
			delete(queries, desc)
			continue
		}
		queries[desc] = strings.ReplaceAll(q, `namespace=~".*"`, `namespace="`+ns+`"`)
	}
	if len(queries) != 3 {
		t.Fatalf("the backup panel has %d queries, want 3: %v", len(queries), queries)
	}
	waitQueriesReturnData(t, prom, queries)

	// The archive's last pass, at SIGTERM, ships what the interval left.
	t.Logf("the archive container:\n%s", stopArchive())
	createRP(t, ns, "copy", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store),
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Archive: &v1alpha1.ArchiveRecovery{
			Path: ns + "/source", TargetTime: &metav1.Time{Time: target}}}}})
	copySts := &appsv1.StatefulSet{}
	eventually(t, 60*time.Second, func() error { return get(t, copySts, ns, "copy") })
	// The StatefulSet is applied in the reconcile whose deferred status
	// patch writes status.recovery: the status may come a moment later.
	rp := &v1alpha1.RedisPersistence{}
	wantArchive := "s3://" + store.Bucket + "/" + ns + "/source"
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rp, ns, "copy"); err != nil {
			return err
		}
		if rec := rp.Status.Recovery; rec == nil || rec.Archive != wantArchive || rec.TargetTime == nil || !rec.TargetTime.Equal(&metav1.Time{Time: target.Truncate(time.Second)}) {
			return fmt.Errorf("status.recovery %+v, want the archive %s up to %s", rp.Status.Recovery, wantArchive, target.UTC().Format(time.RFC3339))
		}
		return nil
	})
	cm := &corev1.ConfigMap{}
	if err := get(t, cm, ns, specs.RecoveryConfigMapName(rp)); err != nil {
		t.Fatal(err)
	}
	if cm.Data[specs.RecoveryArchiveKey] != wantArchive || cm.Data[specs.RecoveryTargetTimeKey] != target.UTC().Format(time.RFC3339) {
		t.Errorf("the recovery ConfigMap holds %v", cm.Data)
	}

	dir := t.TempDir()
	if code, out := runRestoreContainer(t, ns, copySts, "copy-0", dir); code != 0 {
		t.Fatalf("the restore container of copy-0: exit %d, %q", code, out)
	}
	restoredServer := testenv.RunServer(t, dir, renderedConfig(t, ns, "copy"))
	restored := newClient(restoredServer.Addr, instancePassword(t, ns, "copy"))
	defer func() { _ = restored.Close() }()
	waitLoaded(t, restored)
	if missing := missingKeys(t, restored, "before", 200); missing > 0 {
		t.Errorf("the recovered server lacks %d of the 200 keys written before the target time", missing)
	}
	if missing := missingKeys(t, restored, "after", 50); missing != 50 {
		t.Errorf("the recovered server has %d of the 50 keys written after the target time, want none", 50-missing)
	}
}

// waitConditionMessage waits for rp's Ready condition to be False with
// reason and a message that contains want.
func waitConditionMessage(t *testing.T, ns, name, reason, want string) {
	t.Helper()
	eventually(t, 60*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, want) {
			return fmt.Errorf("Ready is %+v, want False %s with %q", c, reason, want)
		}
		return nil
	})
}

// TestArchivePrunedPastMaxAge: spec.backup.archive.maxAge reaches the
// archive container, whose agent (real, against the real server and a real
// SeaweedFS) then prunes the archive of an instance with no backup in the
// store: once an AOF rewrite's base is older than maxAge, the base before it
// goes, and status.archive.firstRecoverableTime moves forward to the new
// one.
func TestArchivePrunedPastMaxAge(t *testing.T) {
	ctx := context.Background()
	ns, store := namespaceWithStore(t)
	archived := destination(store)
	archived.Archive = &v1alpha1.ArchiveSpec{Interval: &metav1.Duration{Duration: time.Second}, MaxAge: &metav1.Duration{Duration: time.Hour}}
	createRP(t, ns, "source", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: archived})
	waitCondition(t, ns, "source", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	dataDir := t.TempDir()
	server := testenv.RunServer(t, dataDir, renderedConfig(t, ns, "source"))
	serverAddrs.Store(ns+"/source-0", server.Addr)
	actAsKubelet(t, ns, "source-0", "ext4")
	waitCondition(t, ns, "source", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "source"); err != nil {
		t.Fatal(err)
	}
	if args := specstest.ContainerNamed(t, sts, specs.ContainerArchive).Args; !slices.Contains(args, "--max-age=1h0m0s") {
		t.Fatalf("the archive container's args %q lack --max-age=1h0m0s", args)
	}
	// The agent runs on real time: the test gives it a max-age of 3 s after
	// the container's (which the API server refuses in a spec), and has it
	// prune at every pass.
	startArchiveContainer(t, ns, sts, server.Addr, dataDir, "--max-age=3s", "--prune-every=1s")

	admin := newClient(server.Addr, instancePassword(t, ns, "source"))
	defer func() { _ = admin.Close() }()
	writeKeys(t, admin, "before", 100)
	archive := func(check func(*v1alpha1.ArchiveStatus) error) *v1alpha1.ArchiveStatus {
		t.Helper()
		rp := &v1alpha1.RedisPersistence{}
		eventually(t, 60*time.Second, func() error {
			if err := get(t, rp, ns, "source"); err != nil {
				return err
			}
			if st := rp.Status.Archive; st == nil || st.FirstRecoverableTime == nil || st.StoredBackups == nil || *st.StoredBackups != 0 {
				return fmt.Errorf("status.archive %+v, want a first recoverable time and no backup in the store", st)
			}
			return check(rp.Status.Archive)
		})
		return rp.Status.Archive
	}
	first := archive(func(*v1alpha1.ArchiveStatus) error { return nil }).FirstRecoverableTime
	// Three seconds hold nothing before the first base to let go.
	time.Sleep(3 * time.Second)
	if st := archive(func(*v1alpha1.ArchiveStatus) error { return nil }); !st.FirstRecoverableTime.Equal(first) {
		t.Fatalf("with one base, the first recoverable time moved from %s to %s", first, st.FirstRecoverableTime)
	}

	nextSecond(time.Now())
	rewriteAOF(t, admin)
	writeKeys(t, admin, "after", 100)
	moved := archive(func(st *v1alpha1.ArchiveStatus) error {
		if !st.FirstRecoverableTime.After(first.Time) {
			return fmt.Errorf("first recoverable time %s, want it past the first base's %s", st.FirstRecoverableTime, first)
		}
		return nil
	})
	s, err := backup.Open(ctx, backup.Destination{Endpoint: store.Endpoint, Bucket: store.Bucket, Region: store.Region,
		AccessKey: store.AccessKey, SecretKey: store.SecretKey, Prefix: ns + "/source"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := backup.ReadArchive(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Timelines) != 1 || len(a.Timelines[0].Bases) != 1 || !a.Timelines[0].Bases[0].Time.Equal(moved.FirstRecoverableTime.Time) {
		t.Errorf("the archive holds %+v; want one timeline with the rewrite's base only", a.Timelines)
	}
}

// rewriteAOF runs BGREWRITEAOF and waits for it to finish.
func rewriteAOF(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	if err := c.BgRewriteAOF(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "aof_rewrite_in_progress:0") || !strings.Contains(info, "aof_rewrite_scheduled:0") || !strings.Contains(info, "aof_last_bgrewrite_status:ok") {
			return fmt.Errorf("the AOF rewrite is not done:\n%s", info)
		}
		return nil
	})
}

// TestArchiveOnlyCopyAlert: an archived instance with no backup in its
// store has status.archive.storedBackups 0 and the metric
// uringredis_archive_stored_backups 0, on which the chart's
// RedisArchiveOnlyCopy goes pending in a real Prometheus that scrapes the
// operator; a completed backup counts 1 and ends it.
func TestArchiveOnlyCopyAlert(t *testing.T) {
	ctx := context.Background()
	ns, store := namespaceWithStore(t)
	archived := destination(store)
	archived.Archive = &v1alpha1.ArchiveSpec{Interval: &metav1.Duration{Duration: time.Second}}
	createRP(t, ns, "cache", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: archived})
	makeReady(t, ns, "cache")
	l := prometheus.Labels{"namespace": ns, "redispersistence": "cache"}
	stored := func(want int32) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			rp := &v1alpha1.RedisPersistence{}
			if err := get(t, rp, ns, "cache"); err != nil {
				return err
			}
			if st := rp.Status.Archive; st == nil || st.StoredBackups == nil || *st.StoredBackups != want {
				return fmt.Errorf("status.archive %+v, want storedBackups %d", st, want)
			}
			if !hasSeries(archiveStoredBackups, l) || testutil.ToFloat64(archiveStoredBackups.With(l)) != float64(want) {
				return fmt.Errorf("uringredis_archive_stored_backups is not %d", want)
			}
			return nil
		})
	}
	stored(0)

	prom := promtest.Prometheus(t, fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs: [{job_name: operator, static_configs: [{targets: [%q]}]}]
`, filepath.Join(testenv.RepoRoot(), "charts", "uring-redis-operator", "files", "prometheus-rules.yaml"), operatorMetrics(t)))
	pending := func(want bool) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			alerts, err := promtest.Query(ctx, prom, `ALERTS{alertname="RedisArchiveOnlyCopy", alertstate="pending", namespace="`+ns+`", redispersistence="cache"}`)
			if err != nil {
				return err
			}
			if got := len(alerts) == 1; got != want {
				return fmt.Errorf("RedisArchiveOnlyCopy pending for %s/cache: %v, want %v", ns, alerts, want)
			}
			return nil
		})
	}
	pending(true)

	addr, _ := serverAddrs.Load(ns + "/cache-0")
	createBackup(t, ns, "first", "cache")
	if code, msg := runBackupPod(t, ns, waitJob(t, ns, "first-backup"), addr.(string)); code != 0 {
		t.Fatalf("the agent failed: %s", msg)
	}
	waitBackup(t, ns, "first", backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))
	stored(1)
	pending(false)
}
