// Package specstest holds the RedisPersistence fixtures the tests of
// internal/specs and controllers/ share: the golden cases, a replicated
// instance and the operator options they are rendered with.
package specstest

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// Options are the operator options the golden files are rendered with.
var Options = specs.Options{
	RedisImage:            "redis-uring:test",
	ExporterImage:         "oliver006/redis_exporter:test",
	AgentImage:            "uring-redis-operator:test",
	UringSeccompProfile:   "uring-redis/io_uring.json",
	LocalNVMeStorageClass: "uring-local-nvme",
	GP3StorageClass:       "uring-gp3",
	ImagePull:             specs.ImagePull{Policy: corev1.PullIfNotPresent, Secrets: []string{"registry-pull"}},
	NetworkPolicy:         NetworkPolicyOptions,
}

// NewRedisPersistence is a RedisPersistence as the API server returns it
// after defaulting, so builders see what they see in a cluster.
func NewRedisPersistence(spec v1alpha1.RedisPersistenceSpec) *v1alpha1.RedisPersistence {
	if spec.Storage != nil {
		storage := *spec.Storage
		if storage.Profile == "" {
			storage.Profile = v1alpha1.StorageCustom
		}
		if storage.Size == nil {
			storage.Size = ptr.To(resource.MustParse("8Gi"))
		}
		spec.Storage = &storage
	}
	return &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "apps", UID: "0a1b2c3d-0000-4000-8000-000000000001", Generation: 1},
		Spec:       spec,
	}
}

// GoldenCases cover every mode the product offers.
var GoldenCases = map[string]v1alpha1.RedisPersistenceSpec{
	"none":        {Mode: v1alpha1.ModeNone, Exporter: v1alpha1.ExporterSpec{Enabled: ptr.To(false)}, Auth: &v1alpha1.AuthSpec{Disabled: true}},
	"none-volume": {Mode: v1alpha1.ModeNone, Storage: &v1alpha1.StorageSpec{Profile: v1alpha1.StorageLocalNVMe}},
	"rdb": {Mode: v1alpha1.ModeRDB, RDB: &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 3600, Changes: 1}, {Seconds: 60, Changes: 10000}}},
		Storage: &v1alpha1.StorageSpec{Profile: v1alpha1.StorageCustom, StorageClassName: "standard"}},
	"aof-always":   {Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}, Storage: &v1alpha1.StorageSpec{Profile: v1alpha1.StorageGP3}},
	"aof-everysec": {Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}},
	"aof-no":       {Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncNo}},
	// A new instance restoring a backup from a private store.
	"uring-restore": {Mode: v1alpha1.ModeUring,
		Backup: &v1alpha1.BackupSpec{Destination: v1alpha1.BackupDestination{S3: v1alpha1.S3Destination{
			Endpoint: "https://s3.storage.svc:8333", Bucket: "backups", Region: "us-east-1",
			Credentials: v1alpha1.S3Credentials{SecretName: "s3", AccessKeyIDKey: "AWS_ACCESS_KEY_ID", SecretAccessKeyKey: "AWS_SECRET_ACCESS_KEY"},
			CASecret:    &v1alpha1.CASecretRef{Name: "store-ca", Key: "ca.crt"},
		}}},
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Backup: &v1alpha1.LocalObjectReference{Name: "nightly"}}}},
	// A new instance recovered from another's archive to a point in time,
	// archiving its own AOF.
	"aof-archive-recovery": {Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways},
		Backup: &v1alpha1.BackupSpec{
			Destination: v1alpha1.BackupDestination{S3: v1alpha1.S3Destination{
				Endpoint: "http://s3.storage.svc:8333", Bucket: "backups", Region: "us-east-1",
				Credentials: v1alpha1.S3Credentials{SecretName: "s3", AccessKeyIDKey: "AWS_ACCESS_KEY_ID", SecretAccessKeyKey: "AWS_SECRET_ACCESS_KEY"},
			}},
			Archive: &v1alpha1.ArchiveSpec{Interval: &metav1.Duration{Duration: 10 * time.Second}, MaxAge: &metav1.Duration{Duration: 168 * time.Hour}},
		},
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Archive: &v1alpha1.ArchiveRecovery{
			Path: "team/cache-before", TargetTime: &metav1.Time{Time: time.Date(2026, 11, 27, 6, 30, 0, 0, time.UTC)},
		}}}},
	"uring-durable": {Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, QueueDepth: 256, MaxWorkers: 2},
		Storage: &v1alpha1.StorageSpec{Profile: v1alpha1.StorageLocalNVMe, Size: ptr.To(resource.MustParse("20Gi"))},
		Auth:    &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"}}},
	"uring-fast": {Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckFast, QueueDepth: 1024, MaxWorkers: 4, MaxInFlight: ptr.To(resource.MustParse("4Mi"))},
		Placement: v1alpha1.PlacementSpec{MinKernelVersion: "6.8", NodeSelector: map[string]string{"node.kubernetes.io/instance-type": "i4i.large"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "redis", Effect: corev1.TaintEffectNoSchedule}}}},
	"aof-config": {Mode: v1alpha1.ModeAOF, Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
		Config: map[string]v1alpha1.ServerOptionValue{
			"maxmemory-policy": "allkeys-lru", "io-threads": "2", "notify-keyspace-events": "", "client-output-buffer-limit": "pubsub 32mb 8mb 60",
		}},
	"tls-secret":      {Mode: v1alpha1.ModeAOF, TLS: &v1alpha1.TLSSpec{SecretName: "cache-certs"}},
	"tls-client-auth": {Mode: v1alpha1.ModeUring, TLS: &v1alpha1.TLSSpec{IssuerRef: &v1alpha1.IssuerRef{Name: "ca", Kind: v1alpha1.IssuerCluster}, ClientAuth: true}},
	"uring-sqpoll": {Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, QueueDepth: 256, MaxWorkers: 2,
		SQPoll: &v1alpha1.SQPollSpec{Enabled: true, IdleMillis: ptr.To[int32](50), CPU: ptr.To[int32](1)}},
		Placement: v1alpha1.PlacementSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a"}}},
			}}}}}}},
}

// Password stands for the auth Secret's password in the golden files.
func Password(rp *v1alpha1.RedisPersistence) string {
	if specs.AuthSecretRef(rp) == nil {
		return ""
	}
	return "golden-password"
}

// NetworkPolicyOptions are the network policy options the chart's defaults give the operator.
var NetworkPolicyOptions = func() specs.NetworkPolicyOptions {
	opts, err := specs.ParseNetworkPolicyOptions(true, "uring-redis", "app.kubernetes.io/name=uring-redis-operator,app.kubernetes.io/instance=uring-redis", "", "app.kubernetes.io/name=prometheus")
	if err != nil {
		panic(err)
	}
	return opts
}()

// ReplicatedSpec is a three-server uring durable instance with a password.
var ReplicatedSpec = v1alpha1.RedisPersistenceSpec{
	Mode: v1alpha1.ModeUring, Replicas: 3, Sentinel: &v1alpha1.SentinelSpec{Count: 3, Quorum: 2},
	Uring:   &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, QueueDepth: 256, MaxWorkers: 2},
	Storage: &v1alpha1.StorageSpec{Profile: v1alpha1.StorageLocalNVMe},
	Auth:    &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"}},
}

// ClusterSpec is a three-shard uring durable cluster, a replica per shard,
// with a password.
var ClusterSpec = v1alpha1.RedisPersistenceSpec{
	Mode: v1alpha1.ModeUring, Cluster: &v1alpha1.ClusterSpec{Shards: 3, ReplicasPerShard: ptr.To[int32](1)},
	Uring:   &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, QueueDepth: 256, MaxWorkers: 2, AckReplicas: 1},
	Storage: &v1alpha1.StorageSpec{Profile: v1alpha1.StorageLocalNVMe},
	Auth:    &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"}},
}

// ContainerNamed is the container or init container name of sts's template.
func ContainerNamed(t *testing.T, sts *appsv1.StatefulSet, name string) corev1.Container {
	t.Helper()
	for _, c := range append(sts.Spec.Template.Spec.InitContainers, sts.Spec.Template.Spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("StatefulSet %s has no container %s", sts.Name, name)
	return corev1.Container{}
}
