package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

func TestBackupName(t *testing.T) {
	for _, tc := range []struct{ instance, want string }{
		{"cache", "cache-20261128120000"},
		// Cut to 41 characters: the name is then 56, a RedisBackup's most.
		{strings.Repeat("a", 52), strings.Repeat("a", 41) + "-20261128120000"},
	} {
		if got := BackupName(tc.instance, testNow); got != tc.want {
			t.Errorf("BackupName(%q) = %q, want %q", tc.instance, got, tc.want)
		}
	}
}

// instanceWithBackup is the instance cache, with a store.
func instanceWithBackup(t *testing.T, ns string) {
	t.Helper()
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Backup: destination()},
	}, v1alpha1.RedisPersistenceStatus{})
}

func TestBackupCreates(t *testing.T) {
	ns := namespace(t)
	instanceWithBackup(t, ns)
	stdout, stderr, err := run(t, "backup", "cache", "-n", ns, "--target", "Primary")
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, stderr)
	}
	if want := "redisbackup/cache-20261128120000 created\n"; stdout != want {
		t.Errorf("printed %q, want %q", stdout, want)
	}
	b := &v1alpha1.RedisBackup{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "cache-20261128120000"}, b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.RedisPersistence.Name != "cache" || b.Spec.Target != v1alpha1.TargetPrimary {
		t.Errorf("spec = %+v, want a backup of cache from the primary", b.Spec)
	}

	// The same second again: the name is taken, and the error says why.
	if _, _, err := run(t, "backup", "cache", "-n", ns); err == nil || !strings.Contains(err.Error(), "already exists: a backup of cache was created this second") {
		t.Errorf("a second backup in the same second: err = %v", err)
	}
}

func TestBackupRefuses(t *testing.T) {
	ns := namespace(t)
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nostore"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF},
	}, v1alpha1.RedisPersistenceStatus{})
	instanceWithBackup(t, ns)
	for _, tc := range []struct {
		desc    string
		args    []string
		wantErr string
	}{
		{"unknown instance", []string{"backup", "nope", "-n", ns}, `no RedisPersistence "nope" in namespace "` + ns + `"`},
		{"no store", []string{"backup", "nostore", "-n", ns}, "has no spec.backup: set spec.backup.destination"},
		{"unknown target", []string{"backup", "cache", "-n", ns, "--target", "Replica"}, "--target Replica: the targets are PreferReplica and Primary"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
	list := &v1alpha1.RedisBackupList{}
	if err := k8s.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, b := range list.Items {
		if b.Namespace == ns {
			t.Errorf("a refused backup created %s", b.Name)
		}
	}
}

// waitBackup runs `backup NAME --wait` while the test plays the operator:
// once the RedisBackup exists, it writes the statuses of then into it, one
// after another.
func waitBackup(t *testing.T, ns, instance string, args []string, then ...v1alpha1.RedisBackupStatus) (stdout, stderr string, err error) {
	t.Helper()
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, 1)
	go func() {
		o, e, err := run(t, append([]string{"backup", instance, "-n", ns, "--wait"}, args...)...)
		done <- result{o, e, err}
	}()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: BackupName(instance, testNow)}
	for _, status := range then {
		b := &v1alpha1.RedisBackup{}
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, key, b)
			return err == nil, client404(err)
		}); err != nil {
			t.Fatalf("the command created no RedisBackup %s: %v", key, err)
		}
		setBackupStatus(t, b, status)
		// Let the command read this phase before the next replaces it.
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case r := <-done:
		return r.stdout, r.stderr, r.err
	case <-time.After(30 * time.Second):
		t.Fatal("backup --wait did not return after the backup ended")
	}
	return "", "", nil
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func TestBackupWaitFailed(t *testing.T) {
	ns := namespace(t)
	instanceWithBackup(t, ns)
	stdout, _, err := waitBackup(t, ns, "cache", nil,
		v1alpha1.RedisBackupStatus{Phase: v1alpha1.BackupRunning, Job: "cache-20261128120000-backup"},
		v1alpha1.RedisBackupStatus{Phase: v1alpha1.BackupFailed, Message: `access denied by the store: check the credentials Secret "store"`},
	)
	if !errors.Is(err, errBackupFailed) || !strings.Contains(err.Error(), `the RedisBackup cache-20261128120000 is Failed: access denied by the store: check the credentials Secret "store"`) {
		t.Errorf("err = %v, want the backup's failure", err)
	}
	for _, want := range []string{
		"redisbackup/cache-20261128120000 created\n",
		"cache-20261128120000: Running\n",
		"cache-20261128120000: Failed: access denied by the store",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

func TestBackupWaitCompletedJSON(t *testing.T) {
	ns := namespace(t)
	instanceWithBackup(t, ns)
	completed := v1alpha1.RedisBackupStatus{
		Phase: v1alpha1.BackupCompleted, Point: at(-time.Second), CompletedAt: at(0), StartedAt: at(-10 * time.Second),
		Location: "s3://backups/" + ns + "/cache/backups/cache-20261128120000/dump.rdb.zst", Size: 4096,
		SHA256: strings.Repeat("ab", 32), Mode: v1alpha1.ModeAOF,
	}
	stdout, stderr, err := waitBackup(t, ns, "cache", []string{"-o", "json"}, completed)
	if err != nil {
		t.Fatalf("backup --wait: %v\n%s", err, stderr)
	}
	var got v1alpha1.RedisBackup
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not a RedisBackup: %v\n%s", err, stdout)
	}
	if got.Name != "cache-20261128120000" || got.Status.Phase != v1alpha1.BackupCompleted || got.Status.Location != completed.Location || got.Status.Size != 4096 {
		t.Errorf("printed %+v, want the Completed backup", got)
	}
	if want := "cache-20261128120000: " + completed.Location + ", point 2026-11-28T11:59:59Z, 4.0 KiB\n"; !strings.HasSuffix(stderr, want) {
		t.Errorf("stderr = %q, want it to end with %q", stderr, want)
	}
}

func TestBackupWaitTimeout(t *testing.T) {
	ns := namespace(t)
	instanceWithBackup(t, ns)
	_, _, err := run(t, "backup", "cache", "-n", ns, "--wait", "--timeout", "300ms")
	if err == nil || !strings.Contains(err.Error(), "the RedisBackup cache-20261128120000 is still new (the operator has not seen it)") {
		t.Errorf("err = %v, want it to say the backup has not started", err)
	}
}
