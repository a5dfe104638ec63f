package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// testNow is the reconciler's fake clock.
var testNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// reportRestart writes what a kubelet writes when the server container ended
// and was started again.
func reportRestart(t *testing.T, ns, podName string, restarts int32, exitCode int32, reason string, finishedAt time.Time) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, podName); err != nil {
			return err
		}
		for i := range pod.Status.ContainerStatuses {
			cs := &pod.Status.ContainerStatuses[i]
			if cs.Name != specs.ContainerRedis {
				continue
			}
			cs.RestartCount = restarts
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Reason: reason,
				StartedAt: metav1.NewTime(finishedAt.Add(-time.Minute)), FinishedAt: metav1.NewTime(finishedAt),
			}}
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(finishedAt.Add(time.Second))}}
		}
		return k8s.Status().Update(context.Background(), pod)
	})
}

func eventsFor(t *testing.T, ns, name, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// A server that crashes and restarts is reported on the RedisPersistence:
// restart count, how it ended, Degraded while it keeps happening, an event
// per restart. The pod watch alone brings the news: the spec does not change.
func TestRestartsReported(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "crashy", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	waitCondition(t, ns, "crashy", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	actAsKubelet(t, ns, "crashy-0", "ext4")
	waitCondition(t, ns, "crashy", v1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonStable)

	reportRestart(t, ns, "crashy-0", 1, 139, "Error", testNow.Add(-time.Minute))
	got := waitCondition(t, ns, "crashy", v1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonRestarting)
	last := got.Status.LastTermination
	if got.Status.Restarts != 1 || last == nil || last.Signal != 11 || last.ExitCode != 139 || last.Reason != "Error" {
		t.Fatalf("restarts %d, last termination %+v; want 1 and signal 11, exit code 139", got.Status.Restarts, last)
	}
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded).Message; !strings.Contains(msg, "signal 11 (segmentation fault)") {
		t.Errorf("Degraded message %q does not say how the server died", msg)
	}
	eventually(t, 30*time.Second, func() error {
		if n := len(eventsFor(t, ns, "crashy", "Restarted")); n != 1 {
			return fmt.Errorf("%d Restarted events, want 1", n)
		}
		return nil
	})

	// The next crash is an OOM kill: a second event, the count follows.
	reportRestart(t, ns, "crashy-0", 2, 137, "OOMKilled", testNow.Add(-10*time.Second))
	eventually(t, 30*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, "crashy"); err != nil {
			return err
		}
		if rp.Status.Restarts != 2 || rp.Status.LastTermination == nil || rp.Status.LastTermination.Reason != "OOMKilled" {
			return fmt.Errorf("restarts %d, last termination %+v", rp.Status.Restarts, rp.Status.LastTermination)
		}
		if msg := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionDegraded).Message; !strings.Contains(msg, "OOM-killed") {
			return fmt.Errorf("Degraded message %q", msg)
		}
		var events []corev1.Event
		for _, e := range eventsFor(t, ns, "crashy", "Restarted") {
			if e.Type == corev1.EventTypeWarning {
				events = append(events, e)
			}
		}
		if len(events) != 2 {
			return fmt.Errorf("%d Restarted warnings, want 2", len(events))
		}
		return nil
	})

	// A restart long ago is history: reported, not Degraded.
	createRP(t, ns, "recovered", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	waitCondition(t, ns, "recovered", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	actAsKubelet(t, ns, "recovered-0", "ext4")
	reportRestart(t, ns, "recovered-0", 1, 1, "Error", testNow.Add(-time.Hour))
	eventually(t, 30*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, "recovered"); err != nil {
			return err
		}
		c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionDegraded)
		if rp.Status.Restarts != 1 || rp.Status.LastTermination == nil || c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("restarts %d, last %+v, Degraded %+v", rp.Status.Restarts, rp.Status.LastTermination, c)
		}
		return nil
	})
}

func TestDescribeTermination(t *testing.T) {
	cases := map[string]corev1.ContainerStateTerminated{
		"killed by signal 9 (killed), exit code 137": {ExitCode: 137, Reason: "Error"},
		"killed by signal 6 (aborted), exit code 0":  {Signal: 6},
		"OOM-killed (exit code 137)":                 {ExitCode: 137, Reason: "OOMKilled"},
		"exited with code 1 (Error)":                 {ExitCode: 1, Reason: "Error"},
		"exited with code 0 (Completed)":             {ExitCode: 0, Reason: "Completed"},
	}
	for want, terminated := range cases {
		cs := &corev1.ContainerStatus{LastTerminationState: corev1.ContainerState{Terminated: terminated.DeepCopy()}}
		if got := describeTermination(lastTermination(cs, false)); !strings.Contains(got, want) {
			t.Errorf("%+v: %q does not contain %q", terminated, got, want)
		}
	}
}

// A pod being deleted stops its server: a rollout (kubectl scale, a mode
// change) is not a restart, while a crash before the deletion still is.
func TestTerminationOfADeletedPod(t *testing.T) {
	stopped := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(testNow)}
	crashed := &corev1.ContainerStateTerminated{ExitCode: 139, Reason: "Error", FinishedAt: metav1.NewTime(testNow.Add(-time.Minute))}
	cases := []struct {
		desc       string
		cs         corev1.ContainerStatus
		podDeleted bool
		want       *corev1.ContainerStateTerminated
	}{
		{"stopped by the pod's deletion", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: stopped}}, true, nil},
		{"stopped by the pod's deletion after a crash", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: stopped}, LastTerminationState: corev1.ContainerState{Terminated: crashed}}, true, crashed},
		{"ended in a pod that stays", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: stopped}, LastTerminationState: corev1.ContainerState{Terminated: crashed}}, false, stopped},
	}
	for _, c := range cases {
		got := lastTermination(&c.cs, c.podDeleted)
		if c.want == nil && got != nil || c.want != nil && (got == nil || got.ExitCode != c.want.ExitCode || !got.FinishedAt.Equal(&c.want.FinishedAt)) {
			t.Errorf("%s: lastTermination %+v, want %+v", c.desc, got, c.want)
		}
	}
}
