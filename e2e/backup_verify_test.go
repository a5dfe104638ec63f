//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestVerifiedBackup: with spec.backup.verify, the operator restores the
// instance's newest backup into the temporary instance <name>-verify on a
// real cluster (its restore container downloads the snapshot from the real
// store, its server loads it from a local volume), finds every key the
// backup counted and its sampled keys, reports Verified on the RedisBackup,
// and deletes the temporary instance and its claim. The snapshot replaced
// in the store, the next run fails, with the restore container's words.
func TestVerifiedBackup(t *testing.T) {
	const name = "verified"
	endpoint := objectStore(t)
	createStoreSecret(t, "verify-store", storeSecretKey)
	backupTo := backupSpec(endpoint, "verify-store")
	backupTo.Verify = &v1alpha1.BackupVerifySpec{Schedule: "@every 2m", SampleKeys: ptr.To[int32](100),
		Timeout: &metav1.Duration{Duration: 5 * time.Minute}}
	create(t, name, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}, Backup: backupTo})
	rp := waitReady(t, name)

	var script strings.Builder
	for i := range 400 {
		fmt.Fprintf(&script, "SET key:%04d value:%d\n", i, i)
	}
	for i := range 20 {
		fmt.Fprintf(&script, "SET expiring:%02d soon EX 3600\n", i)
	}
	if out := podExec(t, name+"-0", script.String(), "valkey-cli"); strings.Count(out, "OK") != 420 {
		t.Fatalf("writing the keys: %.300q", out)
	}
	kubectlApply(t, fmt.Sprintf("apiVersion: persistence.uringredis.io/v1alpha1\nkind: RedisBackup\nmetadata: {name: %s, namespace: %s}\nspec: {redisPersistence: {name: %s}}\n",
		name, namespace, name))
	b := waitBackup(t, name, v1alpha1.BackupCompleted, 5*time.Minute)
	if b.Status.Keys == nil || *b.Status.Keys != 420 {
		t.Fatalf("status.keys %v, want the 420 keys written", b.Status.Keys)
	}

	// The first run is due two minutes after the instance was created.
	start := time.Now()
	b = waitVerification(t, name, rp.CreationTimestamp.Add(2*time.Minute+8*time.Minute))
	v := b.Status.Verification
	t.Logf("verification of %s: %s %s after the backup (temporary instance %s, started %s, finished %s): %s",
		name, v.Result, time.Since(start).Round(time.Second), v.Instance, v.StartedAt, v.FinishedAt, v.Message)
	if v.Result != v1alpha1.VerificationVerified || v.Keys == nil || *v.Keys != 420 ||
		!strings.Contains(v.Message, "the restore holds 420 keys (400 without a TTL) of the 420 recorded at the backup's point; 100 sampled keys checked: all match") {
		t.Errorf("status.verification %+v: want Verified with every key and the sample", v)
	}
	// No further run while the rest is checked.
	updateRP(t, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Backup.Verify.Schedule = "@yearly" })
	waitTemporaryGone(t, name)

	// Replace the stored snapshot: the next run's restore refuses it.
	replaceObject(t, b.Status.Location, []byte("not the snapshot"))
	updateRP(t, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Backup.Verify.Schedule = "@every 2m" })
	b = waitVerification(t, name, time.Now().Add(10*time.Minute), func(v *v1alpha1.BackupVerification) bool {
		return v.FinishedAt != nil && v.FinishedAt.After(v.StartedAt.Time) && v.StartedAt.After(b.Status.Verification.FinishedAt.Time)
	})
	updateRP(t, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Backup.Verify.Schedule = "@yearly" })
	if v := b.Status.Verification; v.Result != v1alpha1.VerificationFailed || !strings.Contains(v.Message, "the restore refused the backup") {
		t.Errorf("status.verification %+v after the snapshot was replaced: want Failed, the restore's refusal", v)
	}
	waitTemporaryGone(t, name)
}

// waitVerification waits until the RedisBackup name's verification has
// ended (and, with newer, is the one newer accepts), by deadline.
func waitVerification(t *testing.T, name string, deadline time.Time, newer ...func(*v1alpha1.BackupVerification) bool) *v1alpha1.RedisBackup {
	t.Helper()
	b := &v1alpha1.RedisBackup{}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, b); err != nil {
			return false, nil
		}
		v := b.Status.Verification
		if v == nil || v.Result == v1alpha1.VerificationRunning || v.FinishedAt == nil {
			return false, nil
		}
		for _, accept := range newer {
			if !accept(v) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Log(describeBackup(name))
		t.Fatalf("the verification of %s has not ended by %s: %+v", name, deadline.Format(time.RFC3339), b.Status.Verification)
	}
	return b
}

// waitTemporaryGone waits until the temporary instance of name and its
// volume claim are gone.
func waitTemporaryGone(t *testing.T, name string) {
	t.Helper()
	temp := name + "-verify"
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: temp}, &v1alpha1.RedisPersistence{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "data-" + temp + "-0"}, &corev1.PersistentVolumeClaim{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the temporary instance %s or its claim data-%s-0 is still there after 3m", temp, temp)
	}
}

// replaceObject overwrites the object at an s3://bucket/key location.
func replaceObject(t *testing.T, location string, data []byte) {
	t.Helper()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(location, "s3://"), "/")
	c, stop := storeClient(t)
	defer stop()
	if _, err := c.PutObject(context.Background(), bucket, key, strings.NewReader(string(data)), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("replacing %s: %v", location, err)
	}
}
