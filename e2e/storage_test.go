//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// probeBound is how long the prepare container may take: the probe's 2 s,
// the write+fdatasync under way when they pass, and the container's own start.
const probeBound = 5 * time.Second

// TestStorageMeasuredAndUnsafeVolumeFlagged: a durable server on a loop ext4
// volume gets its fsync latency and mount facts in status within a minute,
// in a bounded probe; remounted nobarrier and restarted, the same volume is
// flagged WriteBarrierDisabled with a Warning event.
func TestStorageMeasuredAndUnsafeVolumeFlagged(t *testing.T) {
	const name = "volume"
	create(t, name, specFor(v1alpha1.ModeUring))
	rp := waitFor(t, name, 4*time.Minute, hasCondition(v1alpha1.ConditionStorageReady, metav1.ConditionTrue, "FilesystemVerified"))
	pod := getPod(t, name+"-0")
	checkProbe(t, pod, rp)
	st := rp.Status.Storage
	if strings.Contains(st.MountOptions, "nobarrier") || !strings.Contains(rp.Status.Recommendation, "clients / ") {
		t.Errorf("mount options %q, recommendation %q", st.MountOptions, rp.Status.Recommendation)
	}
	t.Logf("measured: %s (%s, write cache %s): fsync p50 %s p99 %s over %d samples; %s",
		st.Filesystem, st.MountOptions, st.WriteCache, st.FsyncP50.Duration, st.FsyncP99.Duration, st.Samples, rp.Status.Recommendation)
	if out := run(t, kubectl[0], append(kubectl[1:], "-n", namespace, "get", "rp", name, "-o", "wide")...); !strings.Contains(out, "FSYNCP99") ||
		!strings.Contains(out, st.FsyncP99.Duration.String()) {
		t.Errorf("kubectl get rp -o wide does not show fsync p99 %s:\n%s", st.FsyncP99.Duration, out)
	}

	// The same volume without write barriers: the next pod measures it.
	path := localVolumePath(t, "data-"+name+"-0")
	remount(t, pod.Spec.NodeName, path, "nobarrier")
	t.Cleanup(func() { remount(t, pod.Spec.NodeName, path, "barrier") })
	if err := k8s.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	rp = waitFor(t, name, 4*time.Minute, hasCondition(v1alpha1.ConditionStorageReady, metav1.ConditionFalse, "WriteBarrierDisabled"))
	if !strings.Contains(rp.Status.Storage.MountOptions, "nobarrier") || !strings.Contains(rp.Status.Recommendation, "no mode is durable") {
		t.Errorf("mount options %q, recommendation %q", rp.Status.Storage.MountOptions, rp.Status.Recommendation)
	}
	checkProbe(t, getPod(t, name+"-0"), rp)
	t.Logf("flagged: %s", meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionStorageReady).Message)
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || e.InvolvedObject.Name == name && e.Reason == "MeasuredUnsafeStorage" && e.Type == corev1.EventTypeWarning
	}
	if !found {
		t.Error("no MeasuredUnsafeStorage warning event on the RedisPersistence")
	}
}

// checkProbe asserts the measurement in rp's status comes from pod's prepare
// container, which ran within probeBound, and reached status within a minute.
func checkProbe(t *testing.T, pod *corev1.Pod, rp *v1alpha1.RedisPersistence) {
	t.Helper()
	var prepare *corev1.ContainerStateTerminated
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name == "prepare" {
			prepare = s.State.Terminated
		}
	}
	st := rp.Status.Storage
	switch {
	case prepare == nil:
		t.Fatalf("pod %s has no finished prepare container", pod.Name)
	case st == nil || st.FsyncP50 == nil || st.FsyncP99 == nil || st.Samples == 0 || st.MeasuredAt == nil || st.Filesystem != "ext4" || st.MountOptions == "":
		t.Fatalf("status.storage %+v", st)
	case !st.MeasuredAt.Equal(&prepare.FinishedAt):
		t.Errorf("status.storage.measuredAt %s is not the prepare container's end %s", st.MeasuredAt, prepare.FinishedAt)
	case st.FsyncP50.Duration > st.FsyncP99.Duration:
		t.Errorf("fsync p50 %s above p99 %s", st.FsyncP50.Duration, st.FsyncP99.Duration)
	}
	if took := prepare.FinishedAt.Sub(prepare.StartedAt.Time); took > probeBound {
		t.Errorf("the prepare container ran %s, more than the probe's bound %s", took, probeBound)
	}
	if after := prepare.FinishedAt.Sub(pod.CreationTimestamp.Time); after > time.Minute {
		t.Errorf("the volume was measured %s after the pod was created", after)
	}
}

// localVolumePath is the node path of the local PersistentVolume bound to claim.
func localVolumePath(t *testing.T, claim string) string {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: claim}, pvc); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		t.Fatal(err)
	}
	if pv.Spec.Local == nil {
		t.Skipf("volume %s is not a local volume (a filesystem of its own on the node) that the test could remount without barriers", pv.Name)
	}
	return pv.Spec.Local.Path
}

// remount changes the mount options of the filesystem at path on node, from
// a privileged pod: a remount through a bind mount reconfigures the
// filesystem itself.
func remount(t *testing.T, node, path, options string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "remount-" + options, Namespace: nodeNamespace},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            "remount",
				Image:           operatorRedisImage(t, os.Getenv("E2E_NAMESPACE"), os.Getenv("E2E_RELEASE")),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"mount", "-o", "remount," + options, "/volume"},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false)},
				VolumeMounts:    []corev1.VolumeMount{{Name: "volume", MountPath: "/volume"}},
			}},
			Volumes: []corev1.Volume{{Name: "volume", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}},
		},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)) }()
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil || pod.Status.Phase != corev1.PodSucceeded {
		logs, _ := execOutput(kubectl[0], append(kubectl[1:], "-n", nodeNamespace, "logs", pod.Name)...)
		t.Fatalf("remounting %s with %s: phase %s (%v)\n%s", path, options, pod.Status.Phase, err, logs)
	}
}
