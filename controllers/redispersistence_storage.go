package controllers

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// The data volume is measured by the prepare container (PrepareScript): the
// filesystem from mountinfo, then uring-redis-fsprobe
// (images/redis-uring/fsprobe) appends the mount options, the device's write
// cache and the latency of 4 KiB write+fdatasync pairs over FsprobeMillis:
// appending (fsync*), overwriting a zero-written file as the server's
// preallocated log does (overwriteFsync*), and the rate of four such writers
// at once. All of it is key=value lines in the container's termination
// message.

// storageReport is the prepare container's termination message, parsed.
type storageReport struct {
	filesystem   string
	mountOptions string
	writeCache   string
	// samples, p50 and p99 are what the server pays: overwrite figures when
	// the probe reported them, else (an older image) the appending ones.
	samples  int32
	p50, p99 time.Duration
	// appendP50 and appendP99 are the appending figures (a log that grows).
	appendP50, appendP99 time.Duration
	// parallelPerSecond is the overwrite rate of four writers at once.
	parallelPerSecond int32
	probeError        string
	measuredAt        metav1.Time
}

// measured is true when the probe timed at least one write+fdatasync.
func (r storageReport) measured() bool { return r.samples > 0 }

// parseStorageReport reads the key=value lines of a termination message.
// Unknown keys are skipped (a newer image may report more) and malformed
// numbers leave their field unset, so a report is never rejected whole.
func parseStorageReport(message string) storageReport {
	var r storageReport
	micros := func(v string) time.Duration {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0
		}
		return time.Duration(n) * time.Microsecond
	}
	count := func(v string) int32 {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n > 0 {
			return int32(n)
		}
		return 0
	}
	var appendSamples, overwriteSamples int32
	var overwriteP50, overwriteP99 time.Duration
	for _, line := range strings.Split(message, "\n") {
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch key {
		case "filesystem":
			r.filesystem = value
		case "mountOptions":
			r.mountOptions = value
		case "writeCache":
			r.writeCache = value
		case "fsyncSamples":
			appendSamples = count(value)
		case "fsyncP50Micros":
			r.appendP50 = micros(value)
		case "fsyncP99Micros":
			r.appendP99 = micros(value)
		case "overwriteFsyncSamples":
			overwriteSamples = count(value)
		case "overwriteFsyncP50Micros":
			overwriteP50 = micros(value)
		case "overwriteFsyncP99Micros":
			overwriteP99 = micros(value)
		case "overwriteParallelFsyncsPerSecond":
			r.parallelPerSecond = count(value)
		case "probeError":
			r.probeError = value
		}
	}
	if r.appendP50 == 0 && r.appendP99 == 0 {
		appendSamples = 0
	}
	if overwriteSamples > 0 && (overwriteP50 > 0 || overwriteP99 > 0) {
		r.samples, r.p50, r.p99 = overwriteSamples, overwriteP50, overwriteP99
	} else {
		r.samples, r.p50, r.p99 = appendSamples, r.appendP50, r.appendP99
	}
	return r
}

// storageReportFromPod is the prepare container's report, or the zero
// report until it has ended.
func storageReportFromPod(pod *corev1.Pod) storageReport {
	if pod == nil {
		return storageReport{}
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name != specs.ContainerPrepare || s.State.Terminated == nil {
			continue
		}
		r := parseStorageReport(s.State.Terminated.Message)
		r.measuredAt = s.State.Terminated.FinishedAt
		return r
	}
	return storageReport{}
}

// hasMountOption is true when the comma-separated options list opt.
func hasMountOption(options, opt string) bool {
	for _, o := range strings.Split(options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// barrierDisabled is true when fdatasync on the volume may return before the
// data is on stable media: the mount turns write barriers off (ext4 lists
// barrier=0 as nobarrier), so the kernel sends no cache flush, over a device
// that does not say its cache is write-through.
func barrierDisabled(r storageReport) bool {
	off := hasMountOption(r.mountOptions, "nobarrier") || hasMountOption(r.mountOptions, "barrier=0")
	return off && r.writeCache != "write through"
}

// durableName names rp's mode in messages, if it is a durable one.
func durableName(rp *v1alpha1.RedisPersistence) string {
	if rp.Spec.Mode == v1alpha1.ModeAOF {
		return "mode aof with fsync: always"
	}
	return "mode uring with ack: durable"
}

// storageCondition decides StorageReady from the prepare container's report.
// data=writeback does not make a volume unready: fdatasync still commits the
// file's data and size before it returns, so acknowledged writes survive; what
// it weakens is the unsynced tail after a crash (stale blocks instead of
// zeros), which the message names.
func storageCondition(rp *v1alpha1.RedisPersistence, report storageReport) condition {
	fs := report.filesystem
	switch {
	case fs == "" || fs == "unknown":
		return condition{metav1.ConditionUnknown, ReasonFilesystemUnknown, "the data directory's filesystem has not been reported yet"}
	case needsExt4(rp) && fs != "ext4":
		return condition{metav1.ConditionFalse, ReasonFilesystemNotExt4,
			fmt.Sprintf("mode %s needs the data directory on ext4, found %s (a local-path or hostPath class puts it on the node's own filesystem); "+
				"use spec.storage.profile local-nvme or gp3, or a storageClassName whose volumes are formatted ext4 (for CSI drivers, the parameter csi.storage.k8s.io/fstype: ext4), in a new RedisPersistence",
				rp.Spec.Mode, fs)}
	case specs.DurableMode(specs.PersistenceMode(rp)) && barrierDisabled(report):
		return condition{metav1.ConditionFalse, ReasonWriteBarrierDisabled,
			fmt.Sprintf("%s promises that an acknowledged write survives a power cut, but the data volume is mounted without write barriers (%s) over a %s device cache: "+
				"fdatasync returns before the data is on stable media; mount the volume with barriers (drop nobarrier / barrier=0 from the StorageClass's or PersistentVolume's mountOptions) "+
				"or use another StorageClass, or choose a mode that does not promise durability",
				durableName(rp), report.mountOptions, cmp.Or(report.writeCache, "unknown"))}
	}
	message := "the data directory is on " + fs
	if report.mountOptions != "" {
		message += " (" + report.mountOptions + ")"
	}
	if fs == "ext4" && hasMountOption(report.mountOptions, "data=writeback") {
		message += "; data=writeback keeps acknowledged writes (fdatasync commits data and size) but a crash can leave stale blocks in the log's unsynced tail, " +
			"which the server refuses to load until valkey-check-aof --fix truncates it: prefer data=ordered"
	}
	return condition{metav1.ConditionTrue, ReasonFilesystemOK, message}
}

// storageStatus is status.storage for a measured report.
func storageStatus(r storageReport) *v1alpha1.StorageStatus {
	st := &v1alpha1.StorageStatus{
		Filesystem:   r.filesystem,
		MountOptions: r.mountOptions,
		WriteCache:   r.writeCache,
		Samples:      r.samples,
		ProbeError:   r.probeError,
		MeasuredAt:   r.measuredAt.DeepCopy(),
	}
	if r.measured() {
		st.FsyncP50 = &metav1.Duration{Duration: r.p50}
		st.FsyncP99 = &metav1.Duration{Duration: r.p99}
	}
	if r.appendP50 > 0 || r.appendP99 > 0 {
		st.AppendFsyncP50 = &metav1.Duration{Duration: r.appendP50}
		st.AppendFsyncP99 = &metav1.Duration{Duration: r.appendP99}
	}
	st.ParallelFsyncsPerSecond = r.parallelPerSecond
	return st
}

// Thresholds of the recommendation. Below fastFsync a durable mode costs each
// waiting client little; above slowFsync (the RedisAOFFsyncSlow alert's
// threshold) every durable write waits longer than most applications expect.
const (
	fastFsync = time.Millisecond
	slowFsync = 10 * time.Millisecond
)

// fastLossWindow is how far back uring ack: fast loses acknowledged writes
// in a power cut on a volume whose fdatasync takes l, from the server's
// pacing (images/redis-uring/src/aof_uring.c): a write acknowledged just
// after an fdatasync started waits for the next one, which starts 4 l later
// but no later than 10 ms - l, and never before the one in flight is done.
// So 5 l while l < 2 ms, 10 ms up to l = 5 ms, 2 l beyond (`make
// loss-window` measured a p99 of 7.7 ms with fdatasync p99 1-1.5 ms).
func fastLossWindow(l time.Duration) time.Duration {
	const window = 10 * time.Millisecond
	gap := min(4*l, window-l)
	return max(gap, l) + l
}

// recommendation is status.recommendation: the measured numbers, what they
// mean for the durable and the fast modes, and a suggestion. It is a pure
// function of the measurement, so it changes only when the volume is
// measured again.
func recommendation(r storageReport) string {
	switch {
	case r.probeError != "":
		return "no recommendation: the data volume could not be measured (" + r.probeError + ")"
	case !r.measured():
		return ""
	case barrierDisabled(r):
		return fmt.Sprintf("no mode is durable on this volume: it is mounted without write barriers (%s) over a %s cache, so fdatasync (p50 %s) does not reach stable media; "+
			"mount it with barriers or use another StorageClass before relying on aof fsync: always or uring ack: durable",
			r.mountOptions, cmp.Or(r.writeCache, "unknown"), formatLatency(r.p50))
	}
	perClient := int64(math.Round(float64(time.Second) / float64(r.p50)))
	measured := fmt.Sprintf("fdatasync p50 %s, p99 %s over %d samples", formatLatency(r.p50), formatLatency(r.p99), r.samples)
	if r.appendP50 > 0 && r.appendP50 != r.p50 {
		measured += fmt.Sprintf(" on the preallocated log (appending to a growing file: p50 %s, p99 %s)", formatLatency(r.appendP50), formatLatency(r.appendP99))
	}
	if r.parallelPerSecond > 0 {
		measured += fmt.Sprintf(", %d/s with four in flight", r.parallelPerSecond)
	}
	facts := fmt.Sprintf("%s: a durable mode (aof fsync: always, uring ack: durable) acknowledges at most about clients / %s "+
		"= %d writes/s per client waiting for its reply (%d/s with 50 clients if the CPU keeps up), "+
		"while uring ack: fast replies at CPU speed and a power cut loses up to about %s of acknowledged writes (its fsync pacing at p99 %s)",
		measured, formatLatency(r.p50), perClient, 50*perClient, formatLatency(fastLossWindow(r.p99)), formatLatency(r.p99))
	switch {
	case r.p50 <= fastFsync:
		return facts + "; suggested: mode uring with ack: durable, fsync is cheap on this volume"
	case r.p99 >= slowFsync:
		return facts + "; suggested: mode uring with ack: fast, unless every acknowledged write must survive a power cut: durable writes wait " + formatLatency(r.p99) + " at p99 here"
	}
	return facts + "; suggested: ack: durable if that rate covers your writes, else ack: fast"
}

// formatLatency rounds to the microsecond: "410µs", "1.89ms".
func formatLatency(d time.Duration) string { return d.Round(time.Microsecond).String() }

// storageEvent is the event a new measurement gets: a Warning when the volume
// cannot keep a durable mode's promise.
func storageEvent(r storageReport, storage condition) (eventType, reason, message string) {
	switch {
	case storage.reason == ReasonWriteBarrierDisabled:
		return corev1.EventTypeWarning, "MeasuredUnsafeStorage", storage.message
	case r.probeError != "":
		return corev1.EventTypeWarning, "FailedMeasureStorage", "the prepare container could not measure the data volume: " + r.probeError
	case !r.measured():
		return "", "", ""
	}
	return corev1.EventTypeNormal, "MeasuredStorage", fmt.Sprintf("%s (%s, write cache %s): fdatasync p50 %s, p99 %s over %d samples",
		r.filesystem, r.mountOptions, cmp.Or(r.writeCache, "unknown"), formatLatency(r.p50), formatLatency(r.p99), r.samples)
}

// storageProbeDue is how long until the volume is due for a re-probe (<= 0:
// now), and false when rp does not ask for re-probes or was never measured.
func storageProbeDue(rp *v1alpha1.RedisPersistence, now time.Time) (time.Duration, bool) {
	st := rp.Status.Storage
	if rp.Spec.Storage == nil || rp.Spec.Storage.ProbeInterval == nil || st == nil || st.MeasuredAt == nil {
		return 0, false
	}
	return st.MeasuredAt.Add(rp.Spec.Storage.ProbeInterval.Duration).Sub(now), true
}

// reprobeStorage starts a storage probe Job when spec.storage.probeInterval
// has passed since the last measurement and the server runs, and returns
// when to look again (0: an event will say). The probe pod's events bring
// its result.
func (r *RedisPersistenceReconciler) reprobeStorage(ctx context.Context, rp *v1alpha1.RedisPersistence, pod *corev1.Pod) (time.Duration, error) {
	left, ok := storageProbeDue(rp, r.Clock.Now())
	switch {
	case !ok:
		return 0, nil
	case left > 0:
		return left, nil
	case !podReady(pod) || pod.Spec.NodeName == "":
		return 0, nil
	}
	job := &batchv1.Job{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: specs.StorageProbeJobName(rp)}, job); err == nil {
		// Running, or finished without a newer measurement: its TTL frees the name for the next try.
		return resyncInterval, nil
	} else if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("reading Job %s: %w", specs.StorageProbeJobName(rp), err)
	}
	image, _ := runningImage(pod, specs.ContainerRedis)
	job = specs.StorageProbeJob(rp, r.Options, cmp.Or(image, cmp.Or(rp.Spec.Image, r.Options.RedisImage)), pod.Spec.NodeName)
	if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedCreate", "creating the storage probe Job %s: %v", job.Name, err)
		return 0, fmt.Errorf("creating Job %s: %w", job.Name, err)
	}
	return 0, nil
}

// storageReportFromProbePods is the newest report of the probe Job's pods.
func storageReportFromProbePods(pods []corev1.Pod) storageReport {
	var newest storageReport
	for _, pod := range pods {
		for _, s := range pod.Status.ContainerStatuses {
			if t := s.State.Terminated; s.Name == specs.ContainerStorageProbe && t != nil && t.FinishedAt.After(newest.measuredAt.Time) {
				newest = parseStorageReport(t.Message)
				newest.measuredAt = t.FinishedAt
			}
		}
	}
	return newest
}

// storageReportFromStatus is the measurement status.storage holds.
func storageReportFromStatus(st *v1alpha1.StorageStatus) storageReport {
	if st == nil || st.MeasuredAt == nil {
		return storageReport{}
	}
	r := storageReport{filesystem: st.Filesystem, mountOptions: st.MountOptions, writeCache: st.WriteCache,
		samples: st.Samples, parallelPerSecond: st.ParallelFsyncsPerSecond, probeError: st.ProbeError, measuredAt: *st.MeasuredAt}
	if st.FsyncP50 != nil && st.FsyncP99 != nil {
		r.p50, r.p99 = st.FsyncP50.Duration, st.FsyncP99.Duration
	}
	if st.AppendFsyncP50 != nil && st.AppendFsyncP99 != nil {
		r.appendP50, r.appendP99 = st.AppendFsyncP50.Duration, st.AppendFsyncP99.Duration
	}
	return r
}

// newestStorageReport picks what describes the volume now. The pod's own
// report comes first: without one (no pod, or not started) nothing is
// known. A later re-probe, in a Job's pod or already in status, replaces it.
func newestStorageReport(pod, probe, status storageReport) storageReport {
	if pod.filesystem == "" {
		return pod
	}
	newest := pod
	for _, r := range []storageReport{probe, status} {
		if r.filesystem != "" && r.measuredAt.After(newest.measuredAt.Time) {
			newest = r
		}
	}
	return newest
}
