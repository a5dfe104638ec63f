package specs_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

func TestDueBackup(t *testing.T) {
	daily, err := specs.ParseSchedule("0 3 * * *")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct{ last, now, due, next string }{
		{"2026-11-26T10:00:00Z", "2026-11-27T02:59:00Z", "", "2026-11-27T03:00:00Z"},
		{"2026-11-26T10:00:00Z", "2026-11-27T03:00:00Z", "2026-11-27T03:00:00Z", "2026-11-28T03:00:00Z"},
		// Three runs missed: only the latest is taken.
		{"2026-11-24T03:00:00Z", "2026-11-27T09:00:00Z", "2026-11-27T03:00:00Z", "2026-11-28T03:00:00Z"},
		{"2026-11-27T03:00:00Z", "2026-11-27T09:00:00Z", "", "2026-11-28T03:00:00Z"},
	} {
		due, next := specs.DueBackup(daily, at(tc.last), at(tc.now))
		if (tc.due == "" && !due.IsZero()) || (tc.due != "" && !due.Equal(at(tc.due))) || !next.Equal(at(tc.next)) {
			t.Errorf("last %s, now %s: due %v, next %v; want %q, %s", tc.last, tc.now, due, next, tc.due, tc.next)
		}
	}
	if _, err := specs.ParseSchedule("0 3 * *"); err == nil {
		t.Error("a schedule of four fields parsed")
	}
}

func TestScheduledBackupName(t *testing.T) {
	rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	rp.Name = strings.Repeat("n", 52)
	b := specs.ScheduledBackup(rp, time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC))
	if want := strings.Repeat("n", 43) + "-202611270300"; b.Name != want || len(b.Name) > 56 {
		t.Errorf("name %q, want %q (at most 56 characters)", b.Name, want)
	}
	if b.Labels[specs.LabelScheduledFor] != rp.Name || !specs.ScheduledAt(b).Equal(time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)) ||
		!slices.Contains(b.Finalizers, specs.FinalizerBackupObjects) {
		t.Errorf("scheduled backup %+v lacks its label, run or finalizer", b.ObjectMeta)
	}
}

func TestExpiredBackups(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: &v1alpha1.BackupSpec{
		Schedule: "0 * * * *", Retention: &v1alpha1.BackupRetention{Count: 2, MaxAge: &metav1.Duration{Duration: 5 * time.Hour}},
	}})
	backup := func(name string, hoursAgo int, phase v1alpha1.BackupPhase) v1alpha1.RedisBackup {
		b := specs.ScheduledBackup(rp, now.Add(-time.Duration(hoursAgo)*time.Hour))
		b.Name, b.Status.Phase = name, phase
		if phase == v1alpha1.BackupCompleted {
			b.Status.Point = &metav1.Time{Time: now.Add(-time.Duration(hoursAgo) * time.Hour)}
		}
		return *b
	}
	names := func(backups []*v1alpha1.RedisBackup) []string {
		var out []string
		for _, b := range backups {
			out = append(out, b.Name)
		}
		slices.Sort(out)
		return out
	}
	list := []v1alpha1.RedisBackup{
		backup("running", 0, v1alpha1.BackupRunning),
		backup("newest", 1, v1alpha1.BackupCompleted),
		backup("failed-new", 0, v1alpha1.BackupFailed),
		backup("second", 2, v1alpha1.BackupCompleted),
		backup("failed-old", 3, v1alpha1.BackupFailed),
		backup("third", 3, v1alpha1.BackupCompleted),
		backup("ancient", 9, v1alpha1.BackupCompleted),
	}
	if got, want := names(specs.ExpiredBackups(rp, list, now)), []string{"ancient", "failed-old", "third"}; !slices.Equal(got, want) {
		t.Errorf("expired %v, want %v", got, want)
	}
	// The newest completed backup stays however old it is.
	old := []v1alpha1.RedisBackup{backup("only", 20, v1alpha1.BackupCompleted), backup("older", 30, v1alpha1.BackupCompleted)}
	if got, want := names(specs.ExpiredBackups(rp, old, now)), []string{"older"}; !slices.Equal(got, want) {
		t.Errorf("expired %v, want %v", got, want)
	}
	rp.Spec.Backup.Retention = nil
	if got := specs.ExpiredBackups(rp, list, now); len(got) != 0 {
		t.Errorf("without retention, expired %v", names(got))
	}
}

func TestBackupExpiry(t *testing.T) {
	point := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	hours := func(h int) *metav1.Duration { return &metav1.Duration{Duration: time.Duration(h) * time.Hour} }
	rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: &v1alpha1.BackupSpec{
		Schedule: "@daily", Retention: &v1alpha1.BackupRetention{MaxAge: hours(336)},
	}})
	completed := func(expiresAfter *metav1.Duration, expiresAt *time.Time) *v1alpha1.RedisBackup {
		b := &v1alpha1.RedisBackup{Spec: v1alpha1.RedisBackupSpec{ExpiresAfter: expiresAfter}}
		b.Status.Phase, b.Status.Point = v1alpha1.BackupCompleted, &metav1.Time{Time: point}
		if expiresAt != nil {
			b.Status.ExpiresAt = &metav1.Time{Time: *expiresAt}
		}
		return b
	}
	fixed := point.Add(24 * time.Hour)
	scheduled := completed(nil, nil)
	scheduled.Labels = map[string]string{specs.LabelScheduledFor: rp.Name}
	failed := completed(hours(1), nil)
	failed.Status.Phase, failed.Status.Point = v1alpha1.BackupFailed, nil
	for _, tc := range []struct {
		desc string
		b    *v1alpha1.RedisBackup
		rp   *v1alpha1.RedisPersistence
		want time.Duration // after the point; 0: none
	}{
		{"its own expiry", completed(hours(48), nil), rp, 48 * time.Hour},
		{"its own expiry, changed since it completed", completed(hours(2), &fixed), nil, 2 * time.Hour},
		{"completing by hand: the instance's retention.maxAge", completed(nil, nil), rp, 336 * time.Hour},
		{"completed by hand before: what it was given then", completed(nil, &fixed), rp, 24 * time.Hour},
		{"completing by hand, the instance gone", completed(nil, nil), nil, 0},
		{"scheduled: retention's alone", scheduled, rp, 0},
		{"failed", failed, rp, 0},
	} {
		got := specs.BackupExpiry(tc.b, specs.DefaultExpiresAfter(tc.b, tc.rp))
		switch {
		case tc.want == 0 && got != nil:
			t.Errorf("%s: expires at %s, want never", tc.desc, got)
		case tc.want != 0 && (got == nil || !got.Equal(&metav1.Time{Time: point.Add(tc.want)})):
			t.Errorf("%s: expires at %v, want %s", tc.desc, got, point.Add(tc.want))
		}
	}
}
