package v1alpha1

import (
	"cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupSpec is where an instance's backups go. A backup is a RedisBackup
// naming the instance; the operator takes it with a Job that streams a
// snapshot from the instance to the destination.
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || has(self.schedule)",message="spec.backup.retention applies to scheduled backups: set spec.backup.schedule too"
type BackupSpec struct {
	// destination is the object store the backups are written to.
	// +required
	Destination BackupDestination `json:"destination"`
	// schedule is when the operator takes a backup by itself: a cron
	// expression of five fields in UTC ("0 3 * * *"), or @hourly, @daily,
	// @weekly, @monthly or `@every <duration>`. Each run is a RedisBackup named
	// `<name>-<yyyymmddhhmm>` (the instance's name cut to 43 characters) with
	// the label uringredis.io/scheduled-for. Empty: only the RedisBackups you
	// create.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every [0-9]+[smh]([0-9]+[smh])*|[0-9*/,-]+ [0-9*/,-]+ [0-9*/,?,-]+ [0-9A-Za-z*/,-]+ [0-9A-Za-z*/,?,-]+)$`
	Schedule string `json:"schedule,omitempty"`
	// retention is how many scheduled backups are kept, and for how long.
	// The operator deletes a scheduled RedisBackup that falls out of it, and
	// its objects in the store. A backup you create is kept by count never,
	// but maxAge is its default expiry (RedisBackup spec.expiresAfter).
	// +optional
	Retention *BackupRetention `json:"retention,omitempty"`
	// archive ships the AOF to the destination continuously: every base the
	// server writes and the new entries of its INCR files, so that a new
	// instance can be recovered to any second the archive covers
	// (spec.bootstrap.recovery.archive). Modes aof and uring only. It runs
	// as the archive container beside the server, which writes timestamp
	// annotations into the AOF (aof-timestamp-enabled yes) while it is set.
	// +optional
	Archive *ArchiveSpec `json:"archive,omitempty"`
	// compression is what the agent compresses snapshots and the archive's
	// INCR segments with before they go to the store: zstd (the default;
	// about 8x on an RDB and 10x on an AOF of JSON-like values, at about
	// 200 MB/s of one core, which the archive container spends in the
	// server's pod) or none. AOF bases go as the server wrote them. A
	// restore reads either, whatever this says now.
	// +optional
	// +kubebuilder:default=zstd
	Compression BackupCompression `json:"compression,omitempty"`
	// verify restores the newest backup into a temporary instance on a
	// schedule and checks it against what the backup recorded: its key
	// counts and a sample of its keys. The result is in the RedisBackup's
	// status.verification and the metric
	// uringredis_backup_verification_failed.
	// +optional
	Verify *BackupVerifySpec `json:"verify,omitempty"`
}

// BackupCompression is what backups and archive segments are compressed
// with.
// +kubebuilder:validation:Enum=none;zstd
type BackupCompression string

const (
	CompressionNone BackupCompression = "none"
	CompressionZstd BackupCompression = "zstd"
)

// ArchiveSpec is how the AOF is archived.
type ArchiveSpec struct {
	// interval is how often the archive container ships the new entries of
	// the open INCR file: writes of the last interval are the most a lost
	// volume can take with it from the archive (the archive's recovery point
	// objective). A rewrite's base and a closed INCR ship at the next pass.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="archive.interval is between 1s and 1h"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// maxAge bounds how far back the archive reaches, with or without
	// backups in the store: what only a recovery to a point older than
	// maxAge needs is deleted. The archive restores from its own bases (the
	// AOF base the server writes at its first start and at each rewrite),
	// so it keeps the newest base at or before now - maxAge and everything
	// after it: the first recoverable point moves forward, to at most
	// maxAge plus the time between two rewrites ago. A server that never
	// rewrites its AOF keeps its whole log. Empty: the archive reaches back
	// as far as the oldest backup in the store, and with none it keeps
	// everything.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="archive.maxAge is at least 1h"
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BackupRetention bounds the scheduled backups kept. The newest completed
// one is always kept.
type BackupRetention struct {
	// count is how many completed scheduled backups are kept.
	// +optional
	// +kubebuilder:default=7
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Count int32 `json:"count,omitempty"`
	// maxAge deletes completed scheduled backups whose point is older. It
	// is also the expiry of a backup you create without spec.expiresAfter,
	// fixed when that backup completes.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="retention.maxAge is at least 1h"
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BackupDestination is an object store. S3-compatible stores (AWS S3,
// MinIO, SeaweedFS, Ceph radosgw) are the one kind today.
type BackupDestination struct {
	// s3 is an S3-compatible object store.
	// +required
	S3 S3Destination `json:"s3"`
}

// ServerSideEncryption is what the object store encrypts backups with.
// +kubebuilder:validation:Enum=AES256
type ServerSideEncryption string

const (
	// SSES3 asks the store to encrypt each object with its own keys (SSE-S3).
	SSES3 ServerSideEncryption = "AES256"
)

// S3Destination is a bucket, and a path in it, on an S3-compatible store.
type S3Destination struct {
	// endpoint is the store's URL: https://host[:port], or http:// for a
	// store inside the cluster that serves no TLS.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'https' || url(self).getScheme() == 'http') && url(self).getHostname() != '' && (url(self).getEscapedPath() == '' || url(self).getEscapedPath() == '/') && !self.contains('?')",message="endpoint is the object store's URL, https://host[:port] or http://host[:port], without a path or query (the bucket and path have their own fields)"
	Endpoint string `json:"endpoint"`
	// bucket is the bucket's name. The operator does not create it.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`
	// path is the prefix of every object of this instance in the bucket;
	// by default `<namespace>/<name>`. Two instances must not share one.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.endsWith('/') && !self.contains('//')",message="path is a prefix like team/cache: no leading or trailing '/' and no empty segment"
	Path string `json:"path,omitempty"`
	// region is the bucket's region; stores without regions accept the
	// default.
	// +optional
	// +kubebuilder:default=us-east-1
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`
	// credentials names the Secret with the store's access key.
	// +required
	Credentials S3Credentials `json:"credentials"`
	// caSecret names a Secret with the PEM certificate authority that signed
	// the endpoint's certificate, for a private store; by default the
	// system's authorities are trusted.
	// +optional
	CASecret *CASecretRef `json:"caSecret,omitempty"`
	// serverSideEncryption asks the store to encrypt the objects it keeps.
	// +optional
	ServerSideEncryption ServerSideEncryption `json:"serverSideEncryption,omitempty"`
}

// The defaults the API server fills in for an object store; the methods
// below give them for an object that did not pass through it.
const (
	DefaultS3Region       = "us-east-1"
	DefaultAccessKeyIDKey = "AWS_ACCESS_KEY_ID"
	DefaultSecretKeyKey   = "AWS_SECRET_ACCESS_KEY"
	DefaultCAKey          = "ca.crt"
)

// RegionOrDefault is the bucket's region.
func (s *S3Destination) RegionOrDefault() string { return cmp.Or(s.Region, DefaultS3Region) }

// Keys are the Secret's keys for the access key ID and the secret access key.
func (c *S3Credentials) Keys() (accessKeyID, secretAccessKey string) {
	return cmp.Or(c.AccessKeyIDKey, DefaultAccessKeyIDKey), cmp.Or(c.SecretAccessKeyKey, DefaultSecretKeyKey)
}

// KeyOrDefault is the Secret's key for the certificate authority.
func (c *CASecretRef) KeyOrDefault() string { return cmp.Or(c.Key, DefaultCAKey) }

// S3Credentials names the Secret that holds an access key.
type S3Credentials struct {
	// secretName is the Secret in the instance's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
	// accessKeyIDKey is the Secret's key for the access key ID.
	// +optional
	// +kubebuilder:default=AWS_ACCESS_KEY_ID
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty"`
	// secretAccessKeyKey is the Secret's key for the secret access key.
	// +optional
	// +kubebuilder:default=AWS_SECRET_ACCESS_KEY
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
}

// CASecretRef is a certificate authority in a Secret.
type CASecretRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the Secret.
	// +optional
	// +kubebuilder:default=ca.crt
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// BackupPhase is where a RedisBackup stands.
type BackupPhase string

const (
	// BackupPending waits for its instance: it is missing, has no
	// spec.backup, or has no server ready.
	BackupPending BackupPhase = "Pending"
	// BackupRunning has a Job streaming the snapshot.
	BackupRunning BackupPhase = "Running"
	// BackupCompleted is in the object store, verified.
	BackupCompleted BackupPhase = "Completed"
	// BackupFailed ran out of attempts; status.message says why.
	BackupFailed BackupPhase = "Failed"
)

// BackupTarget is which server a backup is taken from.
// +kubebuilder:validation:Enum=PreferReplica;Primary
type BackupTarget string

const (
	// TargetPreferReplica takes the snapshot from a ready replica that is in
	// sync when there is one, so the primary does not fork for it.
	TargetPreferReplica BackupTarget = "PreferReplica"
	// TargetPrimary takes it from the primary.
	TargetPrimary BackupTarget = "Primary"
)

// RedisBackupSpec names the instance to back up, and when the backup
// expires.
// +kubebuilder:validation:XValidation:rule="self.redisPersistence == oldSelf.redisPersistence && self.target == oldSelf.target",message="spec is immutable but for expiresAfter: a backup is of the instance it named when it ran; create a new RedisBackup"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.expiresAfter) || has(self.expiresAfter)",message="spec.expiresAfter cannot be removed once set: set a longer one to keep the backup longer"
type RedisBackupSpec struct {
	// redisPersistence is the instance, in this namespace, whose data is
	// backed up to its spec.backup.destination.
	// +required
	RedisPersistence LocalObjectReference `json:"redisPersistence"`
	// target is the server the snapshot comes from.
	// +optional
	// +kubebuilder:default=PreferReplica
	Target BackupTarget `json:"target,omitempty"`
	// expiresAfter is how long after its point a completed backup is kept:
	// then the operator deletes its objects from the store and the
	// RedisBackup, and the archive's pruning moves past it. Empty: for a
	// backup you create, the instance's spec.backup.retention.maxAge as it
	// is when the backup completes, else kept until you delete it; for a
	// scheduled one, retention alone. status.expiresAt says when. It may be
	// set or changed after the backup ran, not removed; there is no
	// "never": a long duration (87600h) keeps a backup for ten years. A
	// backup that expires holds the finalizer uringredis.io/backup-objects,
	// so deleting it before then deletes its objects too. Failed backups
	// do not expire.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="expiresAfter is at least 1h"
	ExpiresAfter *metav1.Duration `json:"expiresAfter,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RedisBackupStatus is what a backup holds and where it is.
type RedisBackupStatus struct {
	// phase is Pending, Running, Completed or Failed.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// conditions: Complete, with the reason the backup is not (yet).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// message is the last error, or what the backup waits for.
	// +optional
	Message string `json:"message,omitempty"`
	// job is the Job that takes the backup.
	// +optional
	Job string `json:"job,omitempty"`
	// sourcePod is the server the snapshot came from.
	// +optional
	SourcePod string `json:"sourcePod,omitempty"`
	// startedAt is when the Job started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// completedAt is when the backup was verified in the store.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// point is the time the snapshot is consistent at: the backup holds
	// every write acknowledged before it and none after.
	// +optional
	Point *metav1.Time `json:"point,omitempty"`
	// location is the snapshot's object, `s3://<bucket>/<key>`.
	// +optional
	Location string `json:"location,omitempty"`
	// size of the snapshot in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
	// sha256 of the snapshot, checked before any restore uses it.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// serverVersion is the version of the server it was taken from.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`
	// mode is the instance's spec.mode when the backup was taken.
	// +optional
	Mode PersistenceMode `json:"mode,omitempty"`
	// expiresAt is when the operator deletes this backup and its objects:
	// point + spec.expiresAfter, or the default that spec.expiresAfter
	// describes. Empty: it does not expire.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// keys is how many keys the snapshot holds, counted from the snapshot
	// as it was taken. Empty for a backup taken by an older agent.
	// +optional
	Keys *int64 `json:"keys,omitempty"`
	// verification is the backup's last verification (spec.backup.verify
	// of its instance).
	// +optional
	Verification *BackupVerification `json:"verification,omitempty"`
}

// RedisBackup is one backup of a RedisPersistence: a consistent snapshot
// (RDB) streamed to the instance's object store and checksummed.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 56",message="a RedisBackup name is at most 56 characters: its Job is <name>-backup, and a Job's name is a label value of at most 63"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rbak,categories=uringredis
// +kubebuilder:printcolumn:name="Instance",type=string,JSONPath=`.spec.redisPersistence.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Point",type=date,JSONPath=`.status.point`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.size`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.verification.result`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Keys",type=integer,JSONPath=`.status.keys`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.sourcePod`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
type RedisBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec RedisBackupSpec `json:"spec"`
	// +optional
	Status RedisBackupStatus `json:"status,omitempty"`
}

// RedisBackupList is a list of RedisBackups.
// +kubebuilder:object:root=true
type RedisBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisBackup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RedisBackup{}, &RedisBackupList{})
}

// BootstrapSpec is where a new instance's data comes from.
type BootstrapSpec struct {
	// recovery restores a backup into the first server's volume before it
	// first starts; replicas copy it from that server.
	// +required
	Recovery RecoverySpec `json:"recovery"`
}

// RecoverySpec names the backup, or the archive and point, to restore.
// +kubebuilder:validation:XValidation:rule="[has(self.backup), has(self.storedBackup), has(self.archive)].filter(x, x).size() == 1",message="spec.bootstrap.recovery restores a backup, a backup found in the store, or an archive: set exactly one of backup, storedBackup and archive"
type RecoverySpec struct {
	// backup is a Completed RedisBackup in this namespace. Its snapshot is
	// read from the bucket and key of its status.location with this
	// instance's spec.backup.destination endpoint and credentials, checked
	// against its status.sha256 and the RDB's own checksum, and only then
	// put where the server loads it. A volume that already holds data is
	// never written: the restore fails and says so.
	// +optional
	Backup *LocalObjectReference `json:"backup,omitempty"`
	// storedBackup is a backup found in this instance's bucket by its
	// backup.json alone, with no RedisBackup object: the way back when the
	// namespace, or the whole Kubernetes cluster, that took it is gone. It is
	// read and checked as backup is.
	// +optional
	StoredBackup *StoredBackupRecovery `json:"storedBackup,omitempty"`
	// archive replays an instance's continuous AOF archive
	// (spec.backup.archive) up to a point in time: the latest base written
	// at or before it, and the INCR entries after that base cut at the
	// first second after targetTime.
	// +optional
	Archive *ArchiveRecovery `json:"archive,omitempty"`
}

// StoredBackupRecovery is a backup in the store: a backed-up instance's
// prefix, and the backup's name there or the newest.
type StoredBackupRecovery struct {
	// path is the backed-up instance's prefix in this instance's bucket, and
	// has no default: give that instance's spec.backup.destination.s3.path,
	// or `<namespace>/<name>` of that instance where it set none. Its
	// backups are the folders of <path>/backups/ that hold a backup.json.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.endsWith('/') && !self.contains('//')",message="path is a prefix like team/cache: no leading or trailing '/' and no empty segment"
	Path string `json:"path"`
	// name is the backup's name (the RedisBackup's that took it: the folder
	// under <path>/backups/). Empty: the newest backup there by the point
	// it is consistent at, as the operator finds it when this instance is
	// created; status.recovery then names it, and the instance keeps
	// restoring that one.
	// +optional
	// +kubebuilder:validation:MaxLength=56
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
}

// ArchiveRecovery is an archive and the point to recover it to.
type ArchiveRecovery struct {
	// path is the archived instance's prefix in this instance's bucket, and
	// has no default: give that instance's spec.backup.destination.s3.path,
	// or `<namespace>/<name>` of that instance where it set none. The
	// archived instance may be gone; its archive stays in the store.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.endsWith('/') && !self.contains('//')",message="path is a prefix like team/cache: no leading or trailing '/' and no empty segment"
	Path string `json:"path"`
	// targetTime is the point to recover to (RFC 3339). The AOF records
	// time in whole seconds: every write of the second targetTime falls in
	// is kept, and none of a later second. Empty: the latest point the
	// archive holds. The operator waits (WaitingForArchive) until the
	// archive reaches it, and refuses a time before its first base.
	// +optional
	TargetTime *metav1.Time `json:"targetTime,omitempty"`
}

// RecoveryStatus is the backup or archive an instance was, or is being,
// restored from, fixed when its servers are first made: the pods keep
// restoring exactly this into an empty volume even after the RedisBackup,
// or the archived instance, is gone.
type RecoveryStatus struct {
	// backup is the RedisBackup's name.
	// +optional
	Backup string `json:"backup,omitempty"`
	// location and sha256 are the snapshot's, from the backup's status.
	// +optional
	Location string `json:"location,omitempty"`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// archive is the archive replayed, `s3://<bucket>/<path>`.
	// +optional
	Archive string `json:"archive,omitempty"`
	// targetTime is the point it is replayed to; the latest point the
	// archive held when the operator checked it when the spec names none.
	// +optional
	TargetTime *metav1.Time `json:"targetTime,omitempty"`
	// restoredAt is when the instance was first Ready on the restored data:
	// from then on no server restores, whatever its volume holds.
	// +optional
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`
}

// LastBackupStatus is an instance's newest Completed RedisBackup.
type LastBackupStatus struct {
	// name is the RedisBackup's.
	Name string `json:"name"`
	// point is the instant the backup holds: every write acknowledged before
	// it.
	Point metav1.Time `json:"point"`
	// completedAt is when it was verified in the store.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// duration is how long it took, from its Job's start to the snapshot
	// verified in the store.
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// size is its snapshot's in the store, in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`
}

// ArchiveStatus is what the archive holds: the points a new instance can be
// recovered to (spec.bootstrap.recovery.archive) are those from
// firstRecoverableTime to lastArchivedTime.
type ArchiveStatus struct {
	// firstRecoverableTime is the point of the archive's oldest base.
	// +optional
	FirstRecoverableTime *metav1.Time `json:"firstRecoverableTime,omitempty"`
	// lastArchivedTime is when the archive last read the end of the
	// primary's AOF: every write before it is in the store.
	// +optional
	LastArchivedTime *metav1.Time `json:"lastArchivedTime,omitempty"`
	// timelines is how many AOF histories the archive holds: one per data
	// volume that served as the primary.
	// +optional
	Timelines int32 `json:"timelines,omitempty"`
	// storedBackups is how many completed backups the store holds under
	// this instance's path (backups/*/backup.json, made by RedisBackups or
	// by an instance that had the path before), counted as the archive is
	// read. 0: the archive is the only copy of the data outside the
	// cluster, and nothing of it is pruned unless archive.maxAge is set.
	// +optional
	StoredBackups *int32 `json:"storedBackups,omitempty"`
	// checkedAt is when the operator read the archive.
	// +optional
	CheckedAt *metav1.Time `json:"checkedAt,omitempty"`
	// message is why the archive could not be read, or holds nothing yet.
	// +optional
	Message string `json:"message,omitempty"`
}
