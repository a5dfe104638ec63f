package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PersistenceMode is how the server keeps its data.
// +kubebuilder:validation:Enum=none;rdb;aof;uring
type PersistenceMode string

const (
	// ModeNone keeps data in memory only; a restart loses everything.
	ModeNone PersistenceMode = "none"
	// ModeRDB writes point-in-time snapshots; a crash loses the writes since the last one.
	ModeRDB PersistenceMode = "rdb"
	// ModeAOF appends every write to a log synced to disk per spec.aof.fsync.
	ModeAOF PersistenceMode = "aof"
	// ModeUring appends every write to a log written and synced through io_uring.
	ModeUring PersistenceMode = "uring"
)

// KeepsAOF is true for the modes whose data is in the append-only file:
// aof and uring.
func (m PersistenceMode) KeepsAOF() bool { return m == ModeAOF || m == ModeUring }

// AOFFsync is the upstream appendfsync policy.
// +kubebuilder:validation:Enum=always;everysec;no
type AOFFsync string

const (
	// FsyncAlways syncs the log before replying: no acknowledged write is lost, the event loop waits on the disk.
	FsyncAlways AOFFsync = "always"
	// FsyncEverySec syncs the log once a second in the background: a crash loses about a second of writes.
	FsyncEverySec AOFFsync = "everysec"
	// FsyncNo leaves syncing to the kernel: a crash loses up to the kernel's writeback interval.
	FsyncNo AOFFsync = "no"
)

// UringAck is when the io_uring engine replies to a write.
// +kubebuilder:validation:Enum=durable;fast
type UringAck string

const (
	// AckDurable withholds a write's reply until its batch is on disk.
	AckDurable UringAck = "durable"
	// AckFast replies once the write is submitted; spec.uring.maxInFlight bounds what a crash can lose.
	AckFast UringAck = "fast"
)

// StorageProfile names the kind of volume the data directory lives on.
// +kubebuilder:validation:Enum=local-nvme;gp3;custom
type StorageProfile string

const (
	// StorageLocalNVMe is a node-local NVMe device formatted ext4 (the chart's localNvme preset).
	StorageLocalNVMe StorageProfile = "local-nvme"
	// StorageGP3 is an EBS gp3 volume formatted ext4 (the chart's gp3 preset).
	StorageGP3 StorageProfile = "gp3"
	// StorageCustom is any StorageClass the user names, or the cluster default.
	StorageCustom StorageProfile = "custom"
)

// UpdateStrategy is how a replicated or sharded instance's servers take a
// new pod template.
// +kubebuilder:validation:Enum=switchover;restart
type UpdateStrategy string

const (
	// UpdateSwitchover restarts the replicas first, one at a time, then has
	// the Sentinels hand the primary role to a restarted replica, and
	// restarts the old primary last.
	UpdateSwitchover UpdateStrategy = "switchover"
	// UpdateRestart lets the StatefulSet controller restart the servers from
	// the highest ordinal down, the primary like any other.
	UpdateRestart UpdateStrategy = "restart"
)

// RedisPersistenceSpec is the desired server and its persistence.
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || has(oldSelf.bootstrap) && self.bootstrap == oldSelf.bootstrap",message="spec.bootstrap is how a new instance starts: it cannot be added to or changed on an existing one (remove it, or create a new RedisPersistence)"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || self.mode != 'none'",message="spec.bootstrap.recovery needs a mode that keeps data on disk: mode none has nothing to restore into"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || has(self.backup)",message="spec.bootstrap.recovery reads the backup with spec.backup.destination's endpoint and credentials: set spec.backup too"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.recovery.archive) || self.mode == 'aof' || self.mode == 'uring'",message="spec.bootstrap.recovery.archive replays an AOF: it needs mode aof or uring"
// +kubebuilder:validation:XValidation:rule="!has(self.backup) || !has(self.backup.archive) || self.mode == 'aof' || self.mode == 'uring'",message="spec.backup.archive ships the AOF: it needs mode aof or uring"
// +kubebuilder:validation:XValidation:rule="!has(self.aof) || self.mode == 'aof'",message="spec.aof is only valid with mode: aof"
// +kubebuilder:validation:XValidation:rule="!has(self.uring) || self.mode == 'uring'",message="spec.uring is only valid with mode: uring"
// +kubebuilder:validation:XValidation:rule="!has(self.rdb) || self.mode != 'none'",message="spec.rdb snapshots need a persistent mode; mode: none keeps nothing on disk"
// +kubebuilder:validation:XValidation:rule="self.mode != 'rdb' || has(self.rdb)",message="mode: rdb needs spec.rdb.save rules (for example [{seconds: 3600, changes: 1}])"
// +kubebuilder:validation:XValidation:rule="!has(self.config) || !('io-threads' in self.config) || self.config['io-threads'] == '1' || self.mode != 'uring' || (has(self.uring) && self.uring.ack == 'fast')",message="spec.config.io-threads above 1 needs uring.ack: fast: with ack: durable the server refuses I/O threads (they would read from and write to the clients the durable gate holds back)"
// +kubebuilder:validation:XValidation:rule="has(self.storage) == has(oldSelf.storage)",message="spec.storage cannot be added or removed: a StatefulSet's volume claims cannot change; create a new RedisPersistence"
// +kubebuilder:validation:XValidation:rule="!has(self.uring) || !has(self.uring.ackReplicas) || self.uring.ackReplicas == 0 || (self.mode == 'uring' && (!has(self.uring.ack) || self.uring.ack == 'durable') && (has(self.cluster) ? self.uring.ackReplicas <= self.cluster.replicasPerShard : has(self.replicas) && self.uring.ackReplicas < self.replicas))",message="spec.uring.ackReplicas needs mode: uring with uring.ack: durable and fewer than spec.replicas (the primary does not count: ackReplicas 1 needs replicas: 2 or more), or with spec.cluster at most spec.cluster.replicasPerShard"
// +kubebuilder:validation:XValidation:rule="has(self.cluster) == has(oldSelf.cluster)",message="spec.cluster cannot be added or removed: a cluster's data is spread over its shards' volumes; create a new RedisPersistence"
// +kubebuilder:validation:XValidation:rule="!has(self.cluster) || !has(self.sentinel)",message="spec.cluster and spec.sentinel exclude each other: a cluster fails over by itself"
// +kubebuilder:validation:XValidation:rule="!has(self.cluster) || !has(self.replicas) || self.replicas == 1",message="with spec.cluster, each shard's replicas are spec.cluster.replicasPerShard: leave spec.replicas at 1"
// +kubebuilder:validation:XValidation:rule="!has(self.cluster) || self.mode != 'none' || has(self.storage)",message="a cluster node keeps its nodes.conf on its volume to rejoin after a restart: with mode none, spec.cluster needs spec.storage"
// +kubebuilder:validation:XValidation:rule="!has(self.cluster) || !has(self.benchmark) || !has(self.benchmark.crashCheck) || !self.benchmark.crashCheck",message="spec.benchmark.crashCheck is not supported with spec.cluster: a killed primary is failed over, not restarted, so the crash check has no meaning there"
// +kubebuilder:validation:XValidation:rule="!has(self.cluster) || (!has(self.backup) && !has(self.bootstrap))",message="backups and restores of a cluster are not supported yet: remove spec.backup and spec.bootstrap, or run one primary with replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.sentinel) || (has(self.replicas) && self.replicas > 1)",message="spec.sentinel configures the failover of replicated servers: it needs spec.replicas of 2 or more (remove spec.sentinel to run one server)"
// +kubebuilder:validation:XValidation:rule="self.mode == oldSelf.mode || ((!has(self.replicas) || self.replicas == 1) && (!has(oldSelf.replicas) || oldSelf.replicas == 1))",message="spec.mode cannot change while spec.replicas is above 1: the operator carries a mode change through one running server; scale to replicas: 1 first, change the mode, then scale out again"
// +kubebuilder:validation:XValidation:rule="has(self.storage) || (self.mode == 'none') == (oldSelf.mode == 'none')",message="without spec.storage, mode: none runs without a volume and the other modes on a default one, so the mode cannot change between none and rdb, aof or uring: there is no volume to carry the data to, or none to drop; create a new RedisPersistence with spec.storage"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !('memory' in self.resources.limits) || (has(self.config) && 'maxmemory' in self.config) || quantity(string(self.resources.limits['memory'])).compareTo(quantity('64Mi')) >= 0",message="spec.resources.limits.memory below 64Mi leaves the server too little: maxmemory would be 70% of it and the rest cannot hold the server's own ~10Mi, its clients' buffers and an AOF rewrite; raise the limit, or set spec.config.maxmemory yourself"
type RedisPersistenceSpec struct {
	// mode is how the server keeps its data: none (memory only), rdb (snapshots),
	// aof (append-only file synced per aof.fsync) or uring (append-only file
	// written and synced through io_uring).
	// +required
	Mode PersistenceMode `json:"mode"`

	// replicas is how many servers run: 1 is a single server; N > 1 is one
	// primary and N-1 replicas of it, each pod on its own volume with the same
	// persistence mode, and Sentinels (spec.sentinel) that promote a replica
	// when the primary fails. The Service `<name>` follows the primary,
	// `<name>-replicas` the replicas, `<name>-sentinel` the Sentinels. Replication
	// is asynchronous: a failover can lose acknowledged writes that had not
	// reached the replica it promotes.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	Replicas int32 `json:"replicas,omitempty"`

	// cluster shards the instance into a Valkey Cluster: spec.cluster.shards
	// primaries serve the 16384 hash slots between them, each with
	// replicasPerShard replicas, every server with spec.mode's persistence.
	// The cluster fails over by itself; the operator forms it, moves slots
	// with their keys when shards changes, and reports status.shards. It
	// cannot be added to or removed from an existing instance, and excludes
	// spec.replicas above 1 and spec.sentinel.
	// +optional
	Cluster *ClusterSpec `json:"cluster,omitempty"`

	// updateStrategy is how a replicated instance (spec.replicas above 1)
	// rolls a change that restarts its servers: the image, resources, a
	// startup option, a new operator version. switchover restarts the
	// replicas one at a time, each Ready and replicating again before the
	// next, then asks the Sentinels to hand the primary role to a restarted
	// replica (writes pause for the switchover instead of failing), and only
	// then restarts the old primary. restart lets the StatefulSet controller
	// restart the servers from the highest ordinal down and the primary like
	// any server: writes fail until the Sentinels fail over. A single server
	// always restarts. The shards of spec.cluster roll the same way, each
	// on its own, a replica of the shard taking over (CLUSTER FAILOVER)
	// before its primary restarts; under restart a shard's primary restarts
	// like any server and the cluster fails over once it misses it.
	// +optional
	// +kubebuilder:default=switchover
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`

	// sentinel configures the Sentinels that watch a replicated instance
	// (spec.replicas above 1) and fail it over; they run whether or not this is
	// set. Only valid with spec.replicas above 1.
	// +optional
	Sentinel *SentinelSpec `json:"sentinel,omitempty"`

	// aof configures mode: aof.
	// +optional
	AOF *AOFSpec `json:"aof,omitempty"`

	// rdb configures snapshots: required with mode: rdb, optional next to an
	// append-only file (aof, uring), where it also bounds restart time.
	// +optional
	RDB *RDBSpec `json:"rdb,omitempty"`

	// uring configures mode: uring.
	// +optional
	Uring *UringSpec `json:"uring,omitempty"`

	// storage is the volume that holds the data directory. It cannot be added
	// or removed after creation, nor change class; its size may grow where the
	// StorageClass allows volume expansion. Without it, mode: none runs on an
	// emptyDir (it keeps nothing) and the other modes claim 8Gi of the
	// cluster's default StorageClass.
	// +optional
	Storage *StorageSpec `json:"storage,omitempty"`

	// placement restricts the nodes the server may run on.
	// +optional
	Placement PlacementSpec `json:"placement,omitempty"`

	// podMetadata adds labels and annotations to the server pods, for
	// example a cost-centre label or a service mesh's annotations. The
	// Sentinels' pods do not get them.
	// +optional
	PodMetadata *PodMetadata `json:"podMetadata,omitempty"`

	// service is how the client-facing Services are exposed.
	// +optional
	Service *ServiceSpec `json:"service,omitempty"`

	// image overrides the server image the operator runs (its --redis-image
	// flag). It pins the instance: a change of the operator's default image
	// leaves it alone, and a change here rolls the pod at once.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// resources of the server container, used as written. Without them the
	// server requests 100m CPU and 128Mi of memory, with no limit: only the
	// user knows how large the dataset grows. A memory limit also sets the
	// server's maxmemory, unless config.maxmemory does: 70% of the limit, so
	// that what maxmemory does not count fits beside the dataset (pages a
	// snapshot or AOF rewrite child copies on write, the AOF buffer and the
	// io_uring engine's batches in flight, replies the durable gate holds,
	// client buffers, allocator fragmentation). A write that would pass
	// maxmemory then fails with an OOM error (or evicts, per
	// config.maxmemory-policy) instead of the container being OOM-killed.
	// A memory limit below 64Mi needs config.maxmemory: 70% of it is too
	// little to use.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// config sets server options, as redis.conf lines `<name> <value>`. The
	// operator sets the ones the running server can change with CONFIG SET,
	// without a restart, and restarts the server for the others (such as
	// databases or io-threads). The options the operator owns are rejected:
	// the persistence options (appendonly, appendfsync*, aof-uring-*, save,
	// the file names and dir), the network (port, bind, protected-mode,
	// unixsocket*, tls-*), authentication (requirepass, primaryauth/masterauth,
	// aclfile, user), replication (replicaof, replica-announce-ip: a
	// replicated instance's start script sets them), logging to a file, the DEBUG and MODULE
	// commands, include, rename-command, loadmodule, and cluster-* (a
	// server in cluster mode serves no key until it is given slots).
	// io-threads above 1
	// needs mode uring with uring.ack: fast or another mode (durable acks
	// refuse I/O threads). An option the server does not know stops it from
	// starting, as it would in redis.conf.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 64 && k.matches('^[a-z][a-z0-9-]*$'))",message="spec.config keys are server option names in lower case, at most 64 characters (for example maxmemory-policy)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['appendonly', 'appendfilename', 'appenddirname', 'dir', 'dbfilename', 'save', 'port', 'bind', 'bind-source-addr', 'protected-mode', 'requirepass', 'masterauth', 'primaryauth', 'masteruser', 'primaryuser', 'aclfile', 'user', 'replicaof', 'slaveof', 'replica-announce-ip', 'slave-announce-ip', 'daemonize', 'supervised', 'pidfile', 'logfile', 'enable-debug-command', 'enable-module-command', 'enable-protected-configs', 'include', 'rename-command', 'loadmodule']) && !k.startsWith('appendfsync') && !k.startsWith('aof-uring-') && !k.startsWith('unixsocket') && !k.startsWith('tls-') && !k.startsWith('cluster-'))",messageExpression="'spec.config.' + self.filter(k, k in ['appendonly', 'appendfilename', 'appenddirname', 'dir', 'dbfilename', 'save', 'port', 'bind', 'bind-source-addr', 'protected-mode', 'requirepass', 'masterauth', 'primaryauth', 'masteruser', 'primaryuser', 'aclfile', 'user', 'replicaof', 'slaveof', 'replica-announce-ip', 'slave-announce-ip', 'daemonize', 'supervised', 'pidfile', 'logfile', 'enable-debug-command', 'enable-module-command', 'enable-protected-configs', 'include', 'rename-command', 'loadmodule'] || k.startsWith('appendfsync') || k.startsWith('aof-uring-') || k.startsWith('unixsocket') || k.startsWith('tls-') || k.startsWith('cluster-'))[0] + ' is set by the operator and cannot be set in spec.config: persistence is spec.mode, spec.aof, spec.rdb and spec.uring; the password is spec.auth; DEBUG is spec.benchmark.crashCheck; cluster mode is not run from spec.config'"
	Config map[string]ServerOptionValue `json:"config,omitempty"`

	// auth is how clients authenticate. Without it the operator generates a
	// random password into the Secret `<name>-auth` (key password), which it
	// keeps when the RedisPersistence is deleted, as it keeps the data volume.
	// An instance that ran without a password under an operator older than
	// generated passwords keeps running without one (the annotation
	// uringredis.io/predates-closed-defaults records it) until spec.auth is
	// set or the annotation is removed.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// users are application users: Valkey ACL users the operator keeps on
	// every server (replicas and promoted primaries included) with ACL
	// SETUSER, live, never by a restart. The operator owns the servers' ACL
	// users: one removed from this list is removed from the servers (ACL
	// DELUSER, which disconnects its clients), and so is one made by hand.
	// A server that starts reads them from the Secret `<name>-users`.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Users []UserSpec `json:"users,omitempty"`

	// passwordGracePeriod is how long a previous password (the default
	// user's, spec.auth, or one of spec.users) keeps working after its Secret
	// changes: the servers and Sentinels accept both until then,
	// so clients reconnect with the new one at their pace, without a server
	// restart. 0s removes it at once. Connections signed in before are never
	// closed by a rotation.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="spec.passwordGracePeriod is a duration from 0s to 168h (for example 10m)"
	PasswordGracePeriod *metav1.Duration `json:"passwordGracePeriod,omitempty"`

	// networkPolicy restricts who may connect to the server.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// tls serves clients over TLS only: the server listens with TLS on port
	// 6379 and refuses plain connections; replicas, Sentinels, the exporter,
	// the probes, the operator and RedisBenchmark runners speak TLS to it.
	// The certificate comes from a kubernetes.io/tls Secret of yours or from
	// a cert-manager Certificate the operator creates. A new certificate in
	// the Secret reaches the running server without a restart. Without it
	// the server speaks plain TCP.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// exporter configures the redis_exporter sidecar.
	// +optional
	// +kubebuilder:default={}
	Exporter ExporterSpec `json:"exporter,omitempty"`

	// monitoring configures Prometheus Operator objects for this server.
	// +optional
	// +kubebuilder:default={}
	Monitoring MonitoringSpec `json:"monitoring,omitempty"`

	// benchmark opts the server in to RedisBenchmarks. A RedisBenchmark that
	// targets a server without it waits, and its Complete condition says why:
	// a benchmark loads the server, writes a database of its own and, with
	// crashCheck, kills the server.
	// +optional
	Benchmark *BenchmarkAccessSpec `json:"benchmark,omitempty"`

	// backup is the object store RedisBackups of this instance go to.
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`

	// bootstrap is where a new instance's data comes from: by default it
	// starts empty.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`
}

// ClusterSpec is a sharded instance's topology.
type ClusterSpec struct {
	// shards is how many primaries serve the hash slots, evenly. Raising it
	// adds shards and moves their share of the slots to them, keys and all,
	// while clients keep working (MOVED and ASK redirect them); lowering it
	// moves the slots of the last shards away first, and removes a shard
	// only once it serves none.
	// +required
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=64
	Shards int32 `json:"shards"`
	// replicasPerShard is how many replicas each primary has; the cluster
	// promotes one when its primary fails. 0 runs primaries alone: a lost
	// primary's slots are down until its server returns on its volume.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	ReplicasPerShard *int32 `json:"replicasPerShard,omitempty"`
}

// SentinelSpec configures the Valkey Sentinels (valkey-sentinel from the
// server image) of a replicated instance.
// +kubebuilder:validation:XValidation:rule="!has(self.quorum) || !has(self.count) || self.quorum <= self.count",message="spec.sentinel.quorum cannot exceed spec.sentinel.count: that many Sentinels must agree that the primary is down"
type SentinelSpec struct {
	// count of Sentinels. A failover needs a majority of them reachable, so
	// an odd count on as many nodes tolerates the most failures.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=7
	Count int32 `json:"count,omitempty"`

	// quorum is how many Sentinels must agree that the primary is down before
	// one of them fails it over (which also needs a majority of count).
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=7
	Quorum int32 `json:"quorum,omitempty"`

	// resources of each Sentinel container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ServerOptionValue is the value of one server option, as it would follow the
// option's name in redis.conf (for example "allkeys-lru" or "2gb").
// +kubebuilder:validation:MaxLength=1024
type ServerOptionValue string

// BenchmarkAccessSpec is what RedisBenchmarks may do to the server.
type BenchmarkAccessSpec struct {
	// database is the logical database (the SELECT index) benchmarks write
	// to; no application may use it. A benchmark refuses to start while it
	// holds keys no benchmark wrote, and empties it when it ends. A cluster
	// (spec.cluster) has database 0 only: benchmarks write there whatever
	// this says, and run only while the cluster holds no other key.
	// +optional
	// +kubebuilder:default=15
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=15
	Database int32 `json:"database,omitempty"`

	// crashCheck lets a benchmark's crash check kill the server while clients
	// write, with DEBUG SEGFAULT. It turns on the DEBUG command for every
	// client that holds the password (enable-debug-command yes), so keep it
	// off on servers whose data matters. Changing it restarts the server.
	// +optional
	CrashCheck bool `json:"crashCheck,omitempty"`
}

// AOFSpec configures the upstream append-only file.
type AOFSpec struct {
	// fsync is when the log is synced to disk.
	// +optional
	// +kubebuilder:default=everysec
	Fsync AOFFsync `json:"fsync,omitempty"`
}

// RDBSpec configures snapshots.
type RDBSpec struct {
	// save lists the snapshot rules: snapshot after `seconds` if at least
	// `changes` keys changed. Any rule that matches triggers a snapshot.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	Save []SaveRule `json:"save"`
}

// SaveRule is one `save <seconds> <changes>` line.
type SaveRule struct {
	// seconds since the last snapshot.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31536000
	Seconds int32 `json:"seconds"`
	// changes since the last snapshot.
	// +required
	// +kubebuilder:validation:Minimum=1
	Changes int32 `json:"changes"`
}

// UringSpec configures the io_uring append-only file engine.
// +kubebuilder:validation:XValidation:rule="!has(self.maxInFlight) || self.ack == 'fast'",message="uring.maxInFlight bounds the loss window of ack: fast; with ack: durable nothing is acknowledged before it is on disk"
// +kubebuilder:validation:XValidation:rule="(!has(self.batchesInFlight) && !has(self.directWrites)) || self.ack == 'durable'",message="uring.batchesInFlight and uring.directWrites shape how ack: durable writes its batches; ack: fast keeps one fdatasync in flight and paces it"
type UringSpec struct {
	// ack is when a write is acknowledged: durable (after its batch is on disk;
	// nothing acknowledged is lost) or fast (at submission; a crash loses at most
	// maxInFlight bytes).
	// +optional
	// +kubebuilder:default=durable
	Ack UringAck `json:"ack,omitempty"`

	// queueDepth is the ring's submission queue size, a power of two.
	// +optional
	// +kubebuilder:default=256
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=32768
	// +kubebuilder:validation:XValidation:rule="[8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768].exists(d, d == self)",message="uring.queueDepth must be a power of two between 8 and 32768"
	QueueDepth int32 `json:"queueDepth,omitempty"`

	// sqpoll runs a kernel thread that polls the submission queue, so the server
	// makes no system call to submit. It costs a core while it spins.
	// +optional
	SQPoll *SQPollSpec `json:"sqpoll,omitempty"`

	// replies sends the server's client replies through io_uring as well: the
	// replies of one event-loop pass go out in a single submission instead of
	// one write(2) per client (io-uring-replies; applied without a restart).
	// Where io_uring is unavailable the server writes them as usual and says
	// why in INFO stats (io_uring_replies_fallback_reason).
	// +optional
	Replies bool `json:"replies,omitempty"`

	// ackReplicas is how many replicas must have fdatasync'ed a write in their
	// own AOF, besides the primary, before anyone is told of it or shown it
	// (aof-uring-ack-replicas; replies, reads of the keys it changed and
	// messages about it all wait). With 1, an acknowledged write survives
	// the loss of the primary's node and disk: the Sentinels promote the
	// most up-to-date replica. With fewer replicas connected, writes are
	// refused (NOREPLICAS) and the Replicating condition says so; a write
	// already waiting when they left is closed without a reply after 10 s.
	// 0 waits for the primary's disk only (replication stays asynchronous).
	// Needs ack: durable and fewer than spec.replicas.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	AckReplicas int32 `json:"ackReplicas,omitempty"`

	// batchesInFlight is how many durable batches may be on their way to disk
	// at once (aof-uring-fsyncs-in-flight): while one is written, the event
	// loop executes the next clients' commands and may send their batch too.
	// Empty means the server's default, 1, the least CPU per write; 2 measured
	// 1.14x the writes per second at 8 and 50 closed-loop clients on an
	// EBS-like volume, at 1.26-1.34x the CPU per write (docs/benchmarks.md).
	// Applied without a restart. ack: durable only.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	BatchesInFlight int32 `json:"batchesInFlight,omitempty"`

	// directWrites writes each durable batch that lands in the log's
	// preallocated region as one O_DIRECT write with RWF_DSYNC, which is its
	// own fdatasync (aof-uring-direct-writes). Empty or true is the server's
	// default; false writes batches with write(2) and fdatasyncs them through
	// the ring, which saves the padding a direct write adds to the AOF (the
	// rest of the device's block, 512 bytes on most disks: a lone write takes
	// a whole block) at about 0.7-0.9x the writes per second. Applied without
	// a restart. ack: durable only.
	// +optional
	DirectWrites *bool `json:"directWrites,omitempty"`

	// maxWorkers bounds the kernel's io-wq worker threads for the ring.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	MaxWorkers int32 `json:"maxWorkers,omitempty"`

	// maxInFlight bounds the bytes submitted but not yet on disk with ack: fast;
	// the server applies back-pressure past it. Empty means the server default.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('64Ki')) || quantity(string(self)).compareTo(quantity('64Ki')) == 0",message="uring.maxInFlight must be at least 64Ki"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Gi')) <= 0",message="uring.maxInFlight must be at most 1Gi"
	MaxInFlight *resource.Quantity `json:"maxInFlight,omitempty"`

	// localhostProfile is the pod's Localhost seccomp profile, relative to the
	// kubelet's seccomp directory, for clusters where profiles differ per
	// namespace (the Security Profiles Operator's `operator/<namespace>/<name>.json`).
	// Empty means the operator's --uring-seccomp-profile, which the chart installs.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="uring.localhostProfile is a path relative to the kubelet's seccomp directory, without '..'"
	LocalhostProfile string `json:"localhostProfile,omitempty"`
}

// SQPollSpec configures the submission-queue polling thread.
// +kubebuilder:validation:XValidation:rule="self.enabled || (!has(self.idleMillis) && !has(self.cpu))",message="uring.sqpoll.idleMillis and uring.sqpoll.cpu need uring.sqpoll.enabled: true"
type SQPollSpec struct {
	// enabled turns on SQPOLL.
	// +required
	Enabled bool `json:"enabled"`

	// idleMillis is how long the polling thread spins without work before it sleeps.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60000
	IdleMillis *int32 `json:"idleMillis,omitempty"`

	// cpu pins the polling thread to this CPU. It must be in the pod's cpuset
	// (a Guaranteed pod under the static CPU manager policy) or the ring fails
	// to start and the server falls back to the posix engine.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4095
	CPU *int32 `json:"cpu,omitempty"`
}

// StorageSpec is the volume behind the data directory.
// +kubebuilder:validation:XValidation:rule="self.profile == oldSelf.profile && has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="spec.storage.profile and spec.storage.storageClassName are immutable: the data lives on the volume claimed with them; create a new RedisPersistence"
// +kubebuilder:validation:XValidation:rule="quantity(string(self.size)).compareTo(quantity(string(oldSelf.size))) >= 0",message="spec.storage.size cannot shrink: a volume can only grow"
type StorageSpec struct {
	// profile is the kind of volume: local-nvme and gp3 use the StorageClass of
	// the chart's preset (operator flags --local-nvme-storage-class and
	// --gp3-storage-class) unless storageClassName is set; custom uses
	// storageClassName, or the cluster's default class when empty.
	// +optional
	// +kubebuilder:default=custom
	Profile StorageProfile `json:"profile,omitempty"`

	// storageClassName of the data volume claim.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	StorageClassName string `json:"storageClassName,omitempty"`

	// size of the data volume claim. It may grow: the operator expands the
	// claim where its StorageClass sets allowVolumeExpansion, and the
	// StorageResized condition says why not elsewhere. It cannot shrink.
	// +optional
	// +kubebuilder:default="8Gi"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('64Mi')) >= 0",message="storage.size must be at least 64Mi"
	Size *resource.Quantity `json:"size,omitempty"`

	// probeInterval re-measures the data volume this long after its last
	// measurement while the server runs (status.storage), with a Job on the
	// server's node that mounts the same claim. Off when empty: the volume is
	// measured whenever the server's pod starts. Each probe writes to the
	// volume for about 2 seconds, beside the server.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10m')",message="spec.storage.probeInterval must be at least 10m: every probe writes to the volume for 2 s beside the server"
	ProbeInterval *metav1.Duration `json:"probeInterval,omitempty"`
}

// PlacementSpec restricts where the server runs. For mode: uring the operator
// adds a required node affinity on the kernel version.
type PlacementSpec struct {
	// minKernelVersion is the lowest kernel, as "major.minor", the server may
	// run on. Empty means 6.0 for mode: uring and no requirement otherwise.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{1,3}\.[0-9]{1,3}$`
	MinKernelVersion string `json:"minKernelVersion,omitempty"`

	// nodeSelector is added to the pod's node selector.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the pod.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity of the pod; the kernel requirement is added to every required
	// node selector term.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// topologySpreadConstraints of the server pods, for example across
	// zones; a replicated instance's servers also keep the anti-affinity that
	// puts them on different nodes. A constraint without labelSelector gets
	// the instance's own server selector (app.kubernetes.io/name: redis,
	// `app.kubernetes.io/instance: <name>`): spreading this instance's
	// servers is what a constraint written here means, and the user cannot
	// know the selector's labels from the API alone. The Sentinels are not
	// constrained: they spread over nodes where they can on their own.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// priorityClassName of the server and Sentinel pods. The Sentinels take
	// it too: a Sentinel preempted for less important pods could leave too
	// few to agree on a failover. The PriorityClass must exist, or the
	// StatefulSet cannot create the pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// PodMetadata is what the user adds to the server pods' metadata, after
// prometheus-operator's podMetadata: a small struct of its own rather than
// a whole pod template, because the operator owns the rest of the pod. A
// change rolls the servers, as any change of a StatefulSet's pod template
// does. Where a key is also one the operator sets (uringredis.io/config-hash,
// app.kubernetes.io/managed-by, ...), the operator's value wins; the
// selector labels, which the StatefulSet and the Services select the
// servers by, are rejected.
type PodMetadata struct {
	// labels added to the server pods. The keys app.kubernetes.io/name,
	// app.kubernetes.io/instance and app.kubernetes.io/part-of and those
	// under uringredis.io/ are the operator's selector labels and are
	// rejected.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="spec.podMetadata.labels keys are label keys: an optional DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.' (for example example.com/team)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/part-of']) && !k.startsWith('uringredis.io/'))",messageExpression="'spec.podMetadata.labels.' + self.filter(k, k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/part-of'] || k.startsWith('uringredis.io/'))[0] + ' is a label the operator selects the server pods by and cannot be set in spec.podMetadata'"
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// annotations added to the server pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="spec.podMetadata.annotations keys are annotation keys: an optional DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.' (for example example.com/owner)"
	Annotations map[string]AnnotationValue `json:"annotations,omitempty"`
}

// LabelValue is the value of a Kubernetes label.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// AnnotationValue is the value of a Kubernetes annotation, bounded so that
// 32 of them stay well inside an object's 256KiB of annotations.
// +kubebuilder:validation:MaxLength=4096
type AnnotationValue string

// ServiceSpec is how the client-facing Services are exposed: the one named
// after the instance (the server, or a replicated instance's primary) and,
// for a replicated instance, `<name>-replicas`. Both take the type and the
// annotations, since a client that can reach the primary from outside the
// cluster expects to reach the replicas the same way. The headless Service
// never does: it only gives each pod its DNS name inside the cluster. The
// Sentinels' Service stays ClusterIP too.
type ServiceSpec struct {
	// type of the client-facing Services. NodePort and LoadBalancer expose
	// the server port (and the exporter's metrics port, unless
	// spec.exporter turns the exporter off) outside the cluster; the
	// NetworkPolicy, when on, still decides who may connect.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	Type corev1.ServiceType `json:"type,omitempty"`

	// annotations of the client-facing Services, for example a cloud load
	// balancer's settings.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="spec.service.annotations keys are annotation keys: an optional DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.' (for example service.beta.kubernetes.io/aws-load-balancer-internal)"
	Annotations map[string]AnnotationValue `json:"annotations,omitempty"`
}

// AuthSpec is how clients authenticate: with the password of a Secret the
// user provides, or not at all.
// +kubebuilder:validation:XValidation:rule="!(has(self.secretRef) && has(self.disabled) && self.disabled)",message="spec.auth.secretRef and spec.auth.disabled: true exclude each other: a password from your Secret, or no password at all"
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) || (has(self.disabled) && self.disabled)",message="spec.auth needs secretRef (a password from your Secret) or disabled: true (no password); leave spec.auth out for a password the operator generates"
type AuthSpec struct {
	// secretRef names the Secret key that holds the password.
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`

	// disabled runs the server without a password: any client that reaches
	// its port can read and write everything. The operator records a Warning
	// event saying so.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// UserSpec is an application user: a Valkey ACL user with a password and
// the keys, channels and commands it may use. The rules are ACL rules; the
// API server checks their shape, and a rule the server refuses (an unknown
// command or category) is reported in the UsersReady condition with the
// server's own error.
// +kubebuilder:validation:XValidation:rule="self.name != 'default' && !self.name.startsWith('uringredis-')",message="spec.users[].name cannot be default (spec.auth is its password) or start with uringredis- (the operator's own users)"
type UserSpec struct {
	// name of the ACL user: lower-case letters, digits and '-', as it also
	// names the user's Secrets.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	Name string `json:"name"`

	// passwordSecretRef names the Secret key holding the user's password.
	// Without it the operator generates one into the Secret
	// `<name>-user-<user>` (key password), kept when the RedisPersistence is
	// deleted, as the generated default password is. Changing the password
	// (or deleting the generated Secret) rotates it: see passwordGracePeriod.
	// +optional
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`

	// keys the user may read and write, as glob-style patterns (app:*);
	// none without it. "*" is every key.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[^\s]+$`
	Keys []string `json:"keys,omitempty"`

	// channels the user may publish and subscribe to, as glob-style
	// patterns; none without it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[^\s]+$`
	Channels []string `json:"channels,omitempty"`

	// commands are ACL command rules applied in order, starting from none:
	// +@category or -@category (+@read, +@write, -@dangerous), +command or
	// -command, +command|subcommand (+config|get).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[+-](@[a-z]+|[a-z][a-z0-9_-]*(\|[a-z0-9_-]+)?)$`
	Commands []string `json:"commands,omitempty"`

	// enabled: false keeps the user but refuses its sign-ins and closes its
	// connections.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`
}

// SecretKeyRef is a key of a Secret in the RedisPersistence's namespace.
type SecretKeyRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the Secret.
	// +optional
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// TLSSpec is where the server's certificate comes from, and whether clients
// need one of their own.
// +kubebuilder:validation:XValidation:rule="has(self.secretName) != has(self.issuerRef)",message="spec.tls needs exactly one of secretName (a kubernetes.io/tls Secret of yours with tls.crt, tls.key and ca.crt) or issuerRef (a cert-manager Issuer or ClusterIssuer the operator asks for a Certificate)"
type TLSSpec struct {
	// secretName is a Secret in the RedisPersistence's namespace with the
	// keys tls.crt (the server's certificate chain), tls.key (its private
	// key) and ca.crt (the CA that signed it and, with clientAuth, the
	// clients' certificates). When its content changes, the operator has the
	// running server load the new files once the kubelet has updated them.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// issuerRef is a cert-manager issuer: the operator creates the
	// Certificate `<name>-tls` (Secret `<name>-tls`) for the instance's Service
	// and pod names, which cert-manager issues and renews. It needs
	// cert-manager's CRDs in the cluster; the TLSReady condition says when
	// they are missing. The issuer must put ca.crt into the Secret (a CA or
	// self-signed issuer does).
	// +optional
	IssuerRef *IssuerRef `json:"issuerRef,omitempty"`

	// clientAuth requires every client to present a certificate signed by
	// the CA in ca.crt (tls-auth-clients yes). The exporter, the probes, the
	// operator, replicas, Sentinels and benchmark runners present the
	// server's own certificate.
	// +optional
	ClientAuth bool `json:"clientAuth,omitempty"`
}

// IssuerKind is the kind of a cert-manager issuer.
// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
type IssuerKind string

const (
	// IssuerNamespaced is an Issuer in the RedisPersistence's namespace.
	IssuerNamespaced IssuerKind = "Issuer"
	// IssuerCluster is a ClusterIssuer.
	IssuerCluster IssuerKind = "ClusterIssuer"
)

// IssuerRef names a cert-manager issuer.
type IssuerRef struct {
	// name of the issuer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// kind of the issuer: Issuer (in the RedisPersistence's namespace) or
	// ClusterIssuer.
	// +optional
	// +kubebuilder:default=Issuer
	Kind IssuerKind `json:"kind,omitempty"`

	// group of the issuer, for external issuers; cert-manager's own by default.
	// +optional
	// +kubebuilder:default="cert-manager.io"
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
}

// NetworkPolicySpec configures the instance's NetworkPolicy. It admits to the
// server port the clients, the operator and the RedisBenchmark runners that
// target the instance, to the exporter port the Prometheus the operator's
// --prometheus-* flags select (the chart's networkPolicy.prometheus), and
// nothing else. It takes effect only where the cluster's network plugin
// enforces NetworkPolicies.
type NetworkPolicySpec struct {
	// enabled makes the NetworkPolicy. Empty means the operator's default
	// (--network-policy, the chart's networkPolicy.enabled), except on an
	// instance that ran before the operator made NetworkPolicies (the
	// annotation uringredis.io/predates-closed-defaults lists networkPolicy),
	// which gets none until this is set or the annotation removed.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// clients may connect to the server port. Empty means the pods of the
	// instance's namespace labelled `uringredis.io/client: <name>`.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Clients []networkingv1.NetworkPolicyPeer `json:"clients,omitempty"`
}

// ExporterSpec configures the redis_exporter sidecar.
type ExporterSpec struct {
	// enabled runs the sidecar.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// image overrides the exporter image (the operator's --exporter-image
	// flag). It pins the sidecar: a change of the operator's default leaves it alone.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// resources of the sidecar.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// MonitoringSpec configures Prometheus Operator objects.
type MonitoringSpec struct {
	// podMonitor creates a PodMonitor that scrapes the exporter. It is created
	// only when the cluster serves the PodMonitor kind.
	// +optional
	// +kubebuilder:default={}
	PodMonitor PodMonitorSpec `json:"podMonitor,omitempty"`
}

// PodMonitorSpec configures the PodMonitor.
type PodMonitorSpec struct {
	// enabled creates the PodMonitor.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// interval between scrapes.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	Interval string `json:"interval,omitempty"`

	// labels added to the PodMonitor, such as the `release` label a Prometheus
	// selects monitors by.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Labels map[string]string `json:"labels,omitempty"`
}

// Condition types of a RedisPersistence.
const (
	// ConditionReady is true when the server serves with the requested persistence.
	ConditionReady = "Ready"
	// ConditionScheduled is true when the server's pod is bound to an eligible node.
	ConditionScheduled = "Scheduled"
	// ConditionStorageReady is true when the data directory is on a suitable
	// filesystem, and for a durable mode (aof fsync: always, uring ack:
	// durable) on a volume that keeps fdatasync's promise: false with
	// WriteBarrierDisabled on a mount without write barriers over a volatile
	// write cache.
	ConditionStorageReady = "StorageReady"
	// ConditionUringActive is true when the server writes its AOF through io_uring (mode: uring only).
	ConditionUringActive = "UringActive"
	// ConditionStorageResized is true when the data volume's claim has the
	// size spec.storage.size asks for (claimed volumes only).
	ConditionStorageResized = "StorageResized"
	// ConditionDegraded is true while the server container keeps restarting:
	// it crashed, was OOM-killed or exited within the last ten minutes.
	ConditionDegraded = "Degraded"
	// ConditionClusterHealthy is true when every server of a cluster
	// (spec.cluster) reports cluster_state:ok and knows every other.
	ConditionClusterHealthy = "ClusterHealthy"
	// ConditionSlotsCovered is true when the cluster's 16384 hash slots are
	// each served by a primary that is not failing, and none is being moved.
	ConditionSlotsCovered = "SlotsCovered"
	// ConditionReplicating is true when the primary Sentinel names answers as
	// the primary and every replica's link to it is up (spec.replicas above 1
	// only).
	ConditionReplicating = "Replicating"
	// ConditionUpToDate is true when the pod template is the one the operator
	// builds today; false while an upgrade of the operator's making (its
	// default images, a new operator version) waits for its turn
	// (UpgradePending), rolls (Upgrading) or did not become Ready in time
	// (UpgradeStalled: no other upgrade starts until it is Ready or the
	// annotation uringredis.io/release-upgrade releases it): the operator
	// upgrades at most --max-concurrent-upgrades instances at a time.
	ConditionUpToDate = "UpToDate"
	// ConditionUsersReady is true when every running server has the users
	// of spec.users with their passwords and rules (spec.users only): false
	// with the Secret that is missing, or the server's own error for a rule
	// it refuses.
	ConditionUsersReady = "UsersReady"
	// ConditionTLSReady is true when every running server serves the
	// certificate spec.tls's Secret holds (spec.tls only): false while the
	// Secret or cert-manager's Certificate is missing, or while a new
	// certificate waits for the kubelet to update the server's files.
	ConditionTLSReady = "TLSReady"
	// ConditionConfigApplied is true when every running server has the
	// runtime options of the spec (status.appliedConfigHash is the
	// ConfigMap's): false while a server that runs does not answer or
	// refuses one, so a spec change that has not reached the servers shows.
	ConditionConfigApplied = "ConfigApplied"
)

// ServerTermination is how the server container last ended.
type ServerTermination struct {
	// reason the container runtime gives: Error, OOMKilled, Completed.
	// +optional
	Reason string `json:"reason,omitempty"`
	// exitCode of the server process; 128+n when signal n killed it.
	ExitCode int32 `json:"exitCode"`
	// signal that killed the server process, 0 when it exited.
	// +optional
	Signal int32 `json:"signal,omitempty"`
	// finishedAt is when the container ended.
	FinishedAt metav1.Time `json:"finishedAt"`
}

// StorageStatus is what the prepare container measured on the data volume.
// Latencies are durations (such as "410µs" or "1.89ms"), rounded to the
// microsecond.
type StorageStatus struct {
	// filesystem of the data directory (ext4, xfs, btrfs, tmpfs, ...).
	// +optional
	Filesystem string `json:"filesystem,omitempty"`

	// mountOptions of the data directory's mount: its per-mount options, then
	// the filesystem's (where ext4 lists nobarrier and a data= journal mode
	// other than ordered), at most 512 characters.
	// +optional
	MountOptions string `json:"mountOptions,omitempty"`

	// writeCache of the block device under the volume, as the kernel sees it:
	// "write back" (a volatile cache, which fdatasync flushes unless the mount
	// disables write barriers), "write through" (the kernel sends no flushes),
	// or "unknown" (no block device, or sysfs unreadable).
	// +optional
	WriteCache string `json:"writeCache,omitempty"`

	// fsyncP50 is the median time of a 4 KiB write followed by fdatasync on
	// the volume, as the server lays out its log: overwriting a file
	// zero-written ahead of time (aof-preallocate, the default), so that the
	// fdatasync commits no file metadata. It is what a durable mode pays per
	// batch of writes. (Images before the preallocated layout measured
	// appending writes only; then this is that figure.)
	// +optional
	FsyncP50 *metav1.Duration `json:"fsyncP50,omitempty"`

	// fsyncP99 is the 99th percentile of the same (the slowest sample when
	// fewer than 100 were taken).
	// +optional
	FsyncP99 *metav1.Duration `json:"fsyncP99,omitempty"`

	// appendFsyncP50 is the median time of a 4 KiB appending write followed
	// by fdatasync: what a log that grows by appending pays (upstream's layout,
	// aof-preallocate no), every fdatasync also committing the file's size.
	// +optional
	AppendFsyncP50 *metav1.Duration `json:"appendFsyncP50,omitempty"`

	// appendFsyncP99 is the 99th percentile of the same.
	// +optional
	AppendFsyncP99 *metav1.Duration `json:"appendFsyncP99,omitempty"`

	// parallelFsyncsPerSecond is how many overwrite+fdatasync pairs per second
	// four writers completed together: the volume's rate with several
	// fdatasyncs in flight.
	// +optional
	ParallelFsyncsPerSecond int32 `json:"parallelFsyncsPerSecond,omitempty"`

	// samples is how many write+fdatasync pairs the probe timed for fsyncP50
	// and fsyncP99, in about a second (at most 20000).
	// +optional
	Samples int32 `json:"samples,omitempty"`

	// probeError says why the latency could not be measured (a full or
	// read-only volume); the server starts anyway.
	// +optional
	ProbeError string `json:"probeError,omitempty"`

	// measuredAt is when the probe ended.
	// +optional
	MeasuredAt *metav1.Time `json:"measuredAt,omitempty"`
}

// ServerRole is a replicated server's role, and the value of the pod label
// uringredis.io/role.
type ServerRole string

const (
	// RolePrimary takes writes; the Service `<name>` selects it.
	RolePrimary ServerRole = "primary"
	// RoleReplica copies the primary; the Service `<name>-replicas` selects it.
	RoleReplica ServerRole = "replica"
)

// ReplicaStatus is one server of a replicated instance, as its INFO
// replication reports it.
type ReplicaStatus struct {
	// pod of the server.
	// +required
	Pod string `json:"pod"`
	// role the server reports: primary or replica; empty when it did not answer.
	// +optional
	Role ServerRole `json:"role,omitempty"`
	// offset is the server's replication offset: the primary's
	// master_repl_offset, a replica's slave_repl_offset.
	// +optional
	Offset int64 `json:"offset,omitempty"`
	// lag is how many bytes of the replication stream the replica has not
	// received yet (the primary's offset minus its own), 0 for the primary.
	// +optional
	Lag int64 `json:"lag,omitempty"`
	// linkUp is true when the replica's link to the primary is up
	// (master_link_status:up); always true for the primary.
	// +optional
	LinkUp bool `json:"linkUp,omitempty"`
}

// SwitchoverResult is how a switchover asked for ended.
// +kubebuilder:validation:Enum=Succeeded;Refused;Failed
type SwitchoverResult string

const (
	// SwitchoverSucceeded: the server asked for (or the one the Sentinels
	// chose, for "any") is the primary.
	SwitchoverSucceeded SwitchoverResult = "Succeeded"
	// SwitchoverRefused: the operator did not hand the primary role over,
	// as the request could not be met safely: an instance that is not
	// replicated, a pod that is not a replica of it, a replica that does not
	// replicate or did not catch up with the paused primary.
	SwitchoverRefused SwitchoverResult = "Refused"
	// SwitchoverFailed: the operator tried and the primary role did not
	// move (the Sentinels did not fail over, or promoted another server).
	SwitchoverFailed SwitchoverResult = "Failed"
)

// SwitchoverStatus is the operator's answer to a switchover asked for.
type SwitchoverStatus struct {
	// to is the request's uringredis.io/switchover-to: a server pod, or "any"
	// for the replica the Sentinels choose.
	// +kubebuilder:validation:MaxLength=253
	To string `json:"to"`
	// requestedAt is the request's uringredis.io/switchover-requested-at,
	// as given (empty when the request had none).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RequestedAt string `json:"requestedAt,omitempty"`
	// result: Succeeded, Refused or Failed.
	Result SwitchoverResult `json:"result"`
	// reason is why, in one CamelCase word (Switched, AlreadyPrimary,
	// NotReplicated, NoPrimary, NotAReplica, ReplicaNotReplicating,
	// NoReplicaReplicating, ReplicaBehind, NotPromotable, SentinelsNotReady,
	// PromotedAnother, SwitchoverFailed).
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// message says it for people.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// from is the primary when the operator took the request up.
	// +optional
	From string `json:"from,omitempty"`
	// primary is the primary after it: the server promoted when it
	// succeeded.
	// +optional
	Primary string `json:"primary,omitempty"`
	// finishedAt is when the operator answered.
	FinishedAt metav1.Time `json:"finishedAt"`
}

// ShardStatus is one shard of a cluster: the servers of the StatefulSet
// `<name>-s<index>`.
type ShardStatus struct {
	// index of the shard.
	// +required
	Index int32 `json:"index"`
	// slots its primary serves, as CLUSTER NODES writes them ("0-5461");
	// empty when it serves none.
	// +optional
	Slots string `json:"slots,omitempty"`
	// slotCount is how many slots that is.
	// +optional
	SlotCount int32 `json:"slotCount,omitempty"`
	// primary is the pod of its primary, as the cluster has it: the cluster
	// promotes a replica when a primary fails.
	// +optional
	Primary string `json:"primary,omitempty"`
	// servers are its servers, their roles, offsets, lag and links, as
	// status.replicas lists a replicated instance's.
	// +optional
	// +listType=map
	// +listMapKey=pod
	// +kubebuilder:validation:MaxItems=6
	Servers []ReplicaStatus `json:"servers,omitempty"`
}

// PodAntiAffinity is how strictly a replicated instance's servers are kept
// on different nodes.
// +kubebuilder:validation:Enum=Required;Preferred
type PodAntiAffinity string

const (
	// AntiAffinityRequired schedules no two servers of the instance on one node.
	AntiAffinityRequired PodAntiAffinity = "Required"
	// AntiAffinityPreferred spreads them where there are nodes enough, and
	// shares a node otherwise: losing that node loses several servers.
	AntiAffinityPreferred PodAntiAffinity = "Preferred"
)

// RedisPersistenceStatus is what the operator observed.
type RedisPersistenceStatus struct {
	// conditions: Ready, Scheduled, StorageReady, Degraded, UpToDate,
	// ConfigApplied, StorageResized (claimed volumes), for mode: uring,
	// UringActive, for spec.replicas above 1, Replicating, for spec.cluster,
	// ClusterHealthy and SlotsCovered, for spec.users, UsersReady and, for
	// spec.tls, TLSReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// node the server runs on.
	// +optional
	Node string `json:"node,omitempty"`

	// kernelVersion of that node.
	// +optional
	KernelVersion string `json:"kernelVersion,omitempty"`

	// filesystem of the data directory, as seen from inside the pod.
	// +optional
	Filesystem string `json:"filesystem,omitempty"`

	// storage is what the server pod's prepare container measured on the
	// data volume when the pod last started: the mount and the latency of a
	// durable append. It stays while no pod runs.
	// +optional
	Storage *StorageStatus `json:"storage,omitempty"`

	// recommendation is a hint, with its numbers, on the persistence mode
	// that fits the measured volume: a durable mode (aof fsync: always, uring
	// ack: durable) acknowledges at most about clients / fsync p50 writes per
	// second, and uring ack: fast loses about 5 x fsync p99 of acknowledged
	// writes in a power cut. The operator never applies it.
	// +optional
	Recommendation string `json:"recommendation,omitempty"`

	// engine the server writes its append-only file with (posix or uring), as
	// the server reports it; empty when no append-only file is written.
	// +optional
	Engine string `json:"engine,omitempty"`

	// appliedConfigHash identifies the runtime options (save, appendonly,
	// appendfsync, the aof-uring-* options, maxmemory and the spec.config
	// options the server takes live) the running server was last
	// confirmed to run; the operator sets a changed one with CONFIG SET instead
	// of restarting the server. It equals the ConfigMap's
	// uringredis.io/runtime-config-hash annotation once a change is applied.
	// +optional
	AppliedConfigHash string `json:"appliedConfigHash,omitempty"`

	// restarts of the server container in the current pod.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`

	// recovery is the backup spec.bootstrap.recovery restores, once the
	// operator found it Completed.
	// +optional
	Recovery *RecoveryStatus `json:"recovery,omitempty"`

	// lastBackup is the newest Completed RedisBackup of this instance, by
	// point; the RedisBackups hold the others.
	// +optional
	LastBackup *LastBackupStatus `json:"lastBackup,omitempty"`

	// archive is how far the AOF archive of spec.backup.archive reaches,
	// as the operator last read it from the store.
	// +optional
	Archive *ArchiveStatus `json:"archive,omitempty"`

	// lastTermination is how the server container last ended, in this pod or
	// an earlier one.
	// +optional
	LastTermination *ServerTermination `json:"lastTermination,omitempty"`

	// endpoint clients connect to (the client Service, host:port).
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// image is the server image the pod runs, read from the running pod: while
	// a new image rolls out it still names the one being replaced, and while
	// no server container runs it keeps the last one seen running.
	// +optional
	Image string `json:"image,omitempty"`

	// primary is the pod of the current primary of a replicated instance: the
	// one the Sentinels name, once it confirms the role itself. The operator
	// labels it uringredis.io/role: primary, which the Service `<name>` selects;
	// it never chooses a primary itself.
	// +optional
	Primary string `json:"primary,omitempty"`

	// switchover answers the last switchover asked for with the annotations
	// uringredis.io/switchover-to and uringredis.io/switchover-requested-at
	// (`kubectl uring switchover` sets them): a request whose two values
	// equal to and requestedAt here is answered, and the operator does not
	// act on it again; the annotations stay, so that a GitOps tool that
	// applies them finds nothing changed.
	// +optional
	Switchover *SwitchoverStatus `json:"switchover,omitempty"`

	// shards are a cluster's shards (spec.cluster), as the operator last
	// read them from its servers (CLUSTER NODES).
	// +optional
	// +listType=map
	// +listMapKey=index
	// +kubebuilder:validation:MaxItems=64
	Shards []ShardStatus `json:"shards,omitempty"`

	// replicas are the servers of a replicated instance, by pod.
	// +optional
	// +listType=map
	// +listMapKey=pod
	// +kubebuilder:validation:MaxItems=9
	Replicas []ReplicaStatus `json:"replicas,omitempty"`

	// podAntiAffinity is how the servers of a replicated instance are kept
	// apart: Required when there are at least as many eligible nodes as
	// servers, Preferred (they may share a node) otherwise.
	// +optional
	PodAntiAffinity PodAntiAffinity `json:"podAntiAffinity,omitempty"`

	// exporterImage is the redis_exporter sidecar image the pod runs, read like
	// image; empty when the pod runs no sidecar.
	// +optional
	ExporterImage string `json:"exporterImage,omitempty"`

	// tls is the certificate the servers serve (spec.tls only).
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// phase sums up the conditions in one word for people and the PHASE
	// column: Pending, Progressing, Ready, Degraded or Failed, or what an
	// instance that has served goes through: Scaling, Upgrading or
	// SwitchingOver (the user guide's RedisPersistence page says what leads
	// to each). Automation should read the conditions, which say why.
	// +optional
	Phase InstancePhase `json:"phase,omitempty"`

	// instances is how many server pods the StatefulSet runs now, ready or
	// not: the current count of the scale subresource (kubectl scale, a
	// HorizontalPodAutoscaler), whose desired count is spec.replicas. The
	// Sentinels are not counted.
	// +optional
	Instances int32 `json:"instances,omitempty"`

	// readyInstances is how many server pods are Ready.
	// +optional
	ReadyInstances int32 `json:"readyInstances,omitempty"`

	// ready is readyInstances/spec.replicas ("2/3"), for the READY column of
	// kubectl get: ready servers of those asked for, as Deployments and
	// StatefulSets show them. Read readyInstances and instances instead of
	// parsing it.
	// +optional
	Ready string `json:"ready,omitempty"`

	// selector is the label selector of the server pods, as a string: the
	// scale subresource's selector, which a HorizontalPodAutoscaler reads
	// the pods' metrics by.
	// +optional
	Selector string `json:"selector,omitempty"`
}

// InstancePhase sums up a RedisPersistence's conditions in one word.
type InstancePhase string

const (
	// PhasePending waits for something outside the operator: a node to
	// schedule on, the password or TLS Secret, cert-manager.
	PhasePending InstancePhase = "Pending"
	// PhaseProgressing brings the servers to the spec: a rollout, a mode
	// change, a server starting.
	PhaseProgressing InstancePhase = "Progressing"
	// PhaseReady serves as asked.
	PhaseReady InstancePhase = "Ready"
	// PhaseDegraded serves, impaired: the server restarted in the last 10
	// minutes, replication is broken, io_uring fell back to posix, or an
	// operator upgrade stalled.
	PhaseDegraded InstancePhase = "Degraded"
	// PhaseFailed does not serve, and waiting will not fix it: the server
	// crashed, the volume does not keep the durability asked for, the TLS
	// Secret cannot serve, objects could not be applied, a mode change is
	// blocked.
	PhaseFailed InstancePhase = "Failed"
	// PhaseScaling adds or removes servers or shards of an instance that
	// has served: from the scale until the new pods are Ready, slots
	// included.
	PhaseScaling InstancePhase = "Scaling"
	// PhaseUpgrading rolls the pods of an instance that has served onto a
	// new pod template (an image, resources, a startup option, an operator
	// upgrade), until every pod runs it and is Ready.
	PhaseUpgrading InstancePhase = "Upgrading"
	// PhaseSwitchingOver hands the primary role to a replica before the
	// primary restarts or is removed, or on request; it lasts seconds.
	PhaseSwitchingOver InstancePhase = "SwitchingOver"
)

// TLSStatus is the certificate the servers serve, as the operator read it
// back from them over TLS.
type TLSStatus struct {
	// secretName is the Secret the certificate comes from.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// notAfter is when the served certificate expires.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
	// lastRotation is when the operator last had the running servers load a
	// new certificate from the Secret (CONFIG SET tls-cert-file, without a
	// restart).
	// +optional
	LastRotation *metav1.Time `json:"lastRotation,omitempty"`
}

// The printer columns: kubectl get rp shows at most eight (NAME included),
// -o wide adds the rest. READY is status.ready because a printer column
// cannot join two fields into "x/y". The scale subresource makes kubectl
// scale and HorizontalPodAutoscalers work on spec.replicas, with every CEL
// rule of the spec applied to the scaled object.

// RedisPersistence is one Redis server and the way it keeps its data.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 52",message="a RedisPersistence name is at most 52 characters: its pods carry the label controller-revision-hash=<name>-<10 characters>, at most 63"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.replicas) || self.spec.replicas == 1 || self.metadata.name.size() <= 43",message="a replicated RedisPersistence (spec.replicas above 1) has a name of at most 43 characters: its Sentinels' pods carry the label controller-revision-hash=<name>-sentinel-<10 characters>, at most 63"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="a RedisPersistence name starts with a lower-case letter and holds only lower-case letters, digits and '-' (no '.'): it names the Services <name> and <name>-headless, which must be DNS labels"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.instances,selectorpath=.status.selector
// +kubebuilder:resource:shortName=rp,categories=uringredis
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=`.status.engine`
// +kubebuilder:printcolumn:name="Primary",type=string,JSONPath=`.status.primary`
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`,priority=1
// +kubebuilder:printcolumn:name="FS",type=string,JSONPath=`.status.filesystem`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.image`,priority=1
// +kubebuilder:printcolumn:name="FsyncP99",type=string,JSONPath=`.status.storage.fsyncP99`,priority=1
type RedisPersistence struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   RedisPersistenceSpec   `json:"spec"`
	Status RedisPersistenceStatus `json:"status,omitempty"`
}

// SwitchesOverOnUpdate says whether a change that restarts rp's servers
// switches the primary over before it restarts it: a replicated instance,
// or a sharded one with replicas in its shards, whose spec.updateStrategy
// is switchover, the default even for an object that skipped defaulting.
func (rp *RedisPersistence) SwitchesOverOnUpdate() bool {
	if rp.Spec.UpdateStrategy == UpdateRestart {
		return false
	}
	if c := rp.Spec.Cluster; c != nil {
		// replicasPerShard defaults to 1.
		return c.ReplicasPerShard == nil || *c.ReplicasPerShard > 0
	}
	return rp.Spec.Replicas > 1
}

// RedisPersistenceList is a list of RedisPersistence.
// +kubebuilder:object:root=true
type RedisPersistenceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisPersistence `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RedisPersistence{}, &RedisPersistenceList{})
}
