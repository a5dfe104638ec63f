package controllers

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
)

// RedisBenchmark condition reasons.
const (
	ReasonBenchmarkRunning     = "Running"
	ReasonTargetNotFound       = "TargetNotFound"
	ReasonTargetNotOptedIn     = "TargetNotOptedIn"
	ReasonCrashCheckNotAllowed = "CrashCheckNotAllowed"
	ReasonTargetNotReady       = "TargetNotReady"
	ReasonTargetBusy           = "TargetBusy"
	ReasonResultLost           = "ResultLost"
	ReasonBenchmarkSucceeded   = "Succeeded"
	ReasonBenchmarkFailed      = "Failed"
	ReasonJobFailed            = "JobFailed"
	ReasonResultInvalid        = "ResultInvalid"
	ReasonAcknowledgedLost     = "AcknowledgedWritesLost"
	ReasonNoFailure            = "NoFailure"
	ReasonBenchmarkNotStarted  = "NotStarted"
)

// jobOutcome is where a benchmark Job stands.
type jobOutcome int

const (
	jobRunning jobOutcome = iota
	jobSucceeded
	jobFailed
)

func benchmarkJobOutcome(job *batchv1.Job) (jobOutcome, string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return jobSucceeded, ""
		case batchv1.JobFailed:
			return jobFailed, c.Reason
		}
	}
	return jobRunning, ""
}

// terminationMessage is the runner's result from the Job's succeeded pod;
// found is false when no pod of pods succeeded.
func terminationMessage(pods []corev1.Pod) (msg string, found bool) {
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodSucceeded {
			continue
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == containerBench && cs.State.Terminated != nil {
				return cs.State.Terminated.Message, true
			}
		}
		return "", true
	}
	return "", false
}

// recordResult appends one target's result to the status.
func recordResult(st *v1alpha1.RedisBenchmarkStatus, r bench.Result) {
	st.Results = append(st.Results, bench.StatusResults(r)...)
	if r.Crash != nil {
		st.CrashChecks = append(st.CrashChecks, v1alpha1.CrashCheckResult{
			Target:           r.Target,
			Mode:             r.Mode,
			AcknowledgedKeys: r.Crash.Acknowledged,
			LostKeys:         r.Crash.Lost,
			Durable:          durableMode(r.Mode),
		})
	}
}

// lostDurableWrites names the first crash check in which a durable mode lost
// acknowledged writes.
func lostDurableWrites(st *v1alpha1.RedisBenchmarkStatus) (condition, bool) {
	for _, cc := range st.CrashChecks {
		if cc.Durable && cc.LostKeys > 0 {
			return condition{metav1.ConditionTrue, ReasonAcknowledgedLost,
				fmt.Sprintf("target %s (%s) lost %d of %d acknowledged keys when its server was killed", cc.Target, cc.Mode, cc.LostKeys, cc.AcknowledgedKeys)}, true
		}
	}
	return condition{}, false
}

// benchmarkFinished is true once the benchmark reached Complete or Failed.
func benchmarkFinished(rb *v1alpha1.RedisBenchmark) bool {
	for _, c := range rb.Status.Conditions {
		if (c.Type == v1alpha1.ConditionComplete || c.Type == v1alpha1.ConditionFailed) && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}
