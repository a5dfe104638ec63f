package specs

import (
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// ParseMajorMinor reads the leading "major.minor" of a version such as
// "6.0" or a kernel release such as "6.8.0-1015-aws" or "6.18.44-fc-v782":
// what follows the numeric fields is free-form in a kernel release.
func ParseMajorMinor(s string) (major, minor int, ok bool) {
	v, err := version.ParseGeneric(s)
	if err != nil {
		return 0, 0, false
	}
	return int(v.Major()), int(v.Minor()), true
}

// PodInputs are what the StatefulSet depends on besides the RedisPersistence
// and the operator's options.
type PodInputs struct {
	// ConfigHash is the hash of what the server reads only at start.
	configHash string
	// AuthHash is the salted hash of the password, "" without auth.
	authHash string
	// ACLHash is the salted hash of the ACL users' passwords, "" without
	// users.
	ACLHash string
	// UpgradeStarted, when set, marks the StatefulSet as one of the
	// upgrades the operator rolls at a time, started then
	// (controllers/redispersistence_upgrade.go).
	UpgradeStarted *metav1.Time
	// AntiAffinity keeps a replicated instance's servers apart
	// (PodAntiAffinityFor); "" for a single server.
	AntiAffinity v1alpha1.PodAntiAffinity
	// TLSHash identifies the certificate files of spec.tls: the Sentinels,
	// which cannot reload them, restart when they change. The servers
	// reload them without a restart (serveCertificate).
	TLSHash string
	// Servers is how many servers the StatefulSet runs; 0 is spec.replicas.
	// A scale-in keeps the servers it would remove while the primary is one
	// of them (controllers/redispersistence_scale.go).
	Servers int32
	// Partition, when set, holds the servers below that ordinal on the
	// template they run: the operator rolls a replicated instance, or a
	// shard, one server at a time and switches over before the primary
	// restarts (controllers/redispersistence_rollout.go). nil lets the StatefulSet
	// controller roll every server.
	Partition *int32
}

func NewPodInputs(rp *v1alpha1.RedisPersistence, password string) PodInputs {
	return PodInputs{configHash: ConfigHash(rp), authHash: AuthHash(rp, password)}
}

func (in PodInputs) annotations() map[string]string {
	annotations := map[string]string{AnnotationConfigHash: in.configHash}
	if in.authHash != "" {
		annotations[AnnotationAuthHash] = in.authHash
	}
	if in.ACLHash != "" {
		annotations[AnnotationACLHash] = in.ACLHash
	}
	return annotations
}

// HasVolume is true when the data directory is a claimed volume: always with
// spec.storage, and by default for the modes that keep data. mode: none
// without spec.storage runs on an emptyDir: it needs no claim, so no
// StorageClass.
func HasVolume(rp *v1alpha1.RedisPersistence) bool {
	return rp.Spec.Storage != nil || rp.Spec.Mode != v1alpha1.ModeNone
}

// StorageOf is spec.storage, or the CRD's defaults for a volume without one.
func StorageOf(rp *v1alpha1.RedisPersistence) v1alpha1.StorageSpec {
	if rp.Spec.Storage != nil {
		return *rp.Spec.Storage
	}
	return v1alpha1.StorageSpec{Profile: v1alpha1.StorageCustom}
}

func storageClassName(rp *v1alpha1.RedisPersistence, opts Options) *string {
	s := StorageOf(rp)
	if s.StorageClassName != "" {
		return ptr.To(s.StorageClassName)
	}
	switch s.Profile {
	case v1alpha1.StorageLocalNVMe:
		return ptr.To(opts.LocalNVMeStorageClass)
	case v1alpha1.StorageGP3:
		return ptr.To(opts.GP3StorageClass)
	}
	return nil // the cluster's default class
}

// KeepClaimSize makes sts claim volumes of the size the existing StatefulSet
// claims: volumeClaimTemplates cannot change, so a volume grows by expanding
// its claim (resizeVolume), not through the template.
func KeepClaimSize(sts, existing *appsv1.StatefulSet) {
	if len(sts.Spec.VolumeClaimTemplates) == 0 || len(existing.Spec.VolumeClaimTemplates) == 0 {
		return
	}
	sts.Spec.VolumeClaimTemplates[0].Spec.Resources = *existing.Spec.VolumeClaimTemplates[0].Spec.Resources.DeepCopy()
}

// KeepClaimClass makes sts claim volumes of the class the existing StatefulSet
// already claims. volumeClaimTemplates cannot change and the data lives on the
// claims they made: when the class a storage profile maps to changes (operator
// flags, chart values), an existing instance keeps its volume and only new
// instances use the new class. It returns the class kept and the class sts
// asked for, and whether they differ.
func KeepClaimClass(sts, existing *appsv1.StatefulSet) (kept, wanted string, differ bool) {
	if len(sts.Spec.VolumeClaimTemplates) == 0 || len(existing.Spec.VolumeClaimTemplates) == 0 {
		return "", "", false
	}
	want := &sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName
	have := existing.Spec.VolumeClaimTemplates[0].Spec.StorageClassName
	if ptr.Equal(*want, have) {
		return "", "", false
	}
	kept, wanted = ptr.Deref(have, "(the cluster default)"), ptr.Deref(*want, "(the cluster default)")
	*want = have
	return kept, wanted, true
}

// defaultVolumeSize matches the CRD default, for objects that skipped defaulting.
var defaultVolumeSize = resource.MustParse("8Gi")

func VolumeSize(rp *v1alpha1.RedisPersistence) resource.Quantity {
	return ptr.Deref(StorageOf(rp).Size, defaultVolumeSize)
}

func restrictedSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// serverPodSecurity runs a pod on the server's data volume as the server's
// user, the volume's group set to it, under seccomp.
func serverPodSecurity(seccomp *corev1.SeccompProfile) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To[int64](RedisUID),
		RunAsGroup:          ptr.To[int64](RedisUID),
		FSGroup:             ptr.To[int64](RedisUID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      seccomp,
	}
}

func podSeccomp(rp *v1alpha1.RedisPersistence, opts Options) *corev1.SeccompProfile {
	if rp.Spec.Mode == v1alpha1.ModeUring {
		profile := opts.UringSeccompProfile
		if rp.Spec.Uring != nil && rp.Spec.Uring.LocalhostProfile != "" {
			profile = rp.Spec.Uring.LocalhostProfile
		}
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(profile)}
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}

// kernelAffinity is the node selector term set that admits nodes whose kernel
// is at least major.minor by either set of kernel labels.
func kernelAffinity(version string) []corev1.NodeSelectorTerm {
	major, minor, ok := ParseMajorMinor(version)
	if !ok {
		return nil
	}
	var terms []corev1.NodeSelectorTerm
	for _, keys := range KernelLabelSets {
		terms = append(terms, kernelTerms(major, minor, keys)...)
	}
	return terms
}

// kernelTerms admit nodes whose labels keys say major > M, or major == M and
// minor >= m. Node affinity compares integers only with Gt/Lt, hence the two
// terms.
func kernelTerms(major, minor int, keys KernelLabels) []corev1.NodeSelectorTerm {
	sameMajor := []corev1.NodeSelectorRequirement{
		{Key: keys.Major, Operator: corev1.NodeSelectorOpIn, Values: []string{strconv.Itoa(major)}},
	}
	// "Gt -1" is not a valid label value: minor 0 means any minor.
	if minor > 0 {
		sameMajor = append(sameMajor, corev1.NodeSelectorRequirement{
			Key: keys.Minor, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.Itoa(minor - 1)},
		})
	}
	return []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: keys.Major, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.Itoa(major)}},
		}},
		{MatchExpressions: sameMajor},
	}
}

// buildAffinity merges the user's affinity with the kernel requirement: every
// user term is combined with each kernel term (selector terms are ORed,
// expressions within a term ANDed).
func buildAffinity(rp *v1alpha1.RedisPersistence) *corev1.Affinity {
	var affinity *corev1.Affinity
	if rp.Spec.Placement.Affinity != nil {
		affinity = rp.Spec.Placement.Affinity.DeepCopy()
	}
	kernel := kernelAffinity(MinKernel(rp))
	if len(kernel) == 0 {
		return affinity
	}
	if affinity == nil {
		affinity = &corev1.Affinity{}
	}
	if affinity.NodeAffinity == nil {
		affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	required := affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: kernel}
		return affinity
	}
	var merged []corev1.NodeSelectorTerm
	for _, user := range required.NodeSelectorTerms {
		for _, kernelTerm := range kernel {
			term := *user.DeepCopy()
			term.MatchExpressions = append(term.MatchExpressions, kernelTerm.MatchExpressions...)
			merged = append(merged, term)
		}
	}
	required.NodeSelectorTerms = merged
	return affinity
}

func StatefulSet(rp *v1alpha1.RedisPersistence, opts Options, in PodInputs) *appsv1.StatefulSet {
	return statefulSet(rp, opts, in, rp.Name, cmp.Or(in.Servers, ReplicasOf(rp)), SelectorLabels(rp), PodTemplate(rp, opts, in))
}

// statefulSet runs replicas pods of template, selected by selector, each
// with a data volume of its own when rp has one.
func statefulSet(rp *v1alpha1.RedisPersistence, opts Options, in PodInputs, name string, replicas int32, selector map[string]string, template corev1.PodTemplateSpec) *appsv1.StatefulSet {
	var claims []corev1.PersistentVolumeClaim
	if HasVolume(rp) {
		claims = []corev1.PersistentVolumeClaim{{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: copyMap(selector)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: storageClassName(rp, opts),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: VolumeSize(rp)}},
			},
		}}
	}
	meta := ObjectMeta(rp, name)
	meta.Annotations = RolloutAnnotations(rp, opts, in, template)
	meta.Annotations[AnnotationAuthSource] = string(AuthSourceOf(rp))
	strategy := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	if in.Partition != nil {
		strategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(*in.Partition)}
	}

	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: HeadlessServiceName(rp),
			Selector:    &metav1.LabelSelector{MatchLabels: copyMap(selector)},
			// The pod holds the only copy of the data: replace it only once the old one is gone.
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy:      strategy,
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template:             template,
			VolumeClaimTemplates: claims,
		},
	}
}

// PodTemplate is the StatefulSet's pod template: the data directory is
// the volume claimed from the StatefulSet's claim template, or an emptyDir
// for mode: none without spec.storage. It is the standalone server's
// template with each feature of rp added by a piece of its own, in this
// order (the order fixes the order of env entries, mounts and volumes).
func PodTemplate(rp *v1alpha1.RedisPersistence, opts Options, in PodInputs) corev1.PodTemplateSpec {
	template := serverPodTemplate(rp, opts, in)
	for _, feature := range []podFeature{withAuth, withTLS, withExporter, withReplication, withCluster, withRecovery, withArchive, withPodMetadata} {
		feature(rp, opts, in, &template)
	}
	opts.ImagePull.ApplyTo(&template.Spec)
	return template
}

// podFeature adds one feature of rp to the server's pod template, when rp
// asks for it: every container, env entry, mount and volume the feature
// needs.
type podFeature func(rp *v1alpha1.RedisPersistence, opts Options, in PodInputs, template *corev1.PodTemplateSpec)

// containerOf is the container name of spec, nil if it has none.
func containerOf(spec *corev1.PodSpec, name string) *corev1.Container {
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			if containers[i].Name == name {
				return &containers[i]
			}
		}
	}
	return nil
}

// serverPodTemplate is a standalone server without a password, TLS or
// exporter: the prepare container, which measures the volume, and the
// server.
func serverPodTemplate(rp *v1alpha1.RedisPersistence, opts Options, in PodInputs) corev1.PodTemplateSpec {
	image := cmp.Or(rp.Spec.Image, opts.RedisImage)
	volumeMounts := []corev1.VolumeMount{
		{Name: "data", MountPath: DataDir},
		{Name: "config", MountPath: ConfigDir, ReadOnly: true},
		{Name: "run", MountPath: RunDir},
	}

	prepare := corev1.Container{
		Name:                     ContainerPrepare,
		Image:                    image,
		Command:                  shellCommand(PrepareScript),
		Env:                      append(measureEnv(), EnvVar("RUN_DIR", RunDir)),
		VolumeMounts:             volumeMounts,
		SecurityContext:          restrictedSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}

	redis := corev1.Container{
		Name:    ContainerRedis,
		Image:   image,
		Command: []string{"valkey-server", ConfigDir + "/redis.conf", "--include", UsersInclude},
		Env:     []corev1.EnvVar{{Name: "REDISCLI_HISTFILE", Value: "/dev/null"}},
		Ports:   []corev1.ContainerPort{{Name: "redis", ContainerPort: RedisPort, Protocol: corev1.ProtocolTCP}},
		// A server replaying a large AOF accepts connections but answers
		// LOADING: the TCP probes keep it alive, the PING probe keeps it out
		// of the Service until it has loaded.
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("redis")}},
			PeriodSeconds:    2,
			FailureThreshold: 150,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("redis")}},
			PeriodSeconds:    10,
			FailureThreshold: 6,
		},
		ReadinessProbe:  serverReadyProbe(rp),
		VolumeMounts:    volumeMounts,
		SecurityContext: restrictedSecurityContext(),
		Resources:       ServerResources(rp),
	}
	volumes := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(rp)},
		}}},
		{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))}}},
	}
	if !HasVolume(rp) {
		volumes = append(volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}

	var tolerations []corev1.Toleration
	if len(rp.Spec.Placement.Tolerations) > 0 {
		tolerations = append(tolerations, rp.Spec.Placement.Tolerations...)
	}

	annotations := in.annotations()
	if at := rp.Annotations[AnnotationRestartedAt]; at != "" {
		annotations[AnnotationRestartedAt] = at
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      ObjectLabels(rp),
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			InitContainers:                []corev1.Container{prepare},
			Containers:                    []corev1.Container{redis},
			Volumes:                       volumes,
			SecurityContext:               serverPodSecurity(podSeccomp(rp, opts)),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](60),
			NodeSelector:                  copyMap(rp.Spec.Placement.NodeSelector),
			Tolerations:                   tolerations,
			Affinity:                      buildAffinity(rp),
			TopologySpreadConstraints:     topologySpread(rp),
			PriorityClassName:             rp.Spec.Placement.PriorityClassName,
		},
	}
}

// ServerResources are spec.resources as the user wrote them, or, without
// them, requests and no limit: a pod with no requests is BestEffort, the
// first the kubelet evicts under memory pressure and scheduled as if the
// server took nothing. The requests are what an idle server with a small
// dataset holds (a Valkey server starts at about 10 MiB resident, and its
// AOF rewrite child shares the parent's pages until they are written) and a
// tenth of a core for its event loop, as other Redis operators request
// (Spotahome's 100m and 100Mi): enough to schedule honestly, small enough that
// a test cluster holds dozens. No limit: a memory limit is the dataset's
// ceiling (it sets maxmemory, defaultMaxmemory) and only the user knows how
// large the dataset grows; a CPU limit throttles the event loop in the
// middle of a reply, which costs p99 latency rather than saving anything.
func ServerResources(rp *v1alpha1.RedisPersistence) corev1.ResourceRequirements {
	if rp.Spec.Resources != nil {
		return *rp.Spec.Resources.DeepCopy()
	}
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
	}}
}

// topologySpread is spec.placement.topologySpreadConstraints, each without
// a labelSelector given the server pods' selector: the user means to spread
// this instance's servers, and an empty selector would count no pod at all.
func topologySpread(rp *v1alpha1.RedisPersistence) []corev1.TopologySpreadConstraint {
	var constraints []corev1.TopologySpreadConstraint
	for _, c := range rp.Spec.Placement.TopologySpreadConstraints {
		c := *c.DeepCopy()
		if c.LabelSelector == nil {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: SelectorLabels(rp)}
		}
		constraints = append(constraints, c)
	}
	return constraints
}

// withPodMetadata adds spec.podMetadata's labels and annotations to the
// server pods. It runs after every other feature so that a key the
// operator set keeps the operator's value: the API server rejects the
// selector labels, the rest (managed-by, the hashes) are only overridden
// here.
func withPodMetadata(rp *v1alpha1.RedisPersistence, _ Options, _ PodInputs, template *corev1.PodTemplateSpec) {
	if rp.Spec.PodMetadata == nil {
		return
	}
	template.Labels = addMissing(template.Labels, rp.Spec.PodMetadata.Labels)
	template.Annotations = addMissing(template.Annotations, rp.Spec.PodMetadata.Annotations)
}

// addMissing adds to meta each key of user it does not have yet.
func addMissing[V ~string](meta map[string]string, user map[string]V) map[string]string {
	for k, v := range user {
		if _, taken := meta[k]; taken {
			continue
		}
		if meta == nil {
			meta = make(map[string]string, len(user))
		}
		meta[k] = string(v)
	}
	return meta
}

// withExporter adds the redis_exporter sidecar, unless spec.exporter turns
// it off.
func withExporter(rp *v1alpha1.RedisPersistence, opts Options, _ PodInputs, template *corev1.PodTemplateSpec) {
	if ExporterEnabled(rp) {
		template.Spec.Containers = append(template.Spec.Containers, buildExporter(rp, opts))
	}
}

func buildExporter(rp *v1alpha1.RedisPersistence, opts Options) corev1.Container {
	scheme := "redis"
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: ConfigDir, ReadOnly: true}}
	if TLSEnabled(rp) {
		scheme = "rediss"
		mounts = append(mounts, TLSVolumeMount)
	}
	c := corev1.Container{
		Name:  ContainerExporter,
		Image: cmp.Or(rp.Spec.Exporter.Image, opts.ExporterImage),
		Args: []string{
			"--redis.addr=" + scheme + "://localhost:" + strconv.Itoa(RedisPort),
			"--web.listen-address=:" + strconv.Itoa(ExporterPort),
			"--script=" + ConfigDir + "/" + ExporterScriptFile,
		},
		VolumeMounts: mounts,
		Env:          SignInEnv(rp, ExporterUser, ACLExporterKey),
		Ports:        []corev1.ContainerPort{{Name: "metrics", ContainerPort: ExporterPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("metrics")}},
			PeriodSeconds: 10,
		},
		SecurityContext: restrictedSecurityContext(),
		// The exporter's memory follows the metrics it renders, not the
		// dataset: a limit is safe.
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
	}
	if ACLUsersEnabled(rp) {
		// The exporter's user may not send CONFIG, which shows requirepass.
		c.Args = append(c.Args, "--config-command=-")
	}
	if TLSEnabled(rp) {
		c.Args = append(c.Args, ExporterTLSArgs(rp)...)
	}
	if rp.Spec.Exporter.Resources != nil {
		c.Resources = *rp.Spec.Exporter.Resources.DeepCopy()
	}
	return c
}

func copyMap(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// What the StatefulSet records about the pod template it runs.
const (
	// AnnotationTemplateHash identifies the pod template as built.
	AnnotationTemplateHash = "uringredis.io/template-hash"
	// AnnotationSpecTemplateHash identifies the pod template built with the
	// operator's defaults left out: what the RedisPersistence and its
	// password make of it.
	AnnotationSpecTemplateHash = "uringredis.io/spec-template-hash"
	// AnnotationGeneration is the RedisPersistence generation the template was built for.
	AnnotationGeneration = "uringredis.io/generation"
	// AnnotationUpgradeStarted marks an operator upgrade that holds a turn,
	// with the time it started (RFC 3339); it goes once the pod rolled out.
	AnnotationUpgradeStarted = "uringredis.io/upgrade-started"
	// AnnotationReleaseUpgrade on a RedisPersistence lets the operator's
	// other upgrades go on without the one its pod rolls, stalled or not.
	// Its value is that upgrade's AnnotationUpgradeStarted, which the
	// instance's UpToDate condition shows: it releases that upgrade only, so
	// an annotation left behind does not let a later one through.
	AnnotationReleaseUpgrade = "uringredis.io/release-upgrade"
	// AnnotationRestartedAt on a RedisPersistence asks for its servers to
	// restart, as `kubectl rollout restart` does for a Deployment: its value
	// (`kubectl uring restart` writes the time) is copied into the servers'
	// pod template, so a new value is a new template, rolled as any change
	// of the spec is (spec.updateStrategy: the replicas first and a
	// switchover before the primary's turn).
	AnnotationRestartedAt = "uringredis.io/restarted-at"
)

// operatorDefault stands for every value the operator's defaults supply in
// the template that AnnotationSpecTemplateHash identifies.
const operatorDefault = "(operator default)"

// RolloutAnnotations record what template was built from (see
// controllers/redispersistence_upgrade.go).
func RolloutAnnotations(rp *v1alpha1.RedisPersistence, opts Options, in PodInputs, template corev1.PodTemplateSpec) map[string]string {
	withoutDefaults := opts
	withoutDefaults.RedisImage, withoutDefaults.ExporterImage, withoutDefaults.UringSeccompProfile = operatorDefault, operatorDefault, operatorDefault
	withoutDefaults.ImagePull = ImagePull{Policy: operatorDefault, Secrets: []string{operatorDefault}}
	annotations := map[string]string{
		AnnotationTemplateHash:     templateHash(template),
		AnnotationSpecTemplateHash: templateHash(PodTemplate(rp, withoutDefaults, in)),
		AnnotationGeneration:       strconv.FormatInt(rp.Generation, 10),
	}
	if in.UpgradeStarted != nil {
		annotations[AnnotationUpgradeStarted] = in.UpgradeStarted.UTC().Format(time.RFC3339)
	}
	return annotations
}

func templateHash(template corev1.PodTemplateSpec) string {
	// A PodTemplateSpec always marshals; map keys come out sorted.
	data, _ := json.Marshal(template)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// serverReadyProbe is ready while the server answers PING, not LOADING. On a
// server with a password it signs in as the exporter's ACL user
// (PROBE_USER, PROBE_PASSWORD: probeEnv), whose password the operator keeps:
// the default password can change under a running pod, whose environment
// keeps the one it started with.
func serverReadyProbe(rp *v1alpha1.RedisPersistence) *corev1.Probe {
	cli := ValkeyCLI(rp)
	if ACLUsersEnabled(rp) {
		cli = `REDISCLI_AUTH="$PROBE_PASSWORD" ` + cli + ` --user "$PROBE_USER"`
	}
	return execProbe(cli + " -p " + strconv.Itoa(RedisPort) + " ping | grep -qx PONG")
}

// sentinelReadyProbe is ready while the Sentinel answers PING: PONG, or
// NOAUTH once the password it started with was rotated away (it answers,
// which is all readiness asks of a Sentinel; the operator asks it the rest).
func sentinelReadyProbe(rp *v1alpha1.RedisPersistence) *corev1.Probe {
	return execProbe(ValkeyCLI(rp) + " -p " + strconv.Itoa(SentinelPort) + " ping 2>/dev/null | grep -q -e '^PONG$' -e '^NOAUTH'")
}

func execProbe(command string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:   corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", command}}},
		PeriodSeconds:  5,
		TimeoutSeconds: 3,
	}
}

// probeEnv is how serverReadyProbe signs in, nil without a password.
func probeEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	if !ACLUsersEnabled(rp) {
		return nil
	}
	return []corev1.EnvVar{{Name: "PROBE_USER", Value: ExporterUser}, secretKeyEnv("PROBE_PASSWORD", ACLSecretName(rp), ACLExporterKey)}
}
