package bench

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Sample is what the runner reads from the server's INFO before and after
// each valkey-benchmark test.
type Sample struct {
	// CPUSeconds is used_cpu_user + used_cpu_sys: getrusage of the whole
	// process, so io_uring's io-wq workers (threads of the server) count.
	CPUSeconds float64
	RSSBytes   int64
	Engine     string // aof_engine: posix or uring; "" without an append-only file
	// FsyncBuckets are the cumulative latency buckets of every fdatasync of
	// the AOF, whichever engine ran it (aof_fsync_usec_bucket_le_<usec>),
	// ordered by bound; the last is +Inf.
	FsyncBuckets []Bucket
	// Role is INFO replication's role: master or slave.
	Role string
	// Replicas is how many replicas stream from the server (state=online).
	Replicas int
	// AckReplicas is aof-uring-ack-replicas: how many replicas' fsyncs a
	// durable reply waits for (0 without the uring engine).
	AckReplicas int
	// Commands is total_commands_processed.
	Commands int64
}

// Bucket is a cumulative histogram bucket: Count fsyncs took at most LeMicros.
type Bucket struct {
	LeMicros int64 // -1 is +Inf
	Count    int64
}

// fsyncBucketPrefixes name the fsync histograms in the order they are
// preferred: every fdatasync of the AOF (posix always and everysec, the
// io_uring engine), then the io_uring engine's own, all that a server older
// than aof_fsync_* reports.
var fsyncBucketPrefixes = []string{"aof_fsync_usec_bucket_le_", "aof_uring_fsync_usec_bucket_le_"}

// SampleFromInfo extracts a Sample from INFO's cpu, memory, persistence,
// replication and stats sections, as go-redis's InfoMap returns them (section title ->
// field -> value).
func SampleFromInfo(info map[string]map[string]string) (Sample, error) {
	var s Sample
	cpu, persistence := info["CPU"], info["Persistence"]
	user, err1 := strconv.ParseFloat(cpu["used_cpu_user"], 64)
	sys, err2 := strconv.ParseFloat(cpu["used_cpu_sys"], 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("INFO has no used_cpu_user/used_cpu_sys")
	}
	s.CPUSeconds = user + sys
	s.RSSBytes, _ = strconv.ParseInt(info["Memory"]["used_memory_rss"], 10, 64)
	s.Commands, _ = strconv.ParseInt(info["Stats"]["total_commands_processed"], 10, 64)
	s.Engine = persistence["aof_engine"]
	if persistence["aof_enabled"] == "0" {
		s.Engine = ""
	}
	s.Role, s.Replicas, s.AckReplicas = replicationFromInfo(info)
	for _, prefix := range fsyncBucketPrefixes {
		buckets, err := bucketsFromInfo(persistence, prefix)
		if err != nil || len(buckets) > 0 {
			s.FsyncBuckets = buckets
			return s, err
		}
	}
	return s, nil
}

// bucketsFromInfo reads the cumulative histogram whose buckets are the
// fields named prefix<usec> and prefix"inf", ordered by bound.
func bucketsFromInfo(persistence map[string]string, prefix string) ([]Bucket, error) {
	var buckets []Bucket
	for k, v := range persistence {
		bound, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		count, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("INFO field %s: %q is not a count", k, v)
		}
		le := int64(-1)
		if bound != "inf" {
			if le, err = strconv.ParseInt(bound, 10, 64); err != nil {
				return nil, fmt.Errorf("INFO field %s: bad bound", k)
			}
		}
		buckets = append(buckets, Bucket{LeMicros: le, Count: count})
	}
	sort.Slice(buckets, func(i, j int) bool {
		a, b := buckets[i].LeMicros, buckets[j].LeMicros
		return b == -1 && a != -1 || a != -1 && a < b
	})
	return buckets, nil
}

// replicationFromInfo reads INFO replication's role and how many replicas
// stream from the server (state=online), and INFO persistence's
// aof_uring_ack_replicas: how many of them a durable reply waits for.
func replicationFromInfo(info map[string]map[string]string) (role string, replicas, ackReplicas int) {
	ackReplicas, _ = strconv.Atoi(info["Persistence"]["aof_uring_ack_replicas"])
	for k, v := range info["Replication"] {
		// slave0:ip=…,port=…,state=online,offset=…,lag=…
		if strings.HasPrefix(k, "slave") && strings.Contains(","+v+",", ",state=online,") {
			replicas++
		}
	}
	return info["Replication"]["role"], replicas, ackReplicas
}

// FsyncDelta is the fsyncs between two samples: their count and the p50 and
// p99 as bucket upper bounds (a quantile in the +Inf bucket reports the
// largest finite bound).
func FsyncDelta(before, after Sample) (count, p50, p99 int64) {
	if len(after.FsyncBuckets) == 0 || len(before.FsyncBuckets) != len(after.FsyncBuckets) {
		return 0, 0, 0
	}
	deltas := make([]int64, len(after.FsyncBuckets))
	for i := range after.FsyncBuckets {
		deltas[i] = after.FsyncBuckets[i].Count - before.FsyncBuckets[i].Count
	}
	count = deltas[len(deltas)-1]
	if count <= 0 {
		return 0, 0, 0
	}
	quantile := func(q float64) int64 {
		rank := int64(q*float64(count) + 0.999999)
		for i, d := range deltas {
			if d >= rank {
				if le := after.FsyncBuckets[i].LeMicros; le >= 0 {
					return le
				}
				if i > 0 {
					return after.FsyncBuckets[i-1].LeMicros
				}
			}
		}
		return 0
	}
	return count, quantile(0.5), quantile(0.99)
}
