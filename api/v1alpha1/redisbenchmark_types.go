package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkCommand is a valkey-benchmark test.
// +kubebuilder:validation:Enum=set;hset;lpush;incr;get
type BenchmarkCommand string

// The benchmark's commands; the first four write and so exercise persistence.
const (
	CommandSet   BenchmarkCommand = "set"
	CommandHSet  BenchmarkCommand = "hset"
	CommandLPush BenchmarkCommand = "lpush"
	CommandIncr  BenchmarkCommand = "incr"
	CommandGet   BenchmarkCommand = "get"
)

// RedisBenchmarkSpec is the comparison to run. It cannot change once created:
// the results describe the spec they ran with.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: results describe the spec they ran with; create a new RedisBenchmark"
type RedisBenchmarkSpec struct {
	// targets are RedisPersistence names in the benchmark's namespace, run one
	// after another (never two at once, so they do not share the node's disk),
	// in this order, once per repetition. Each must opt in with spec.benchmark and be Ready before
	// its Job starts, and runs one benchmark at a time: a benchmark whose
	// target another one drives waits for it.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=12
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=52
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.exists_one(u, u == t))",message="targets must not repeat a RedisPersistence; use repetitions to run one several times"
	// +listType=atomic
	Targets []string `json:"targets"`

	// workload is what every target is driven with.
	// +optional
	// +kubebuilder:default={}
	Workload BenchmarkWorkload `json:"workload,omitempty"`

	// repetitions is how many times every target runs the workload. They
	// interleave: repetition 1 runs each target in spec order, then
	// repetition 2 does, and so on, so that a slow spell of a shared node
	// falls on every target alike instead of on whichever ran during it.
	// status.results holds each command's median repetition by throughput;
	// status.runs holds them all. The crash check runs once per target, in
	// its last repetition.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Repetitions int32 `json:"repetitions,omitempty"`

	// crashCheck kills each target's server after the workload and verifies the
	// writes it acknowledged survived the restart. Every target must allow it
	// with spec.benchmark.crashCheck.
	// +optional
	CrashCheck *CrashCheckSpec `json:"crashCheck,omitempty"`

	// activeDeadlineSeconds bounds each target's Job: a target that runs
	// longer is stopped and fails the benchmark.
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=86400
	ActiveDeadlineSeconds int64 `json:"activeDeadlineSeconds,omitempty"`

	// image overrides the runner image (the operator's --bench-image flag).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// resources of the runner container. The runner is scheduled like any pod:
	// give it a request so it does not compete with the server for CPU.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// BenchmarkWorkload is one valkey-benchmark configuration.
// +kubebuilder:validation:XValidation:rule="!has(self.mixedReads) || !self.mixedReads || !has(self.commands) || self.commands.exists(c, c == 'set')",message="workload.mixedReads reads during SET load; commands must include set"
type BenchmarkWorkload struct {
	// commands run one after another, each as its own valkey-benchmark test.
	// +optional
	// +kubebuilder:default={set,hset,lpush,incr}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.exists_one(d, d == c))",message="workload.commands must not repeat a command"
	// +listType=atomic
	Commands []BenchmarkCommand `json:"commands,omitempty"`

	// requests per command and repetition.
	// +optional
	// +kubebuilder:default=100000
	// +kubebuilder:validation:Minimum=1000
	// +kubebuilder:validation:Maximum=100000000
	Requests int32 `json:"requests,omitempty"`

	// clients are concurrent connections.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Clients int32 `json:"clients,omitempty"`

	// pipeline is the number of requests each client sends before reading replies.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Pipeline int32 `json:"pipeline,omitempty"`

	// valueSize in bytes of each written value.
	// +optional
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	ValueSize int32 `json:"valueSize,omitempty"`

	// keyspace is how many distinct keys the writes spread over.
	// +optional
	// +kubebuilder:default=100000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000000
	Keyspace int32 `json:"keyspace,omitempty"`

	// mixedReads also runs GETs of keys no write touches while SET runs, and
	// reports them as command "get-during-set": a durable engine must not make
	// reads of clean keys wait for the disk.
	// +optional
	MixedReads bool `json:"mixedReads,omitempty"`
}

// CrashCheckSpec configures the crash check.
type CrashCheckSpec struct {
	// clients write distinct keys concurrently, each recording the keys the
	// server acknowledged.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Clients int32 `json:"clients,omitempty"`

	// writeSeconds is how long the clients write before the server is killed.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=600
	WriteSeconds int32 `json:"writeSeconds,omitempty"`
}

// BenchmarkResult is one command's figures on one target.
type BenchmarkResult struct {
	// target is the RedisPersistence.
	Target string `json:"target"`
	// mode is the target's persistence: none, rdb, aof-always, aof-everysec,
	// aof-no, uring-durable or uring-fast.
	Mode string `json:"mode"`
	// engine the server reported writing its append-only file with (posix or uring).
	// +optional
	Engine string `json:"engine,omitempty"`
	// storage is the target's volume: its spec.storage.storageClassName, or
	// its storage profile when that is empty. Targets compare with one
	// another on the same storage (a slow flush slows every durable mode).
	// +optional
	Storage string `json:"storage,omitempty"`
	// replicas is the fewest replicas the target's primary streamed to
	// during the run; 0 for a standalone server.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ackReplicas is how many replicas' fsyncs each durable reply waited for
	// (spec.uring.ackReplicas, as the server reported it).
	// +optional
	AckReplicas int32 `json:"ackReplicas,omitempty"`
	// command is the valkey-benchmark test (or get-during-set).
	Command string `json:"command"`
	// repetition these figures come from, counted from 1.
	// +optional
	Repetition int32 `json:"repetition,omitempty"`
	// opsPerSecond is valkey-benchmark's throughput.
	OpsPerSecond int64 `json:"opsPerSecond"`
	// latency percentiles in microseconds, as valkey-benchmark measured them.
	P50Micros  int64 `json:"p50Micros"`
	P99Micros  int64 `json:"p99Micros"`
	P999Micros int64 `json:"p999Micros"`
	// cpuMicrosPerKop is server CPU time (INFO cpu: user+sys, io_uring workers
	// included) per 1000 operations, in microseconds.
	CPUMicrosPerKop int64 `json:"cpuMicrosPerKop"`
	// fsyncCount is the number of fdatasyncs of the append-only file the
	// server completed during the command, whichever engine ran them (posix
	// always and everysec, uring); 0 when it synced none (no AOF, fsync: no,
	// or a command shorter than everysec's second).
	// +optional
	FsyncCount int64 `json:"fsyncCount,omitempty"`
	// fsyncP50Micros and fsyncP99Micros are upper bounds from the server's
	// fsync latency buckets.
	// +optional
	FsyncP50Micros int64 `json:"fsyncP50Micros,omitempty"`
	// +optional
	FsyncP99Micros int64 `json:"fsyncP99Micros,omitempty"`
	// rssBytes is the server's resident memory after the command (on a
	// sharded target, its primaries' added up, as are CPU and fsyncs).
	// +optional
	RSSBytes int64 `json:"rssBytes,omitempty"`
	// shards is how many primaries of a sharded target served the run; 0
	// for a single server.
	// +optional
	Shards int32 `json:"shards,omitempty"`
	// shardOpsMinPerSecond and shardOpsMaxPerSecond are, on a sharded
	// target, the fewest and most commands per second one primary processed
	// during the command: how evenly the load spread.
	// +optional
	ShardOpsMinPerSecond int64 `json:"shardOpsMinPerSecond,omitempty"`
	// +optional
	ShardOpsMaxPerSecond int64 `json:"shardOpsMaxPerSecond,omitempty"`
}

// CrashCheckResult is what the crash check found on one target.
type CrashCheckResult struct {
	// target is the RedisPersistence.
	Target string `json:"target"`
	// mode is the target's persistence (see BenchmarkResult.mode).
	Mode string `json:"mode"`
	// acknowledgedKeys is how many writes the server acknowledged before it was killed.
	AcknowledgedKeys int64 `json:"acknowledgedKeys"`
	// lostKeys is how many of them were missing after the restart.
	LostKeys int64 `json:"lostKeys"`
	// durable is true when the mode promises no acknowledged write is lost
	// (aof-always, uring-durable); lostKeys > 0 then fails the benchmark.
	Durable bool `json:"durable"`
}

// Condition types and reasons of a RedisBenchmark.
const (
	// ConditionComplete is true when every target ran.
	ConditionComplete = "Complete"
	// ConditionFailed is true when a target's run failed; no further target runs.
	ConditionFailed = "Failed"
)

// RedisBenchmarkStatus is the benchmark's progress and results.
type RedisBenchmarkStatus struct {
	// conditions: Complete and Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// completedTargets is how many targets finished all their repetitions,
	// in spec order.
	// +optional
	CompletedTargets int32 `json:"completedTargets,omitempty"`
	// completedRuns is how many Jobs finished, in run order: every target
	// of repetition 1 in spec order, then those of repetition 2, and so on.
	// +optional
	CompletedRuns int32 `json:"completedRuns,omitempty"`

	// currentJob is the Job running now.
	// +optional
	CurrentJob string `json:"currentJob,omitempty"`

	// results, one per target and command, in spec order: the command's
	// median repetition by throughput (its repetition field says which).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=72
	Results []BenchmarkResult `json:"results,omitempty"`
	// runs are the figures of every repetition, in run order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=720
	Runs []BenchmarkResult `json:"runs,omitempty"`

	// crashChecks, one per target, when spec.crashCheck is set.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=12
	CrashChecks []CrashCheckResult `json:"crashChecks,omitempty"`
}

// RedisBenchmark compares persistence modes: it runs the same workload
// against each target RedisPersistence in a Job and records the results.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 56",message="a RedisBenchmark name is at most 56 characters: its Jobs are named <name>-<run index>"
// +kubebuilder:resource:shortName=rbench,categories=uringredis
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.completedTargets`
// +kubebuilder:printcolumn:name="Runs",type=integer,JSONPath=`.status.completedRuns`
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.currentJob`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RedisBenchmark struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   RedisBenchmarkSpec   `json:"spec"`
	Status RedisBenchmarkStatus `json:"status,omitempty"`
}

// RedisBenchmarkList is a list of RedisBenchmark.
// +kubebuilder:object:root=true
type RedisBenchmarkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisBenchmark `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RedisBenchmark{}, &RedisBenchmarkList{})
}
