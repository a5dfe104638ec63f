package controllers

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// The data volume is measured by the prepare container (prepareScript): the
// filesystem from mountinfo, then uring-redis-fsprobe
// (images/redis-uring/fsprobe) appends the mount options, the device's write
// cache and the latency of 4 KiB append+fdatasync pairs over fsprobeMillis.
// All of it is key=value lines in the container's termination message.

// fsprobeMillis bounds the probe (uring-redis-fsprobe -t): the server starts
// this many milliseconds later, plus the write+fdatasync under way then.
const fsprobeMillis = "2000"

// storageReport is the prepare container's termination message, parsed.
type storageReport struct {
	filesystem   string
	mountOptions string
	writeCache   string
	samples      int32
	p50, p99     time.Duration
	probeError   string
	measuredAt   metav1.Time
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
			if n, err := strconv.ParseInt(value, 10, 32); err == nil && n > 0 {
				r.samples = int32(n)
			}
		case "fsyncP50Micros":
			r.p50 = micros(value)
		case "fsyncP99Micros":
			r.p99 = micros(value)
		case "probeError":
			r.probeError = value
		}
	}
	if r.p50 == 0 && r.p99 == 0 {
		r.samples = 0
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
		if s.Name != containerPrepare || s.State.Terminated == nil {
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
	case durableMode(persistenceMode(rp)) && barrierDisabled(report):
		return condition{metav1.ConditionFalse, ReasonWriteBarrierDisabled,
			fmt.Sprintf("%s promises that an acknowledged write survives a power cut, but the data volume is mounted without write barriers (%s) over a %s device cache: "+
				"fdatasync returns before the data is on stable media; mount the volume with barriers (drop nobarrier / barrier=0 from the StorageClass's or PersistentVolume's mountOptions) "+
				"or use another StorageClass, or choose a mode that does not promise durability",
				durableName(rp), report.mountOptions, orDefault(report.writeCache, "unknown"))}
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
	return st
}

// Thresholds of the recommendation. Below fastFsync a durable mode costs each
// waiting client little; above slowFsync (the RedisUringFsyncSlow alert's
// threshold) every durable write waits longer than most applications expect.
const (
	fastFsync = time.Millisecond
	slowFsync = 10 * time.Millisecond
	// fastLossFsyncs is how many fsync latencies of acknowledged writes uring
	// ack: fast may have in flight when the power goes.
	fastLossFsyncs = 5
)

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
			r.mountOptions, orDefault(r.writeCache, "unknown"), formatLatency(r.p50))
	}
	perClient := int64(math.Round(float64(time.Second) / float64(r.p50)))
	facts := fmt.Sprintf("fdatasync p50 %s, p99 %s over %d samples: a durable mode (aof fsync: always, uring ack: durable) acknowledges at most about clients / %s "+
		"= %d writes/s per client waiting for its reply (%d/s with 50 clients; ext4 commits one journal transaction at a time, so expect less), "+
		"while uring ack: fast replies at CPU speed and a power cut loses about %d x p99 = %s of acknowledged writes",
		formatLatency(r.p50), formatLatency(r.p99), r.samples, formatLatency(r.p50), perClient, 50*perClient, fastLossFsyncs, formatLatency(fastLossFsyncs*r.p99))
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
		r.filesystem, r.mountOptions, orDefault(r.writeCache, "unknown"), formatLatency(r.p50), formatLatency(r.p99), r.samples)
}
