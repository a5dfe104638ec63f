package specs

import (
	_ "embed"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Fixed facts about the pods the operator runs.
const (
	RedisPort    = 6379
	ExporterPort = 9121

	DataDir   = "/data"
	ConfigDir = "/etc/redis"
	RunDir    = "/run/redis"

	// The server and exporter images run as this user; fsGroup makes the data volume theirs.
	RedisUID = 999

	ContainerRedis    = "redis"
	ContainerExporter = "exporter"
	// ContainerPrepare reports the data directory's filesystem through its
	// termination message and writes the auth include file.
	ContainerPrepare = "prepare"

	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"

	AnnotationConfigHash = "uringredis.io/config-hash"
	AnnotationAuthHash   = "uringredis.io/auth-hash"
	// AnnotationMode on the ConfigMap is the mode whose files hold the data:
	// the operator writes a new mode there only once the running server has
	// switched to it.
	AnnotationMode = "uringredis.io/mode"
	// AnnotationRuntimeConfigHash on the ConfigMap identifies its runtime
	// options; status.appliedConfigHash equals it once the server runs them.
	AnnotationRuntimeConfigHash = "uringredis.io/runtime-config-hash"

	FieldOwner = "uring-redis-operator"
)

// ExporterScript is redis_exporter's --script: it turns the io_uring engine's
// INFO fields, which the exporter does not map, into redis_script_values.
//
//go:embed uring-info.lua
var ExporterScript string

const ExporterScriptFile = "uring-info.lua"

// Options are the operator-wide settings the builders need.
type Options struct {
	// RedisImage runs the server unless spec.image overrides it.
	RedisImage string
	// ExporterImage runs the redis_exporter sidecar unless spec.exporter.image overrides it.
	ExporterImage string
	// AgentImage holds the backup agent (cmd/uring-backup): the operator's
	// own image. Restores run it in the server pods.
	AgentImage string
	// UringSeccompProfile is the Localhost seccomp profile of uring pods, relative
	// to the kubelet's seccomp directory: RuntimeDefault plus io_uring_setup,
	// io_uring_enter and io_uring_register, which containerd >= 2.0 and
	// Docker >= 25 deny by default.
	UringSeccompProfile string
	// LocalNVMeStorageClass and GP3StorageClass back the storage profiles.
	LocalNVMeStorageClass string
	GP3StorageClass       string
	// ImagePull is how server pods pull their images.
	ImagePull ImagePull
	// NetworkPolicy configures the instances' NetworkPolicies.
	NetworkPolicy NetworkPolicyOptions
}

// ImagePull is how the pods the operator creates pull their images: the
// chart's global.imagePullPolicy and global.imagePullSecrets, passed as
// --image-pull-policy and --image-pull-secrets.
type ImagePull struct {
	// Policy of every container; empty leaves the API server's default
	// (IfNotPresent, Always for :latest).
	Policy corev1.PullPolicy
	// Secrets of every pod, by name. A pod reads them from its own
	// namespace, so each namespace with instances needs a copy.
	Secrets []string
}

// ApplyTo sets the pull policy of every container of pod and its pull secrets.
func (p ImagePull) ApplyTo(pod *corev1.PodSpec) {
	for _, containers := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range containers {
			containers[i].ImagePullPolicy = p.Policy
		}
	}
	for _, name := range p.Secrets {
		pod.ImagePullSecrets = append(pod.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
}

// KernelLabels are the node labels that carry a node's kernel major and minor version.
type KernelLabels struct {
	Major, Minor string
}

// Kernel version labels: Node Feature Discovery's and the operator's own node
// labeler's. The kernel requirement admits a node that either set of labels
// qualifies, so the pod template is the same whether NFD is installed, added
// later or removed: relabelling nodes never restarts a server.
var (
	NFDKernelLabels      = KernelLabels{Major: "feature.node.kubernetes.io/kernel-version.major", Minor: "feature.node.kubernetes.io/kernel-version.minor"}
	OperatorKernelLabels = KernelLabels{Major: "uringredis.io/kernel-version.major", Minor: "uringredis.io/kernel-version.minor"}
	KernelLabelSets      = []KernelLabels{NFDKernelLabels, OperatorKernelLabels}
)

func ConfigMapName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-config" }

func HeadlessServiceName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-headless" }

func SelectorLabels(rp *v1alpha1.RedisPersistence) map[string]string {
	return map[string]string{LabelName: "redis", LabelInstance: rp.Name}
}

func ObjectLabels(rp *v1alpha1.RedisPersistence) map[string]string {
	labels := SelectorLabels(rp)
	labels[LabelManagedBy] = FieldOwner
	labels[LabelComponent] = "server"
	return labels
}

func OwnerReference(rp *v1alpha1.RedisPersistence) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "RedisPersistence",
		Name:               rp.Name,
		UID:                rp.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

func ObjectMeta(rp *v1alpha1.RedisPersistence, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       rp.Namespace,
		Labels:          ObjectLabels(rp),
		OwnerReferences: []metav1.OwnerReference{OwnerReference(rp)},
	}
}

// MinKernel is the kernel a RedisPersistence needs, or "" for none.
func MinKernel(rp *v1alpha1.RedisPersistence) string {
	if v := rp.Spec.Placement.MinKernelVersion; v != "" {
		return v
	}
	if rp.Spec.Mode == v1alpha1.ModeUring {
		return "6.0"
	}
	return ""
}

func ExporterEnabled(rp *v1alpha1.RedisPersistence) bool {
	return ptr.Deref(rp.Spec.Exporter.Enabled, true)
}

func EnvVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// NetworkPolicyOptions are the operator-wide settings of the instances'
// NetworkPolicies.
type NetworkPolicyOptions struct {
	// Enabled is what an empty spec.NetworkPolicy.enabled means.
	Enabled bool
	// Operator selects the operator's own pods, which read INFO from and set
	// options on every server; nil when the operator does not run in a pod
	// it knows the labels of.
	Operator *networkingv1.NetworkPolicyPeer
	// Prometheus selects the pods that may scrape the exporter.
	Prometheus []networkingv1.NetworkPolicyPeer
}

// ReplicasOf is spec.replicas; 0 (an object that skipped defaulting) is 1.
func ReplicasOf(rp *v1alpha1.RedisPersistence) int32 {
	return max(rp.Spec.Replicas, 1)
}

func Replicated(rp *v1alpha1.RedisPersistence) bool { return ReplicasOf(rp) > 1 }

func SentinelName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-sentinel" }

func ReplicasServiceName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-replicas" }

// HeadlessDomain is the DNS domain of the instance's pods: <pod>.<domain>.
// It relies on the pod's resolv.conf search path for the cluster domain, as
// status.endpoint does.
func HeadlessDomain(rp *v1alpha1.RedisPersistence) string {
	return fmt.Sprintf("%s.%s.svc", HeadlessServiceName(rp), rp.Namespace)
}
