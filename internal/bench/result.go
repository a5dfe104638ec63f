// Package bench is the benchmark runner's measurement and its result: the
// runner (cmd/bench) fills a Result and prints it as its container's
// termination message, the operator decodes it into RedisBenchmark status.
package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// MaxResultBytes is what a container termination message holds (4 KiB); the
// kubelet truncates anything longer, so Encode refuses it instead.
const MaxResultBytes = 4096

// Result is one target's run: the figures of every command, and the crash
// check when one ran. Figures are integers in fixed units so the message
// stays short and the status has no floats.
type Result struct {
	Target string `json:"target"`
	Mode   string `json:"mode"`
	Engine string `json:"engine,omitempty"`
	// Storage is the target's volume (Workload.Storage).
	Storage string `json:"storage,omitempty"`
	// Replicas is the fewest replicas streaming from the target at any
	// sample of the run; AckReplicas how many of them a durable reply waited
	// for (aof-uring-ack-replicas).
	Replicas    int `json:"replicas,omitempty"`
	AckReplicas int `json:"ackReplicas,omitempty"`
	// Shards is how many primaries of a cluster served the run, 0 for a
	// single server.
	Shards   int             `json:"shards,omitempty"`
	Commands []CommandResult `json:"commands"`
	Crash    *CrashResult    `json:"crash,omitempty"`
}

// CommandResult is one valkey-benchmark test.
type CommandResult struct {
	Command         string  `json:"command"`
	OpsPerSecond    float64 `json:"ops"`
	P50Micros       int64   `json:"p50us"`
	P99Micros       int64   `json:"p99us"`
	P999Micros      int64   `json:"p999us"`
	CPUMicrosPerKop int64   `json:"cpuUsPerKop"`
	FsyncCount      int64   `json:"fsyncs,omitempty"`
	FsyncP50Micros  int64   `json:"fsyncP50us,omitempty"`
	FsyncP99Micros  int64   `json:"fsyncP99us,omitempty"`
	RSSBytes        int64   `json:"rss,omitempty"`
	// ShardOpsMin and ShardOpsMax are, on a cluster, the fewest and most
	// commands per second one primary processed while the test ran.
	ShardOpsMin float64 `json:"shardOpsMin,omitempty"`
	ShardOpsMax float64 `json:"shardOpsMax,omitempty"`
}

// CrashResult is what survived a kill -9 of the server.
type CrashResult struct {
	Acknowledged int64 `json:"acked"`
	Lost         int64 `json:"lost"`
}

// Encode renders r as one line of JSON, or fails when it would not fit a
// termination message.
func Encode(r Result) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxResultBytes {
		return nil, fmt.Errorf("result is %d bytes, more than a termination message holds (%d)", len(b), MaxResultBytes)
	}
	return b, nil
}

// Decode parses a termination message written by Encode and checks it is a
// result for target.
func Decode(msg, target string) (Result, error) {
	var r Result
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace([]byte(msg))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("decoding the runner's result: %w", err)
	}
	if dec.More() {
		return Result{}, errors.New("decoding the runner's result: trailing data after the JSON object")
	}
	switch {
	case r.Target != target:
		return Result{}, fmt.Errorf("the runner's result is for target %q, not %q", r.Target, target)
	case len(r.Commands) == 0:
		return Result{}, errors.New("the runner's result has no commands")
	}
	for _, c := range r.Commands {
		if c.Command == "" || c.OpsPerSecond <= 0 {
			return Result{}, fmt.Errorf("the runner's result has an empty measurement for command %q", c.Command)
		}
	}
	return r, nil
}

// StatusResults is r as RedisBenchmark status.results entries, one per command.
func StatusResults(r Result) []v1alpha1.BenchmarkResult {
	out := make([]v1alpha1.BenchmarkResult, 0, len(r.Commands))
	for _, c := range r.Commands {
		out = append(out, v1alpha1.BenchmarkResult{
			Target:               r.Target,
			Mode:                 r.Mode,
			Engine:               r.Engine,
			Storage:              r.Storage,
			Replicas:             int32(r.Replicas),
			AckReplicas:          int32(r.AckReplicas),
			Command:              c.Command,
			OpsPerSecond:         int64(math.Round(c.OpsPerSecond)),
			P50Micros:            c.P50Micros,
			P99Micros:            c.P99Micros,
			P999Micros:           c.P999Micros,
			CPUMicrosPerKop:      c.CPUMicrosPerKop,
			FsyncCount:           c.FsyncCount,
			FsyncP50Micros:       c.FsyncP50Micros,
			FsyncP99Micros:       c.FsyncP99Micros,
			RSSBytes:             c.RSSBytes,
			Shards:               int32(r.Shards),
			ShardOpsMinPerSecond: int64(math.Round(c.ShardOpsMin)),
			ShardOpsMaxPerSecond: int64(math.Round(c.ShardOpsMax)),
		})
	}
	return out
}
