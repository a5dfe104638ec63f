package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupVerifySpec has the operator prove the instance's backups by
// restoring them: at each run of schedule it restores the newest Completed
// RedisBackup of the instance into a temporary instance, compares what the
// restore holds with what the backup recorded when it was taken, reports
// the result in the RedisBackup's status.verification, and deletes the
// temporary instance and its volume.
type BackupVerifySpec struct {
	// schedule is when a verification runs: a cron expression of five
	// fields in UTC ("30 4 * * *"), or @hourly, @daily, @weekly, @monthly
	// or `@every <duration>`, as spec.backup.schedule. A run missed while
	// the operator was down runs once, at its next reconcile.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every [0-9]+[smh]([0-9]+[smh])*|[0-9*/,-]+ [0-9*/,-]+ [0-9*/,?,-]+ [0-9A-Za-z*/,-]+ [0-9A-Za-z*/,?,-]+)$')",message="verify.schedule is a cron expression of five fields in UTC (minute hour day-of-month month day-of-week, e.g. \"30 4 * * *\"), or @hourly, @daily, @weekly, @monthly, @yearly or @every <duration> (e.g. @every 6h)"
	Schedule string `json:"schedule"`
	// sampleKeys is how many keys, chosen at random, each backup of the
	// instance records (name, type, expiry, size and a string's digest)
	// for a verification to look up in the restore. Every key is counted
	// whatever it is. It applies to backups taken after it is set; 0 checks
	// the counts only.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	SampleKeys *int32 `json:"sampleKeys,omitempty"`
	// timeout is how long the temporary instance may take to restore the
	// backup and become Ready; past it the verification fails. Count on
	// the time to download the snapshot and load it.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="verify.timeout is between 1m and 24h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// VerificationResult is where a backup's verification stands.
// +kubebuilder:validation:Enum=Running;Verified;Failed
type VerificationResult string

const (
	// VerificationRunning restores the backup into the temporary instance.
	VerificationRunning VerificationResult = "Running"
	// VerificationVerified restored and matched what the backup recorded.
	VerificationVerified VerificationResult = "Verified"
	// VerificationFailed did not restore, or did not match; message says
	// what.
	VerificationFailed VerificationResult = "Failed"
)

// ConditionVerified is a RedisBackup's condition: True when its last
// verification found the restore to match, False while one runs or when
// it failed.
const ConditionVerified = "Verified"

// BackupVerification is a backup's last verification.
type BackupVerification struct {
	// result is Running, Verified or Failed.
	// +required
	Result VerificationResult `json:"result"`
	// instance is the temporary RedisPersistence the backup is restored
	// into: `<instance>-verify`, deleted when the verification ends.
	// +optional
	Instance string `json:"instance,omitempty"`
	// startedAt is when the temporary instance was created.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// finishedAt is when the result was known.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// keys is how many keys the restore held.
	// +optional
	Keys *int64 `json:"keys,omitempty"`
	// message says what was compared, with the numbers, or what failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// VerifySampleKeys is how many keys the instance's backups sample for a
// verification: 0 without spec.backup.verify.
func (rp *RedisPersistence) VerifySampleKeys() int32 {
	if rp.Spec.Backup == nil || rp.Spec.Backup.Verify == nil {
		return 0
	}
	if v := rp.Spec.Backup.Verify.SampleKeys; v != nil {
		return *v
	}
	return DefaultVerifySampleKeys
}

// VerifyTimeout is how long a verification of the instance's backups
// waits for the temporary instance.
func (v *BackupVerifySpec) VerifyTimeout() time.Duration {
	if v.Timeout != nil {
		return v.Timeout.Duration
	}
	return DefaultVerifyTimeout
}

// DefaultVerifySampleKeys and DefaultVerifyTimeout are what the API server
// fills in.
const (
	DefaultVerifySampleKeys = 100
	DefaultVerifyTimeout    = 30 * time.Minute
)
