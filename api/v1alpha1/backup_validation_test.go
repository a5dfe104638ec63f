package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// s3 is a valid spec.backup.destination.s3 with fields replaced or added.
func s3(fields map[string]any) map[string]any {
	d := map[string]any{
		"endpoint": "https://s3.example.com:9000", "bucket": "backups",
		"credentials": map[string]any{"secretName": "s3"},
	}
	for k, v := range fields {
		d[k] = v
	}
	return map[string]any{"mode": "uring", "backup": map[string]any{"destination": map[string]any{"s3": d}}}
}

func TestBackupDestinationsRejected(t *testing.T) {
	for _, tc := range []rejection{
		{"no destination", map[string]any{"mode": "aof", "backup": map[string]any{}}, "spec.backup.destination: Required value"},
		{"endpoint without a scheme", s3(map[string]any{"endpoint": "s3.example.com"}), "endpoint is the object store's URL"},
		{"endpoint of another scheme", s3(map[string]any{"endpoint": "ftp://s3.example.com"}), "endpoint is the object store's URL"},
		{"endpoint with the bucket in its path", s3(map[string]any{"endpoint": "https://s3.example.com/backups"}), "without a path or query"},
		{"bucket in upper case", s3(map[string]any{"bucket": "Backups"}), "spec.backup.destination.s3.bucket in body should match"},
		{"bucket too short", s3(map[string]any{"bucket": "ab"}), "spec.backup.destination.s3.bucket in body should be at least 3 chars long"},
		{"path with a leading slash", s3(map[string]any{"path": "/team/cache"}), "path is a prefix like team/cache"},
		{"path with an empty segment", s3(map[string]any{"path": "team//cache"}), "path is a prefix like team/cache"},
		{"no credentials", s3(map[string]any{"credentials": map[string]any{}}), "spec.backup.destination.s3.credentials.secretName: Required value"},
		{"unknown encryption", s3(map[string]any{"serverSideEncryption": "rot13"}), `Unsupported value: "rot13"`},
		{"unknown compression", withCompression(s3(nil), "lz4"), `spec.backup.compression: Unsupported value: "lz4": supported values: "none", "zstd"`},
	} {
		expectRejected(t, tc)
	}
}

func TestBackupDestinationAccepted(t *testing.T) {
	ctx := context.Background()
	u := newObject(s3(map[string]any{
		"endpoint": "http://seaweedfs.storage.svc:8333", "path": "team/cache",
		"caSecret": map[string]any{"name": "store-ca"}, "serverSideEncryption": "AES256",
	}))
	if err := k8s.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), rp); err != nil {
		t.Fatal(err)
	}
	d := rp.Spec.Backup.Destination.S3
	got := fmt.Sprintf("%s %s %s %s", d.Region, d.Credentials.AccessKeyIDKey, d.Credentials.SecretAccessKeyKey, d.CASecret.Key)
	if want := "us-east-1 AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY ca.crt"; got != want {
		t.Errorf("defaults %q, want %q", got, want)
	}
}

func withCompression(spec map[string]any, c string) map[string]any {
	spec["backup"].(map[string]any)["compression"] = c
	return spec
}

func withRecovery(spec map[string]any) map[string]any {
	spec["bootstrap"] = map[string]any{"recovery": map[string]any{"backup": map[string]any{"name": "nightly"}}}
	return spec
}

func TestBootstrapValidated(t *testing.T) {
	expectRejected(t, rejection{"recovery without a destination", withRecovery(map[string]any{"mode": "uring"}), "set spec.backup too"})
	none := withRecovery(s3(nil))
	none["mode"] = "none"
	expectRejected(t, rejection{"recovery into mode none", none, "mode none has nothing to restore into"})
	expectRejected(t, rejection{"recovery of nothing", map[string]any{"mode": "aof", "bootstrap": map[string]any{"recovery": map[string]any{}}}, "set exactly one of backup, storedBackup and archive"})
	both := withRecovery(s3(nil))
	both["bootstrap"].(map[string]any)["recovery"].(map[string]any)["archive"] = map[string]any{"path": "shop/cache"}
	expectRejected(t, rejection{"recovery of a backup and an archive", both, "set exactly one of backup, storedBackup and archive"})
	stored := withRecovery(s3(nil))
	stored["bootstrap"].(map[string]any)["recovery"].(map[string]any)["storedBackup"] = map[string]any{"path": "shop/cache"}
	expectRejected(t, rejection{"recovery of a backup and a stored backup", stored, "set exactly one of backup, storedBackup and archive"})
	for _, tc := range []struct {
		desc   string
		stored map[string]any
		want   string
	}{
		{"stored backup without a path", map[string]any{"name": "nightly"}, "spec.bootstrap.recovery.storedBackup.path: Required value"},
		{"stored backup under a path with a leading slash", map[string]any{"path": "/shop/cache"}, "path is a prefix like team/cache"},
		{"stored backup of a name no RedisBackup can have", map[string]any{"path": "shop/cache", "name": "Nightly_1"}, "spec.bootstrap.recovery.storedBackup.name"},
	} {
		spec := s3(nil)
		spec["mode"] = "uring"
		spec["bootstrap"] = map[string]any{"recovery": map[string]any{"storedBackup": tc.stored}}
		expectRejected(t, rejection{tc.desc, spec, tc.want})
	}
	for _, tc := range []struct {
		desc, mode string
		archive    map[string]any
		want       string
	}{
		{"archive recovery into mode rdb", "rdb", map[string]any{"path": "shop/cache"}, "it needs mode aof or uring"},
		{"archive recovery without a path", "uring", map[string]any{"targetTime": "2026-11-27T06:30:00Z"}, "spec.bootstrap.recovery.archive.path: Required value"},
		{"archive recovery of a path with a trailing slash", "uring", map[string]any{"path": "shop/cache/"}, "path is a prefix like team/cache"},
		{"archive recovery to a time that is none", "aof", map[string]any{"path": "shop/cache", "targetTime": "yesterday"}, "targetTime"},
	} {
		spec := s3(nil)
		spec["mode"] = tc.mode
		spec["bootstrap"] = map[string]any{"recovery": map[string]any{"archive": tc.archive}}
		expectRejected(t, rejection{tc.desc, spec, tc.want})
	}

	ctx := context.Background()
	u := newObject(withRecovery(s3(nil)))
	if err := k8s.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), rp); err != nil {
		t.Fatal(err)
	}
	rp.Spec.Bootstrap.Recovery.Backup.Name = "weekly"
	if err := k8s.Update(ctx, rp); err == nil || !strings.Contains(err.Error(), "cannot be added to or changed on an existing one") {
		t.Fatalf("changing the backup to restore: %v, want a refusal", err)
	}
	rp.Spec.Bootstrap = nil
	if err := k8s.Update(ctx, rp); err != nil {
		t.Fatalf("removing spec.bootstrap: %v", err)
	}
	rp.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Backup: &v1alpha1.LocalObjectReference{Name: "nightly"}}}
	if err := k8s.Update(ctx, rp); err == nil || !strings.Contains(err.Error(), "cannot be added to or changed on an existing one") {
		t.Fatalf("adding spec.bootstrap to an instance: %v, want a refusal", err)
	}
}

func newBackup(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("RedisBackup"))
	u.SetName(name)
	u.SetNamespace("default")
	return u
}

func TestRedisBackupsValidated(t *testing.T) {
	ctx := context.Background()
	instance := map[string]any{"name": "cache"}
	for _, tc := range []struct {
		desc, name string
		spec       map[string]any
		wantErr    string
	}{
		{"no instance", "rbak-none", map[string]any{}, "spec.redisPersistence: Required value"},
		{"unknown target", "rbak-target", map[string]any{"redisPersistence": instance, "target": "Replica"}, `Unsupported value: "Replica"`},
		{"name too long for its Job", strings.Repeat("b", 57), map[string]any{"redisPersistence": instance}, "a RedisBackup name is at most 56 characters"},
		{"expiry under an hour", "rbak-short", map[string]any{"redisPersistence": instance, "expiresAfter": "30m"}, "expiresAfter is at least 1h"},
		{"expiry that is no duration", "rbak-nonsense", map[string]any{"redisPersistence": instance, "expiresAfter": "a week"}, "type conversion error from 'string' to 'google.protobuf.Duration' evaluating rule: expiresAfter is at least 1h"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := k8s.Create(ctx, newBackup(tc.name, tc.spec), client.FieldValidation("Strict"))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}

	u := newBackup("rbak-immutable", map[string]any{"redisPersistence": instance})
	if err := k8s.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	b := &v1alpha1.RedisBackup{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.Target != v1alpha1.TargetPreferReplica {
		t.Errorf("target defaults to %q, want PreferReplica", b.Spec.Target)
	}
	b.Spec.RedisPersistence.Name = "other"
	if err := k8s.Update(ctx, b); err == nil || !strings.Contains(err.Error(), "spec is immutable but for expiresAfter") {
		t.Fatalf("changing the instance: error %v, want spec is immutable", err)
	}

	// expiresAfter may be set after the backup ran, and changed, but not
	// removed.
	for _, expiry := range []string{"720h", "2h"} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), b); err != nil {
			t.Fatal(err)
		}
		b.Spec.ExpiresAfter = &metav1.Duration{}
		if err := b.Spec.ExpiresAfter.UnmarshalJSON([]byte(`"` + expiry + `"`)); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Update(ctx, b); err != nil {
			t.Fatalf("setting expiresAfter to %s: %v", expiry, err)
		}
	}
	b.Spec.ExpiresAfter = nil
	if err := k8s.Update(ctx, b); err == nil || !strings.Contains(err.Error(), "spec.expiresAfter cannot be removed once set") {
		t.Fatalf("removing expiresAfter: error %v, want it refused", err)
	}
	b.Spec.ExpiresAfter = &metav1.Duration{Duration: 10 * time.Minute}
	if err := k8s.Update(ctx, b); err == nil || !strings.Contains(err.Error(), "expiresAfter is at least 1h") {
		t.Fatalf("shortening expiresAfter to 10m: error %v, want it refused", err)
	}
}

func TestArchiveValidated(t *testing.T) {
	withArchive := func(mode string, archive map[string]any) map[string]any {
		spec := s3(nil)
		spec["mode"] = mode
		spec["backup"].(map[string]any)["archive"] = archive
		return spec
	}
	for _, tc := range []rejection{
		{"archive of mode rdb", withArchive("rdb", map[string]any{}), "spec.backup.archive ships the AOF: it needs mode aof or uring"},
		{"archive of mode none", withArchive("none", map[string]any{}), "spec.backup.archive ships the AOF: it needs mode aof or uring"},
		{"archive interval under a second", withArchive("uring", map[string]any{"interval": "500ms"}), "archive.interval is between 1s and 1h"},
		{"archive interval over an hour", withArchive("aof", map[string]any{"interval": "2h"}), "archive.interval is between 1s and 1h"},
		{"archive kept under an hour", withArchive("uring", map[string]any{"maxAge": "59m"}), "archive.maxAge is at least 1h"},
		{"archive kept for no duration", withArchive("uring", map[string]any{"maxAge": "forever"}), "spec.backup.archive.maxAge: Invalid value: \"string\": type conversion error"},
	} {
		expectRejected(t, tc)
	}

	ctx := context.Background()
	u := newObject(withArchive("aof", map[string]any{}))
	u.Object["spec"].(map[string]any)["bootstrap"] = map[string]any{"recovery": map[string]any{"archive": map[string]any{
		"path": "shop/cache", "targetTime": "2026-11-27T06:30:00Z"}}}
	if err := k8s.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), rp); err != nil {
		t.Fatal(err)
	}
	if got := rp.Spec.Backup.Archive.Interval; got == nil || got.Duration.String() != "30s" {
		t.Errorf("archive.interval defaults to %v, want 30s", got)
	}
	if a := rp.Spec.Bootstrap.Recovery.Archive; a.Path != "shop/cache" || a.TargetTime.UTC().Format("2006-01-02T15:04:05Z") != "2026-11-27T06:30:00Z" {
		t.Errorf("recovery.archive %+v", a)
	}
}
