package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// archivedInstance is a uring instance with an archive under the path
// team/cache that reaches from 26 hours to 30 seconds before testNow, and
// a Completed, a Running and another instance's backup.
func archivedInstance(t *testing.T, ns string) {
	t.Helper()
	backup := destination()
	backup.Destination.S3.Path = "team/cache"
	backup.Archive = &v1alpha1.ArchiveSpec{}
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: v1alpha1.RedisPersistenceSpec{
			Mode:   v1alpha1.ModeUring,
			Uring:  &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable},
			Backup: backup,
		},
	}, v1alpha1.RedisPersistenceStatus{
		Archive: &v1alpha1.ArchiveStatus{
			FirstRecoverableTime: at(-26 * time.Hour), LastArchivedTime: at(-30 * time.Second),
			Timelines: 1, CheckedAt: at(-20 * time.Second),
		},
	})
	createBackupWithStatus(t, ns, "cache-done", "cache", v1alpha1.RedisBackupStatus{
		Phase: v1alpha1.BackupCompleted, Point: at(-time.Hour), Location: "s3://backups/team/cache/backups/cache-done/dump.rdb.zst",
		SHA256: strings.Repeat("cd", 32), Size: 1024,
	})
	createBackupWithStatus(t, ns, "cache-running", "cache", v1alpha1.RedisBackupStatus{
		Phase: v1alpha1.BackupRunning, Message: "attempt 1 failed, retrying: the server restarted",
	})
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Backup: destination()},
	}, v1alpha1.RedisPersistenceStatus{})
	createBackupWithStatus(t, ns, "other-done", "other", v1alpha1.RedisBackupStatus{
		Phase: v1alpha1.BackupCompleted, Point: at(-time.Hour), Location: "s3://backups/" + ns + "/other/backups/other-done/dump.rdb.zst",
		SHA256: strings.Repeat("ef", 32),
	})
}

func notCreated(t *testing.T, ns, name string) {
	t.Helper()
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &v1alpha1.RedisPersistence{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the RedisPersistence %s: err = %v, want NotFound", name, err)
	}
}

func TestRestoreDryRunBackup(t *testing.T) {
	ns := namespace(t)
	archivedInstance(t, ns)
	stdout, stderr, err := run(t, "restore", "cache", "--to", "cache-restored", "--backup", "cache-done", "--dry-run", "-n", ns)
	if err != nil {
		t.Fatalf("restore --dry-run: %v\n%s", err, stderr)
	}
	golden(t, "restore-backup-dry-run.golden", strings.ReplaceAll(stdout, ns, "NAMESPACE"))
	notCreated(t, ns, "cache-restored")
}

func TestRestoreToTime(t *testing.T) {
	ns := namespace(t)
	archivedInstance(t, ns)
	target := testNow.Add(-2 * time.Hour)
	stdout, stderr, err := run(t, "restore", "cache", "--to", "cache-restored", "--time", target.Format(time.RFC3339), "-n", ns)
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, stderr)
	}
	if want := "redispersistence/cache-restored created, replaying the archive s3://backups/team/cache up to 2026-11-28T10:00:00Z\n"; stdout != want {
		t.Errorf("printed %q, want %q", stdout, want)
	}
	got := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "cache-restored"}, got); err != nil {
		t.Fatal(err)
	}
	want := &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Archive: &v1alpha1.ArchiveRecovery{
		Path: "team/cache", TargetTime: &metav1.Time{Time: target},
	}}}
	if diff := cmp.Diff(want, got.Spec.Bootstrap); diff != "" {
		t.Errorf("spec.bootstrap (-want +got):\n%s", diff)
	}
	// The new instance keeps its objects under its own default path,
	// <namespace>/cache-restored: two instances must not share one.
	if s3 := got.Spec.Backup.Destination.S3; s3.Path != "" || s3.Bucket != "backups" || s3.Endpoint != "http://store.storage.svc:9000" {
		t.Errorf("spec.backup.destination.s3 = %+v, want cache's store without its path", s3)
	}
	if got.Spec.Mode != v1alpha1.ModeUring || got.Spec.Backup.Archive == nil {
		t.Errorf("spec = %+v, want cache's", got.Spec)
	}

	// -o yaml prints the object created.
	stdout, _, err = run(t, "restore", "cache", "--to", "cache-restored-2", "--time", target.Format(time.RFC3339), "-n", ns, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	printed := &v1alpha1.RedisPersistence{}
	if err := yaml.Unmarshal([]byte(stdout), printed); err != nil {
		t.Fatal(err)
	}
	if printed.Name != "cache-restored-2" || printed.Spec.Bootstrap == nil || printed.Spec.Bootstrap.Recovery.Archive.Path != "team/cache" {
		t.Errorf("-o yaml printed %+v", printed)
	}
}

func TestRestoreRefuses(t *testing.T) {
	ns := namespace(t)
	archivedInstance(t, ns)
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "noarchive"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Backup: destination()},
	}, v1alpha1.RedisPersistenceStatus{})
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "memory"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, Backup: destination()},
	}, v1alpha1.RedisPersistenceStatus{})
	createBackupWithStatus(t, ns, "memory-done", "memory", v1alpha1.RedisBackupStatus{
		Phase: v1alpha1.BackupCompleted, Point: at(-time.Hour), Location: "s3://backups/" + ns + "/memory/backups/memory-done/dump.rdb.zst",
		SHA256: strings.Repeat("01", 32),
	})
	for _, tc := range []struct {
		desc    string
		args    []string
		wantErr string
	}{
		{"unknown instance", []string{"nope", "--to", "new", "--backup", "cache-done"},
			`no RedisPersistence "nope" in namespace "` + ns + `"`},
		{"unknown backup", []string{"cache", "--to", "new", "--backup", "nope"},
			`no RedisBackup "nope" in namespace "` + ns + `"`},
		{"a backup not Completed", []string{"cache", "--to", "new", "--backup", "cache-running"},
			"the RedisBackup cache-running is Running, not Completed: only a Completed backup can be restored (attempt 1 failed, retrying: the server restarted)"},
		{"another instance's backup", []string{"cache", "--to", "new", "--backup", "other-done"},
			"the RedisBackup other-done is a backup of other, not of cache"},
		{"a time before the archive", []string{"cache", "--to", "new", "--time", "2026-11-27T09:59:59Z"},
			"--time 2026-11-27T09:59:59Z is before the archive's first base: the archive of cache reaches from 2026-11-27T10:00:00Z to 2026-11-28T11:59:30Z"},
		{"a time after the archive", []string{"cache", "--to", "new", "--time", "2026-11-28T11:59:31Z"},
			"--time 2026-11-28T11:59:31Z is after the last archived point: the archive of cache reaches from 2026-11-27T10:00:00Z to 2026-11-28T11:59:30Z (as the operator read it at 2026-11-28T11:59:40Z)"},
		{"a time, without an archive", []string{"noarchive", "--to", "new", "--time", "2026-11-28T11:00:00Z"},
			"the RedisPersistence noarchive reports no archive reach (status.archive): nothing can be recovered to a time; it has no spec.backup.archive, restore a backup with --backup instead"},
		{"not a time", []string{"cache", "--to", "new", "--time", "yesterday"},
			`--time "yesterday" is not an RFC 3339 time`},
		{"both sources", []string{"cache", "--to", "new", "--time", "2026-11-28T11:00:00Z", "--backup", "cache-done"},
			"restore needs one of --backup BACKUP (a Completed RedisBackup of cache), --time RFC3339 (a point its archive reaches) or --latest"},
		{"--latest and a time", []string{"cache", "--to", "new", "--time", "2026-11-28T11:00:00Z", "--latest"},
			"restore needs one of --backup BACKUP"},
		{"no source", []string{"cache", "--to", "new"},
			"restore needs one of --backup BACKUP"},
		{"no --to", []string{"cache", "--backup", "cache-done"},
			"restore needs --to NEW"},
		{"an existing instance", []string{"cache", "--to", "other", "--backup", "cache-done"},
			"the RedisPersistence " + ns + "/other already exists: a restore starts a new instance"},
		// The API server's own validation, through the dry run: mode none
		// keeps nothing to restore into.
		{"mode none", []string{"memory", "--to", "new", "--backup", "memory-done", "--dry-run"},
			"spec.bootstrap.recovery needs a mode that keeps data on disk"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			stdout, _, err := run(t, append([]string{"restore", "-n", ns}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if stdout != "" {
				t.Errorf("printed %q on a refusal", stdout)
			}
		})
	}
	notCreated(t, ns, "new")
}

func TestRestoreLatest(t *testing.T) {
	ns := namespace(t)
	archivedInstance(t, ns)
	// With an archive: replayed to its end, the operator taking the latest
	// point when the new instance starts.
	stdout, stderr, err := run(t, "restore", "cache", "--to", "from-archive", "--latest", "-n", ns)
	if err != nil {
		t.Fatalf("restore --latest: %v\n%s", err, stderr)
	}
	if want := "redispersistence/from-archive created, replaying the archive s3://backups/team/cache to its end\n"; stdout != want {
		t.Errorf("printed %q, want %q", stdout, want)
	}
	got := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "from-archive"}, got); err != nil {
		t.Fatal(err)
	}
	want := &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Archive: &v1alpha1.ArchiveRecovery{Path: "team/cache"}}}
	if diff := cmp.Diff(want, got.Spec.Bootstrap); diff != "" {
		t.Errorf("spec.bootstrap (-want +got):\n%s", diff)
	}

	// Without one: the newest Completed backup, which must still be there.
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backed-up"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Backup: destination()},
	}, v1alpha1.RedisPersistenceStatus{LastBackup: &v1alpha1.LastBackupStatus{Name: "backed-up-1", Point: *at(-time.Hour)}})
	if _, _, err := run(t, "restore", "backed-up", "--to", "new", "--latest", "-n", ns); err == nil || !strings.Contains(err.Error(), `no RedisBackup "backed-up-1"`) {
		t.Errorf("--latest of a deleted backup: err = %v", err)
	}
	createBackupWithStatus(t, ns, "backed-up-1", "backed-up", v1alpha1.RedisBackupStatus{
		Phase: v1alpha1.BackupCompleted, Point: at(-time.Hour), Location: "s3://backups/" + ns + "/backed-up/backups/backed-up-1/dump.rdb",
		SHA256: strings.Repeat("12", 32),
	})
	stdout, stderr, err = run(t, "restore", "backed-up", "--to", "from-backup", "--latest", "-n", ns, "--dry-run", "-o", "json")
	if err != nil {
		t.Fatalf("restore --latest: %v\n%s", err, stderr)
	}
	printed := &v1alpha1.RedisPersistence{}
	if err := yaml.Unmarshal([]byte(stdout), printed); err != nil {
		t.Fatal(err)
	}
	if b := printed.Spec.Bootstrap; b == nil || b.Recovery.Backup == nil || b.Recovery.Backup.Name != "backed-up-1" || b.Recovery.Archive != nil {
		t.Errorf("spec.bootstrap = %+v, want the backup backed-up-1", b)
	}
	notCreated(t, ns, "from-backup")

	// Neither: nothing to restore.
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Backup: destination()},
	}, v1alpha1.RedisPersistenceStatus{})
	if _, _, err := run(t, "restore", "fresh", "--to", "new", "--latest", "-n", ns); err == nil ||
		!strings.Contains(err.Error(), "reports neither an archive reach (status.archive) nor a Completed backup (status.lastBackup)") {
		t.Errorf("--latest with nothing in the store: err = %v", err)
	}
}
