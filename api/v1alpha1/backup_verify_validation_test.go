package v1alpha1_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// withVerify is a valid instance with spec.backup.verify set to verify.
func withVerify(verify map[string]any) map[string]any {
	spec := s3(nil)
	spec["backup"].(map[string]any)["verify"] = verify
	return spec
}

func TestBackupVerifyRejected(t *testing.T) {
	for _, tc := range []rejection{
		{"no schedule", withVerify(map[string]any{}), "spec.backup.verify.schedule: Required value"},
		{"a cron of four fields", withVerify(map[string]any{"schedule": "0 3 * *"}), "verify.schedule is a cron expression of five fields in UTC"},
		{"an unknown descriptor", withVerify(map[string]any{"schedule": "@fortnightly"}), "verify.schedule is a cron expression of five fields in UTC"},
		{"too many sampled keys", withVerify(map[string]any{"schedule": "@daily", "sampleKeys": 1001}), "spec.backup.verify.sampleKeys: Invalid value: 1001: spec.backup.verify.sampleKeys in body should be less than or equal to 1000"},
		{"a negative sample", withVerify(map[string]any{"schedule": "@daily", "sampleKeys": -1}), "should be greater than or equal to 0"},
		{"a timeout too short", withVerify(map[string]any{"schedule": "@daily", "timeout": "30s"}), "verify.timeout is between 1m and 24h"},
		{"a timeout too long", withVerify(map[string]any{"schedule": "@daily", "timeout": "48h"}), "verify.timeout is between 1m and 24h"},
	} {
		expectRejected(t, tc)
	}
}

func TestBackupVerifyDefaults(t *testing.T) {
	ctx := context.Background()
	u := newObject(withVerify(map[string]any{"schedule": "30 4 * * *"}))
	if err := k8s.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), rp); err != nil {
		t.Fatal(err)
	}
	v := rp.Spec.Backup.Verify
	if rp.VerifySampleKeys() != 100 || v.SampleKeys == nil || v.VerifyTimeout() != 30*time.Minute || v.Timeout == nil {
		t.Errorf("verify %+v: want the defaults sampleKeys 100 and timeout 30m filled in", v)
	}
	for _, schedule := range []string{"@every 6h", "@daily", "0 */4 * * 1-5"} {
		ok := newObject(withVerify(map[string]any{"schedule": schedule, "sampleKeys": 0, "timeout": "2h"}))
		if err := k8s.Create(ctx, ok, client.FieldValidation("Strict")); err != nil {
			t.Errorf("schedule %q: %v", schedule, err)
		}
	}
}
