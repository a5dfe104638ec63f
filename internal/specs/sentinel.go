package specs

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Replication (spec.replicas above 1): one primary, N-1 replicas and Valkey's
// own Sentinels, which decide every failover. The operator never promotes a
// server; it follows what the Sentinels say
// (controllers/redispersistence_roles.go) and labels the pods by role, so
// the Service <name> follows the primary.
//
// How a server starts is decided in its container, at every start, by
// ServerStartScript (scripts/server-start.sh): the Sentinels' current
// primary if they know one, else a server that says it is primary, else
// ordinal 0. A pod therefore comes back from a restart, a rescheduling or a
// failover that happened while it was away as a replica of whoever is
// primary now, without the operator. Every server and Sentinel announces its
// stable DNS name under the headless Service (replica-announce-ip, Sentinel
// announce-hostnames), so a pod whose IP changes is still the same instance
// to the others. The server count is in no pod template (the scripts find
// the servers by name, MaxServers), so a scale adds or removes pods only
// (controllers/redispersistence_scale.go).
const (
	SentinelPort = 26379

	ContainerSentinel = "sentinel"
	sentinelDir       = "/run/sentinel"

	// LabelRole on a server pod is its role, as the operator last confirmed
	// it with the Sentinels and the server itself.
	LabelRole = "uringredis.io/role"
	// labelPartOf marks the servers and Sentinels of a replicated instance:
	// the headless Service, which gives each of them its DNS name, selects it.
	labelPartOf = "app.kubernetes.io/part-of"

	// sentinelDownAfterMillis is how long the primary may not answer before
	// a Sentinel thinks it down; with the quorum agreeing, a failover starts.
	// Long enough for an AOF rewrite's fork or a slow fsync under `always`,
	// short enough that writers wait seconds, not a minute.
	sentinelDownAfterMillis = 10000
	// sentinelFailoverTimeoutMillis bounds one failover attempt; the next
	// attempt on the same primary waits twice as long.
	sentinelFailoverTimeoutMillis = 60000

	// MaxServers is spec.replicas' Maximum. The start scripts look for a
	// server at every ordinal below it (lookups.sh, servers) instead of
	// reading the server count, which would be in the pod template: every
	// scale would restart every server and Sentinel.
	MaxServers = 9
)

// sentinelSpecOf is spec.sentinel with the CRD's defaults.
func sentinelSpecOf(rp *v1alpha1.RedisPersistence) v1alpha1.SentinelSpec {
	s := v1alpha1.SentinelSpec{}
	if rp.Spec.Sentinel != nil {
		s = *rp.Spec.Sentinel
	}
	s.Count = cmp.Or(s.Count, 3)
	s.Quorum = cmp.Or(s.Quorum, 2)
	return s
}

func SentinelSelectorLabels(rp *v1alpha1.RedisPersistence) map[string]string {
	return map[string]string{LabelName: "redis-sentinel", LabelInstance: rp.Name}
}

func sentinelObjectLabels(rp *v1alpha1.RedisPersistence) map[string]string {
	labels := SentinelSelectorLabels(rp)
	labels[LabelManagedBy] = FieldOwner
	labels[LabelComponent] = "sentinel"
	return labels
}

func sentinelObjectMeta(rp *v1alpha1.RedisPersistence, name string) metav1.ObjectMeta {
	meta := ObjectMeta(rp, name)
	meta.Labels = sentinelObjectLabels(rp)
	return meta
}

// lookupsEnv is what lookups.sh, with which both start scripts begin, reads
// of the instance.
func lookupsEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	return append([]corev1.EnvVar{
		EnvVar("INSTANCE", rp.Name),
		EnvVar("DOMAIN", HeadlessDomain(rp)),
		EnvVar("MAX_SERVERS", strconv.Itoa(MaxServers)),
		EnvVar("SERVER_PORT", strconv.Itoa(RedisPort)),
		EnvVar("SENTINEL_NAME", SentinelName(rp)),
		EnvVar("SENTINELS", strconv.Itoa(int(sentinelSpecOf(rp).Count))),
		EnvVar("SENTINEL_PORT", strconv.Itoa(SentinelPort)),
	}, CLITLSEnv(rp)...)
}

// serverStartEnv is what ServerStartScript reads.
func serverStartEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	return slices.Concat([]corev1.EnvVar{podNameEnv}, lookupsEnv(rp), []corev1.EnvVar{
		EnvVar("DATA_DIR", DataDir),
		EnvVar("CONFIG_FILE", ConfigDir+"/redis.conf"),
		EnvVar("USERS_INCLUDE", UsersInclude),
	})
}

// sentinelStartEnv is what SentinelStartScript reads, the password aside.
func sentinelStartEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	return slices.Concat([]corev1.EnvVar{podNameEnv}, lookupsEnv(rp), []corev1.EnvVar{
		EnvVar("SENTINEL_DIR", sentinelDir),
		EnvVar("SENTINEL_LISTEN", SentinelListenConfig(rp)),
		EnvVar("QUORUM", strconv.Itoa(int(sentinelSpecOf(rp).Quorum))),
		EnvVar("DOWN_AFTER_MILLIS", strconv.Itoa(sentinelDownAfterMillis)),
		EnvVar("FAILOVER_TIMEOUT_MILLIS", strconv.Itoa(sentinelFailoverTimeoutMillis)),
	})
}

// SentinelListenConfig is where the Sentinel listens: SentinelPort in plain
// TCP, or with spec.tls in TLS only, monitoring the servers and talking to
// the other Sentinels over TLS too.
func SentinelListenConfig(rp *v1alpha1.RedisPersistence) string {
	if TLSEnabled(rp) {
		return strings.Join(TLSServerConfig(rp, SentinelPort), "\n")
	}
	return fmt.Sprintf("port %d", SentinelPort)
}

// podNameEnv is the pod's own name, from which the start scripts derive the
// host name it announces.
var podNameEnv = corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}

// withReplication turns the standalone server's pod template into a member
// of a replicated instance: the start script, the part-of label its DNS name
// hangs on and the anti-affinity between servers.
func withReplication(rp *v1alpha1.RedisPersistence, _ Options, in PodInputs, template *corev1.PodTemplateSpec) {
	if !Replicated(rp) {
		return
	}
	template.Labels[labelPartOf] = rp.Name
	redis := containerOf(&template.Spec, ContainerRedis)
	redis.Command = shellCommand(ServerStartScript)
	redis.Env = append(redis.Env, serverStartEnv(rp)...)
	if template.Spec.Affinity == nil {
		template.Spec.Affinity = &corev1.Affinity{}
	}
	template.Spec.Affinity.PodAntiAffinity = spreadOverNodes(SelectorLabels(rp), in.AntiAffinity)
}

// spreadOverNodes keeps the pods labels selects on different nodes: always
// (required) or where the scheduler can (preferred).
func spreadOverNodes(labels map[string]string, how v1alpha1.PodAntiAffinity) *corev1.PodAntiAffinity {
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		TopologyKey:   corev1.LabelHostname,
	}
	if how == v1alpha1.AntiAffinityRequired {
		return &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
	}
	return &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term}}}
}

// PodAntiAffinityFor decides how strictly the servers (of a shard, for a
// sharded instance) are kept apart: Required when there are at least as
// many eligible nodes as servers,
// Preferred otherwise. An existing StatefulSet keeps its choice, so that a
// node joining or a scale does not roll every server; only a Required that
// the nodes no longer satisfy (a lost node, or a scale out beyond the
// eligible nodes) becomes Preferred, which rolls the servers, so that no
// server waits unschedulable.
func PodAntiAffinityFor(rp *v1alpha1.RedisPersistence, eligible int, existing *appsv1.StatefulSet) v1alpha1.PodAntiAffinity {
	apart := ReplicasOf(rp)
	if Sharded(rp) {
		apart = ServersPerShard(rp)
	}
	if apart <= 1 {
		return ""
	}
	fits := eligible >= int(apart)
	if existing != nil {
		switch antiAffinityOf(existing) {
		case v1alpha1.AntiAffinityPreferred:
			return v1alpha1.AntiAffinityPreferred
		case v1alpha1.AntiAffinityRequired:
			if !fits {
				return v1alpha1.AntiAffinityPreferred
			}
			return v1alpha1.AntiAffinityRequired
		}
	}
	if fits {
		return v1alpha1.AntiAffinityRequired
	}
	return v1alpha1.AntiAffinityPreferred
}

func antiAffinityOf(sts *appsv1.StatefulSet) v1alpha1.PodAntiAffinity {
	a := sts.Spec.Template.Spec.Affinity
	switch {
	case a == nil || a.PodAntiAffinity == nil:
		return ""
	case len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0:
		return v1alpha1.AntiAffinityRequired
	default:
		return v1alpha1.AntiAffinityPreferred
	}
}

// SentinelStatefulSet the Sentinels: the server image's
// valkey-sentinel, a writable configuration in an emptyDir, no volume (a
// Sentinel relearns the instance from the others and the servers).
func SentinelStatefulSet(rp *v1alpha1.RedisPersistence, opts Options, in PodInputs) *appsv1.StatefulSet {
	s := sentinelSpecOf(rp)
	// A Sentinel holds a few MiB whatever the dataset: a limit is safe, and
	// stops a leak from taking the node's memory.
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	if s.Resources != nil {
		resources = *s.Resources.DeepCopy()
	}
	cliEnv := append([]corev1.EnvVar{{Name: "REDISCLI_HISTFILE", Value: "/dev/null"}}, PasswordEnv(rp, "REDISCLI_AUTH")...)
	env := slices.Concat(cliEnv, PasswordEnv(rp, "REDIS_PASSWORD"), sentinelStartEnv(rp))
	sentinel := corev1.Container{
		Name:    ContainerSentinel,
		Image:   cmp.Or(rp.Spec.Image, opts.RedisImage),
		Command: shellCommand(SentinelStartScript),
		Env:     env,
		Ports:   []corev1.ContainerPort{{Name: "sentinel", ContainerPort: SentinelPort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("sentinel")}},
			InitialDelaySeconds: 30,
			PeriodSeconds:       10,
			FailureThreshold:    6,
		},
		ReadinessProbe:  sentinelReadyProbe(rp),
		VolumeMounts:    []corev1.VolumeMount{{Name: "sentinel", MountPath: sentinelDir}},
		SecurityContext: restrictedSecurityContext(),
		Resources:       resources,
	}
	labels := sentinelObjectLabels(rp)
	labels[labelPartOf] = rp.Name
	// A Sentinel reads the password only at start; nothing else of the
	// servers' configuration concerns it.
	annotations := map[string]string{}
	if in.authHash != "" {
		annotations[AnnotationAuthHash] = in.authHash
	}
	if in.TLSHash != "" {
		annotations[AnnotationTLSHash] = in.TLSHash
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{sentinel},
			Volumes: []corev1.Volume{{Name: "sentinel", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi")),
			}}}},
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](RedisUID),
				RunAsGroup:     ptr.To[int64](RedisUID),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			NodeSelector:                  copyMap(rp.Spec.Placement.NodeSelector),
			Tolerations:                   append([]corev1.Toleration(nil), rp.Spec.Placement.Tolerations...),
			PriorityClassName:             rp.Spec.Placement.PriorityClassName,
			// Sentinels are cheap: spread them where the nodes allow, never wait for a node.
			Affinity: &corev1.Affinity{PodAntiAffinity: spreadOverNodes(SentinelSelectorLabels(rp), v1alpha1.AntiAffinityPreferred)},
		},
	}
	if TLSEnabled(rp) {
		// The certificate files are readable by the server's group only.
		template.Spec.SecurityContext.FSGroup = ptr.To[int64](RedisUID)
		template.Spec.Volumes = append(template.Spec.Volumes, TLSVolume(rp))
		template.Spec.Containers[0].VolumeMounts = append(template.Spec.Containers[0].VolumeMounts, TLSVolumeMount)
	}
	opts.ImagePull.ApplyTo(&template.Spec)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: sentinelObjectMeta(rp, SentinelName(rp)),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(s.Count),
			ServiceName: HeadlessServiceName(rp),
			Selector:    &metav1.LabelSelector{MatchLabels: SentinelSelectorLabels(rp)},
			// Each Sentinel finds the others by asking them; none waits for another.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template:            template,
		},
	}
}

// replicationPeers are the pods a replicated instance's servers and
// Sentinels talk to each other from: the servers (replication) and the
// Sentinels (monitoring, failover).
func replicationPeers(rp *v1alpha1.RedisPersistence) []networkingv1.NetworkPolicyPeer {
	return []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(rp)}},
		{PodSelector: &metav1.LabelSelector{MatchLabels: SentinelSelectorLabels(rp)}},
	}
}

// SentinelNetworkPolicy admits to the Sentinel port the instance's
// clients (Sentinel-aware clients ask it for the primary), the operator, the
// servers and the other Sentinels.
func SentinelNetworkPolicy(rp *v1alpha1.RedisPersistence, opts NetworkPolicyOptions) *networkingv1.NetworkPolicy {
	np := NetworkPolicy(rp, opts)
	np.ObjectMeta = sentinelObjectMeta(rp, SentinelName(rp))
	np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: SentinelSelectorLabels(rp)}
	rule := np.Spec.Ingress[0]
	rule.Ports[0].Port = ptr.To(intstr.FromInt32(SentinelPort))
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{rule}
	return np
}
