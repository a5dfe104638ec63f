package controllers

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// A report as the prepare container writes it on a loop ext4 volume mounted
// nobarrier (the e2e suite's unsafe class).
const unsafeReport = `filesystem=ext4
mountOptions=rw,relatime,nobarrier
writeCache=write back
fsyncSamples=1210
fsyncP50Micros=410
fsyncP99Micros=1890
fsyncMaxMicros=2301
probeMillis=2000
`

// A report of an image that measures both layouts, on a loop ext4 volume.
const layoutReport = `filesystem=ext4
mountOptions=rw,relatime
writeCache=write back
fsyncSamples=980
fsyncP50Micros=510
fsyncP99Micros=1890
fsyncMaxMicros=2301
overwriteFsyncSamples=2710
overwriteFsyncP50Micros=160
overwriteFsyncP99Micros=540
overwriteFsyncMaxMicros=1210
overwriteParallelFsyncsPerSecond=8610
probeMillis=2000
`

func TestParseStorageReport(t *testing.T) {
	cases := []struct {
		desc, message string
		want          storageReport
	}{
		{"an image without the overwrite figures: the server pays the appending ones", unsafeReport,
			storageReport{filesystem: "ext4", mountOptions: "rw,relatime,nobarrier", writeCache: "write back",
				samples: 1210, p50: 410 * time.Microsecond, p99: 1890 * time.Microsecond,
				appendP50: 410 * time.Microsecond, appendP99: 1890 * time.Microsecond}},
		{"full report: the server pays the overwrite figures", layoutReport,
			storageReport{filesystem: "ext4", mountOptions: "rw,relatime", writeCache: "write back",
				samples: 2710, p50: 160 * time.Microsecond, p99: 540 * time.Microsecond,
				appendP50: 510 * time.Microsecond, appendP99: 1890 * time.Microsecond, parallelPerSecond: 8610}},
		{"an image without the probe reports the filesystem only", "filesystem=xfs\n", storageReport{filesystem: "xfs"}},
		{"a failed probe", "filesystem=ext4\nmountOptions=ro,relatime\nwriteCache=unknown\nprobeError=open: Read-only file system\n",
			storageReport{filesystem: "ext4", mountOptions: "ro,relatime", writeCache: "unknown", probeError: "open: Read-only file system"}},
		{"unknown keys and lines without = are skipped", "filesystem=ext4\nnewKey=1\ngarbage\nwriteCache=write through\n",
			storageReport{filesystem: "ext4", writeCache: "write through"}},
		{"malformed numbers leave the latency unmeasured", "filesystem=ext4\nfsyncSamples=12\nfsyncP50Micros=-3\nfsyncP99Micros=x\n",
			storageReport{filesystem: "ext4"}},
		{"values keep inner spaces and lose the line end", "writeCache=write back\r\n", storageReport{writeCache: "write back"}},
	}
	for _, c := range cases {
		if got := parseStorageReport(c.message); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.desc, got, c.want)
		}
	}
}

func TestStorageCondition(t *testing.T) {
	rp := func(mode v1alpha1.PersistenceMode, mutate func(*v1alpha1.RedisPersistenceSpec)) *v1alpha1.RedisPersistence {
		r := &v1alpha1.RedisPersistence{Spec: v1alpha1.RedisPersistenceSpec{Mode: mode}}
		if mutate != nil {
			mutate(&r.Spec)
		}
		return r
	}
	always := rp(v1alpha1.ModeAOF, func(s *v1alpha1.RedisPersistenceSpec) { s.AOF = &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways} })
	everysec := rp(v1alpha1.ModeAOF, func(s *v1alpha1.RedisPersistenceSpec) { s.AOF = &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec} })
	durable := rp(v1alpha1.ModeUring, nil)
	fast := rp(v1alpha1.ModeUring, func(s *v1alpha1.RedisPersistenceSpec) { s.Uring = &v1alpha1.UringSpec{Ack: v1alpha1.AckFast} })
	ext4 := func(options, cache string) storageReport {
		return storageReport{filesystem: "ext4", mountOptions: options, writeCache: cache}
	}
	cases := []struct {
		desc        string
		rp          *v1alpha1.RedisPersistence
		report      storageReport
		status      metav1.ConditionStatus
		reason      string
		wantMessage string
	}{
		{"not reported yet", durable, storageReport{}, metav1.ConditionUnknown, ReasonFilesystemUnknown, "not been reported"},
		{"ext4 with barriers", always, ext4("rw,relatime", "write back"), metav1.ConditionTrue, ReasonFilesystemOK, "ext4 (rw,relatime)"},
		{"uring durable without barriers", durable, ext4("rw,relatime,nobarrier", "write back"), metav1.ConditionFalse, ReasonWriteBarrierDisabled, "mode uring with ack: durable"},
		{"aof always with barrier=0", always, ext4("rw,barrier=0", "write back"), metav1.ConditionFalse, ReasonWriteBarrierDisabled, "drop nobarrier / barrier=0"},
		{"an unreadable cache counts as volatile", always, ext4("rw,nobarrier", "unknown"), metav1.ConditionFalse, ReasonWriteBarrierDisabled, "unknown device cache"},
		{"a write-through device needs no flushes", durable, ext4("rw,nobarrier", "write through"), metav1.ConditionTrue, ReasonFilesystemOK, "nobarrier"},
		{"everysec promises no durability", everysec, ext4("rw,nobarrier", "write back"), metav1.ConditionTrue, ReasonFilesystemOK, "nobarrier"},
		{"uring fast promises no durability", fast, ext4("rw,nobarrier", "write back"), metav1.ConditionTrue, ReasonFilesystemOK, "nobarrier"},
		{"an option merely containing nobarrier", durable, ext4("rw,xnobarrier", "write back"), metav1.ConditionTrue, ReasonFilesystemOK, ""},
		{"data=writeback is named, not refused", durable, ext4("rw,data=writeback", "write back"), metav1.ConditionTrue, ReasonFilesystemOK, "prefer data=ordered"},
		{"xfs under an AOF mode", durable, storageReport{filesystem: "xfs", mountOptions: "rw,nobarrier"}, metav1.ConditionFalse, ReasonFilesystemNotExt4, "found xfs"},
		{"btrfs says what to do", everysec, storageReport{filesystem: "btrfs"}, metav1.ConditionFalse, ReasonFilesystemNotExt4, "csi.storage.k8s.io/fstype: ext4"},
		{"rdb on tmpfs", rp(v1alpha1.ModeRDB, nil), storageReport{filesystem: "tmpfs"}, metav1.ConditionTrue, ReasonFilesystemOK, "tmpfs"},
	}
	for _, c := range cases {
		got := storageCondition(c.rp, c.report)
		if got.status != c.status || got.reason != c.reason || !strings.Contains(got.message, c.wantMessage) {
			t.Errorf("%s: got %s/%s %q, want %s/%s containing %q", c.desc, got.status, got.reason, got.message, c.status, c.reason, c.wantMessage)
		}
	}
}

// The fast mode's loss window follows the engine's pacing: 5 fsyncs on a fast
// volume, 10 ms in the middle, two fsyncs on a slow one.
func TestFastLossWindow(t *testing.T) {
	for _, c := range []struct{ l, want time.Duration }{
		{250 * time.Microsecond, 1250 * time.Microsecond},
		{time.Millisecond, 5 * time.Millisecond},
		{2 * time.Millisecond, 10 * time.Millisecond},
		{4 * time.Millisecond, 10 * time.Millisecond},
		{5 * time.Millisecond, 10 * time.Millisecond},
		{8 * time.Millisecond, 16 * time.Millisecond},
		{40 * time.Millisecond, 80 * time.Millisecond},
	} {
		if got := fastLossWindow(c.l); got != c.want {
			t.Errorf("fsync %s: loss window %s, want %s", c.l, got, c.want)
		}
	}
}

func TestRecommendation(t *testing.T) {
	measured := func(p50, p99 time.Duration) storageReport {
		return storageReport{filesystem: "ext4", mountOptions: "rw,relatime", writeCache: "write back", samples: 500, p50: p50, p99: p99}
	}
	cases := []struct {
		desc   string
		report storageReport
		want   []string
	}{
		{"not measured", storageReport{filesystem: "ext4"}, nil},
		{"probe failed", storageReport{filesystem: "ext4", probeError: "write: No space left on device"}, []string{"no recommendation", "No space left"}},
		{"local NVMe", measured(100*time.Microsecond, 250*time.Microsecond),
			[]string{"p50 100µs, p99 250µs over 500 samples", "clients / 100µs = 10000 writes/s per client", "500000/s with 50 clients",
				"loses up to about 1.25ms of acknowledged writes", "suggested: mode uring with ack: durable"}},
		{"network volume", measured(1500*time.Microsecond, 4*time.Millisecond),
			[]string{"= 667 writes/s per client", "loses up to about 10ms", "suggested: ack: durable if that rate covers your writes, else ack: fast"}},
		{"throttled volume", measured(8*time.Millisecond, 40*time.Millisecond),
			[]string{"= 125 writes/s per client", "loses up to about 80ms", "suggested: mode uring with ack: fast", "durable writes wait 40ms at p99"}},
		{"both layouts measured: the preallocated log's figure decides", parseStorageReport(layoutReport),
			[]string{"p50 160µs, p99 540µs over 2710 samples on the preallocated log (appending to a growing file: p50 510µs, p99 1.89ms)",
				"8610/s with four in flight", "clients / 160µs = 6250 writes/s per client", "suggested: mode uring with ack: durable"}},
		{"no barriers", storageReport{filesystem: "ext4", mountOptions: "rw,nobarrier", writeCache: "write back", samples: 9, p50: 30 * time.Microsecond, p99: 90 * time.Microsecond},
			[]string{"no mode is durable on this volume", "rw,nobarrier", "write back", "p50 30µs"}},
	}
	for _, c := range cases {
		got := recommendation(c.report)
		if c.want == nil && got != "" {
			t.Errorf("%s: %q, want none", c.desc, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q does not contain %q", c.desc, got, w)
			}
		}
	}
}

// probeFigure is a number the probe reported, -1 if it did not.
func probeFigure(report, key string) int64 {
	for _, line := range strings.Split(report, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k == key {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// fsprobeBin is the storage probe of the project's server build.
func fsprobeBin() string {
	return filepath.Join(filepath.Dir(testenv.ServerBin()), "uring-redis-fsprobe")
}

// TestFsprobe runs the real probe on a real directory and reads its output
// with the operator's parser: the time bound holds, the numbers are
// consistent, and failures are reported, not fatal.
func TestFsprobe(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command(fsprobeBin(), "-t", "300", dir).Output()
	if err != nil {
		t.Fatalf("%s: %v (build it with make -C images/redis-uring fsprobe)", fsprobeBin(), err)
	}
	if len(out) > 1024 {
		t.Errorf("report of %d bytes; the termination message holds 4096 with the filesystem line", len(out))
	}
	r := parseStorageReport(string(out))
	if !r.measured() || r.p50 > r.p99 || r.probeError != "" || r.mountOptions == "" || r.writeCache == "" {
		t.Fatalf("report %+v from %q", r, out)
	}
	// The bound, as the probe timed itself (the process's start and the
	// machine's load are not the probe's): the budget, plus in each phase
	// the pair under way when it passed (the slowest pair bounds it) and the
	// untimed preparation of the overwrite file. A probe that ignored -t
	// would run its default 2000 ms.
	took, slowest := probeFigure(string(out), "probeMillis"), max(probeFigure(string(out), "fsyncMaxMicros"), probeFigure(string(out), "overwriteFsyncMaxMicros"))/1000
	if took < 299 || took > 300+3*slowest+500 {
		t.Errorf("a 300 ms probe measured for %d ms (slowest pair %d ms): %q", took, slowest, out)
	}

	out, err = exec.Command(fsprobeBin(), "-t", "100", filepath.Join(dir, "missing")).Output()
	if r := parseStorageReport(string(out)); err != nil || !strings.Contains(r.probeError, "No such file or directory") {
		t.Errorf("a missing directory: err %v, report %q", err, out)
	}
	if err := exec.Command(fsprobeBin(), "-t", "0", dir).Run(); err == nil {
		t.Error("-t 0 was accepted")
	}
}

// The status path: a durable mode on a nobarrier volume is flagged (condition,
// Ready, recommendation, a Warning event, the metric); a mode that promises
// no durability on the same volume is not; a sound volume gets its numbers
// and a Normal event.
func TestStorageMeasured(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "unsafe", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	createRP(t, ns, "lossy", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}})
	createRP(t, ns, "sound", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}})
	for _, name := range []string{"unsafe", "lossy", "sound"} {
		waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	}
	actAsKubeletReporting(t, ns, "unsafe-0", unsafeReport, metav1.Now())
	actAsKubeletReporting(t, ns, "lossy-0", unsafeReport, metav1.Now())
	actAsKubeletReporting(t, ns, "sound-0", layoutReport, metav1.Now())

	got := waitCondition(t, ns, "unsafe", v1alpha1.ConditionStorageReady, metav1.ConditionFalse, ReasonWriteBarrierDisabled)
	st := got.Status.Storage
	if st == nil || st.Filesystem != "ext4" || st.MountOptions != "rw,relatime,nobarrier" || st.WriteCache != "write back" || st.Samples != 1210 ||
		st.FsyncP50 == nil || st.FsyncP50.Duration != 410*time.Microsecond || st.FsyncP99 == nil || st.FsyncP99.Duration != 1890*time.Microsecond ||
		st.MeasuredAt == nil {
		t.Fatalf("status.storage %+v", st)
	}
	if !strings.Contains(got.Status.Recommendation, "no mode is durable on this volume") {
		t.Errorf("recommendation %q", got.Status.Recommendation)
	}
	waitCondition(t, ns, "unsafe", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonStorageNotReady)
	labels := prometheus.Labels{"namespace": ns, "redispersistence": "unsafe"}
	if v := testutil.ToFloat64(storageBarrierDisabled.With(labels)); v != 1 {
		t.Errorf("uringredis_storage_write_barrier_disabled %v, want 1", v)
	}
	if v := testutil.ToFloat64(storageFsync.With(withQuantile(prometheus.Labels{"namespace": ns, "redispersistence": "unsafe", "pod": "unsafe-0"}, 0.99))); v != 0.00189 {
		t.Errorf("uringredis_storage_fsync_seconds{quantile=0.99} %v, want 0.00189", v)
	}

	got = waitCondition(t, ns, "lossy", v1alpha1.ConditionStorageReady, metav1.ConditionTrue, ReasonFilesystemOK)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStorageReady); !strings.Contains(c.Message, "nobarrier") {
		t.Errorf("StorageReady message %q does not name the mount options", c.Message)
	}

	got = waitCondition(t, ns, "sound", v1alpha1.ConditionStorageReady, metav1.ConditionTrue, ReasonFilesystemOK)
	if !strings.Contains(got.Status.Recommendation, "suggested: mode uring with ack: durable") {
		t.Errorf("recommendation %q", got.Status.Recommendation)
	}
	// The preallocated log's figures are what the server pays; the appending
	// ones and the parallel rate are kept beside them.
	if st := got.Status.Storage; st == nil || st.Samples != 2710 || st.FsyncP50 == nil || st.FsyncP50.Duration != 160*time.Microsecond ||
		st.AppendFsyncP50 == nil || st.AppendFsyncP50.Duration != 510*time.Microsecond ||
		st.AppendFsyncP99 == nil || st.AppendFsyncP99.Duration != 1890*time.Microsecond || st.ParallelFsyncsPerSecond != 8610 {
		t.Errorf("status.storage of a volume measured on both layouts %+v", st)
	}
	if v := testutil.ToFloat64(storageBarrierDisabled.With(prometheus.Labels{"namespace": ns, "redispersistence": "sound"})); v != 0 {
		t.Errorf("uringredis_storage_write_barrier_disabled of a sound volume %v, want 0", v)
	}

	eventually(t, 30*time.Second, func() error {
		unsafe := eventsFor(t, ns, "unsafe", "MeasuredUnsafeStorage")
		sound := eventsFor(t, ns, "sound", "MeasuredStorage")
		if len(unsafe) != 1 || unsafe[0].Type != corev1.EventTypeWarning || len(sound) != 1 || sound[0].Type != corev1.EventTypeNormal {
			return fmt.Errorf("%d MeasuredUnsafeStorage events on unsafe, %d MeasuredStorage on sound; want one each", len(unsafe), len(sound))
		}
		if !strings.Contains(sound[0].Message, "fdatasync p50 160µs, p99 540µs over 2710 samples") {
			return fmt.Errorf("MeasuredStorage message %q", sound[0].Message)
		}
		return nil
	})
	if n := len(eventsFor(t, ns, "lossy", "MeasuredUnsafeStorage")); n != 0 {
		t.Errorf("%d MeasuredUnsafeStorage events for a mode without a durability promise", n)
	}
}

func TestStorageProbeDue(t *testing.T) {
	measured := metav1.NewTime(testNow.Add(-50 * time.Minute))
	rp := func(interval *metav1.Duration, st *v1alpha1.StorageStatus) *v1alpha1.RedisPersistence {
		return &v1alpha1.RedisPersistence{
			Spec:   v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Storage: &v1alpha1.StorageSpec{ProbeInterval: interval}},
			Status: v1alpha1.RedisPersistenceStatus{Storage: st},
		}
	}
	hour := &metav1.Duration{Duration: time.Hour}
	cases := []struct {
		desc   string
		rp     *v1alpha1.RedisPersistence
		left   time.Duration
		wantOK bool
	}{
		{"off", rp(nil, &v1alpha1.StorageStatus{MeasuredAt: &measured}), 0, false},
		{"never measured: the pod's start measures first", rp(hour, nil), 0, false},
		{"measured 50 minutes ago, every hour", rp(hour, &v1alpha1.StorageStatus{MeasuredAt: &measured}), 10 * time.Minute, true},
		{"overdue", rp(&metav1.Duration{Duration: 10 * time.Minute}, &v1alpha1.StorageStatus{MeasuredAt: &measured}), -40 * time.Minute, true},
	}
	for _, c := range cases {
		if left, ok := storageProbeDue(c.rp, testNow); left != c.left || ok != c.wantOK {
			t.Errorf("%s: %s %v, want %s %v", c.desc, left, ok, c.left, c.wantOK)
		}
	}
}

func TestNewestStorageReport(t *testing.T) {
	at := func(minutes int, fs string) storageReport {
		return storageReport{filesystem: fs, measuredAt: metav1.NewTime(testNow.Add(time.Duration(minutes) * time.Minute))}
	}
	cases := []struct {
		desc               string
		pod, probe, status storageReport
		want               storageReport
	}{
		{"no pod report: nothing is known", storageReport{}, at(5, "ext4"), at(4, "ext4"), storageReport{}},
		{"the pod's start only", at(0, "ext4"), storageReport{}, at(0, "ext4"), at(0, "ext4")},
		{"a later re-probe", at(0, "ext4"), at(30, "ext4"), at(0, "ext4"), at(30, "ext4")},
		{"a re-probe already in status, its Job gone", at(0, "ext4"), storageReport{}, at(30, "ext4"), at(30, "ext4")},
		{"a new pod measures after the last re-probe", at(60, "xfs"), at(30, "ext4"), at(30, "ext4"), at(60, "xfs")},
	}
	for _, c := range cases {
		if got := newestStorageReport(c.pod, c.probe, c.status); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.desc, got, c.want)
		}
	}
}

// The periodic re-probe: once spec.storage.probeInterval has passed since
// the pod's measurement, a Job on the server's node measures its claim, and
// its result replaces the pod's in status, condition and event.
func TestStorageReprobe(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "probed", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring,
		Storage: &v1alpha1.StorageSpec{StorageClassName: storageClass, ProbeInterval: &metav1.Duration{Duration: 10 * time.Minute}}})
	waitCondition(t, ns, "probed", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	sound := strings.Replace(unsafeReport, ",nobarrier", "", 1)
	// The pod measured its volume 11 minutes before the operator's clock.
	actAsKubeletReporting(t, ns, "probed-0", sound, metav1.NewTime(testNow.Add(-11*time.Minute)))

	job := waitJob(t, ns, "probed-storage-probe")
	server := &corev1.Pod{}
	if err := get(t, server, ns, "probed-0"); err != nil {
		t.Fatal(err)
	}
	spec := job.Spec.Template.Spec
	if spec.NodeName != server.Spec.NodeName || spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-probed-0" ||
		spec.Containers[0].Image != server.Spec.Containers[0].Image {
		t.Fatalf("probe Job on node %q, claim %v, image %q; want the server's node %q, claim data-probed-0 and image %q",
			spec.NodeName, spec.Volumes[0].PersistentVolumeClaim, spec.Containers[0].Image, server.Spec.NodeName, server.Spec.Containers[0].Image)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.Name != "probed" {
		t.Errorf("the probe Job is not controlled by the RedisPersistence: %v", ref)
	}

	// The volume lost its write barriers since the pod started.
	probedAt := metav1.NewTime(testNow.Add(-time.Minute))
	eventually(t, 30*time.Second, func() error {
		var pods corev1.PodList
		if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{specs.LabelJobName: job.Name}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("Job %s has %d pods, want 1", job.Name, len(pods.Items))
		}
		pod := pods.Items[0]
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: specs.ContainerStorageProbe, Image: pod.Spec.Containers[0].Image, ImageID: "redis-uring@sha256:0",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: unsafeReport, StartedAt: probedAt, FinishedAt: probedAt}},
		}}
		return k8s.Status().Update(context.Background(), &pod)
	})
	got := waitCondition(t, ns, "probed", v1alpha1.ConditionStorageReady, metav1.ConditionFalse, ReasonWriteBarrierDisabled)
	if st := got.Status.Storage; st == nil || st.MeasuredAt == nil || !st.MeasuredAt.Equal(&probedAt) || st.MountOptions != "rw,relatime,nobarrier" {
		t.Fatalf("status.storage %+v, want the probe Job's measurement of %s", st, probedAt)
	}
	eventually(t, 30*time.Second, func() error {
		if n := len(eventsFor(t, ns, "probed", "MeasuredUnsafeStorage")); n != 1 {
			return fmt.Errorf("%d MeasuredUnsafeStorage events, want 1", n)
		}
		return nil
	})
	// The re-probe's result holds: a reconcile does not fall back to the pod's older measurement.
	if _, err := reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "probed"}}); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "probed", v1alpha1.ConditionStorageReady, metav1.ConditionFalse, ReasonWriteBarrierDisabled)
}
