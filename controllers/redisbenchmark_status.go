package controllers

import (
	"fmt"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
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
	return terminationMessageOf(pods, corev1.PodSucceeded, specs.ContainerBench)
}

// terminationMessageOf is container's termination message in the newest pod
// of pods in phase; found is false when no pod is in phase.
func terminationMessageOf(pods []corev1.Pod, phase corev1.PodPhase, container string) (msg string, found bool) {
	var newest *corev1.Pod
	for i := range pods {
		if pods[i].Status.Phase == phase && (newest == nil || newest.CreationTimestamp.Before(&pods[i].CreationTimestamp)) {
			newest = &pods[i]
		}
	}
	if newest == nil {
		return "", false
	}
	for _, cs := range newest.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			return cs.State.Terminated.Message, true
		}
	}
	return "", true
}

// recordRun appends the result of one run, repetition number repetition of
// its target, to the status.
func recordRun(st *v1alpha1.RedisBenchmarkStatus, r bench.Result, repetition int) {
	for _, res := range bench.StatusResults(r) {
		res.Repetition = int32(repetition)
		st.Runs = append(st.Runs, res)
	}
	if r.Crash != nil {
		st.CrashChecks = append(st.CrashChecks, v1alpha1.CrashCheckResult{
			Target:           r.Target,
			Mode:             r.Mode,
			AcknowledgedKeys: r.Crash.Acknowledged,
			LostKeys:         r.Crash.Lost,
			Durable:          specs.DurableMode(r.Mode),
		})
	}
}

// medianRepetitions is, for each command of target in runs, the figures of
// its median repetition by throughput (the faster of the two middle ones for
// an even count): whole runs, so that a command's throughput, latency and CPU
// come from the same repetition. Commands keep their run order.
func medianRepetitions(runs []v1alpha1.BenchmarkResult, target string) []v1alpha1.BenchmarkResult {
	var commands []string
	byCommand := map[string][]v1alpha1.BenchmarkResult{}
	for _, r := range runs {
		if r.Target != target {
			continue
		}
		if _, seen := byCommand[r.Command]; !seen {
			commands = append(commands, r.Command)
		}
		byCommand[r.Command] = append(byCommand[r.Command], r)
	}
	out := make([]v1alpha1.BenchmarkResult, 0, len(commands))
	for _, c := range commands {
		reps := byCommand[c]
		sort.SliceStable(reps, func(i, j int) bool { return reps[i].OpsPerSecond < reps[j].OpsPerSecond })
		out = append(out, reps[len(reps)/2])
	}
	return out
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
