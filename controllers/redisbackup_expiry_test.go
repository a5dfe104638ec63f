package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// TestManualBackupsExpire: a backup made by hand expires at its point plus
// spec.expiresAfter, or, without it, plus the instance's
// spec.backup.retention.maxAge as it was when the backup completed; one
// completed before the instance had a retention never does. When it
// expires, the operator deletes its objects from the store, then the
// RedisBackup, and says so on the instance. expiresAfter set later moves
// the expiry.
func TestManualBackupsExpire(t *testing.T) {
	ctx := context.Background()
	ns, store := namespaceWithStore(t)
	createRP(t, ns, "cache", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination(store)})
	makeReady(t, ns, "cache")
	addr, _ := serverAddrs.Load(ns + "/cache-0")
	t.Cleanup(func() { backupClock.SetTime(testNow) })
	start := func(name string, expiresAfter *metav1.Duration) {
		t.Helper()
		b := &v1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.RedisBackupSpec{RedisPersistence: v1alpha1.LocalObjectReference{Name: "cache"}, ExpiresAfter: expiresAfter}}
		if err := k8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	finish := func(name string) {
		t.Helper()
		if code, msg := runBackupPod(t, ns, waitJob(t, ns, name+"-backup"), addr.(string)); code != 0 {
			t.Fatalf("the agent failed: %s", msg)
		}
	}
	completed := func(name string) *v1alpha1.RedisBackup {
		t.Helper()
		return waitBackup(t, ns, name, backupPhase(v1alpha1.BackupCompleted, ReasonBackupCompleted, ""))
	}
	gone := func(name string) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			if err := get(t, &v1alpha1.RedisBackup{}, ns, name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the expired backup %s is still there (%w)", name, err)
			}
			return nil
		})
	}

	// Completed before the instance had a retention: kept until deleted.
	start("kept", nil)
	finish("kept")
	completed("kept")

	updateRP(t, ns, "cache", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Backup.Schedule = "0 3 1 1 *" // no run within the test
		rp.Spec.Backup.Retention = &v1alpha1.BackupRetention{MaxAge: &metav1.Duration{Duration: 336 * time.Hour}}
	})
	// By hand, without expiresAfter: the instance's retention.maxAge.
	start("defaulted", nil)
	finish("defaulted")
	defaulted := waitBackup(t, ns, "defaulted", func(b *v1alpha1.RedisBackup) error {
		if b.Status.Phase != v1alpha1.BackupCompleted || b.Status.ExpiresAt == nil || !controllerutil.ContainsFinalizer(b, specs.FinalizerBackupObjects) {
			return fmt.Errorf("phase %s, expiresAt %v, finalizers %v; want Completed with an expiry and %s", b.Status.Phase, b.Status.ExpiresAt, b.Finalizers, specs.FinalizerBackupObjects)
		}
		return nil
	})
	if want := defaulted.Status.Point.Add(336 * time.Hour); !defaulted.Status.ExpiresAt.Time.Equal(want) {
		t.Errorf("expiresAt %s, want the point plus the instance's retention.maxAge, %s", defaulted.Status.ExpiresAt, want)
	}

	// One of a day, completed when the operator's clock is a day and an
	// hour past its point, goes at once, its objects first.
	start("daily", &metav1.Duration{Duration: 24 * time.Hour})
	backupClock.SetTime(time.Now().Add(25 * time.Hour))
	finish("daily")
	gone("daily")
	waitEvent(t, ns, "cache", "ExpiredBackup")

	// expiresAfter set on a completed backup moves its expiry: an hour
	// after its point is past.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &v1alpha1.RedisBackup{}
		if err := get(t, b, ns, "defaulted"); err != nil {
			return err
		}
		b.Spec.ExpiresAfter = &metav1.Duration{Duration: time.Hour}
		return k8s.Update(ctx, b)
	}); err != nil {
		t.Fatal(err)
	}
	gone("defaulted")

	kept := completed("kept")
	if kept.Status.ExpiresAt != nil || controllerutil.ContainsFinalizer(kept, specs.FinalizerBackupObjects) {
		t.Errorf("the backup completed before the retention: expiresAt %v, finalizers %v; want neither", kept.Status.ExpiresAt, kept.Finalizers)
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
	if !slices.Contains(keys, "backups/kept/backup.json") {
		t.Errorf("the store lacks the kept backup's backup.json: %v", keys)
	}
	for _, key := range keys {
		if strings.Contains(key, "/daily/") || strings.Contains(key, "/defaulted/") {
			t.Errorf("the expired backups' object %s is still in the store", key)
		}
	}
	stored, err := backup.Backups(ctx, s)
	if err != nil || len(stored) != 1 {
		t.Errorf("the store holds %d backups (%v), want the kept one: the archive's horizon is its point", len(stored), err)
	}
}
