package controllers

import (
	"cmp"
	_ "embed"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// podInputs are what the StatefulSet depends on besides the RedisPersistence
// and the operator's options.
type podInputs struct {
	// ConfigHash is the hash of what the server reads only at start.
	configHash string
	// AuthHash is the salted hash of the password, "" without auth.
	authHash string
	// aclHash is the salted hash of the ACL users' passwords, "" without
	// users.
	aclHash string
	// upgradeStarted, when set, marks the StatefulSet as one of the
	// upgrades the operator rolls at a time, started then
	// (redispersistence_upgrade.go).
	upgradeStarted *metav1.Time
	// antiAffinity keeps a replicated instance's servers apart
	// (podAntiAffinityFor); "" for a single server.
	antiAffinity v1alpha1.PodAntiAffinity
	// tlsHash identifies the certificate files of spec.tls: the Sentinels,
	// which cannot reload them, restart when they change. The servers
	// reload them without a restart (serveCertificate).
	tlsHash string
}

func newPodInputs(rp *v1alpha1.RedisPersistence, password string) podInputs {
	return podInputs{configHash: specs.ConfigHash(rp), authHash: specs.AuthHash(rp, password)}
}

func (in podInputs) annotations() map[string]string {
	annotations := map[string]string{specs.AnnotationConfigHash: in.configHash}
	if in.authHash != "" {
		annotations[specs.AnnotationAuthHash] = in.authHash
	}
	if in.aclHash != "" {
		annotations[specs.AnnotationACLHash] = in.aclHash
	}
	return annotations
}

func buildConfigMap(rp *v1alpha1.RedisPersistence, config string) *corev1.ConfigMap {
	meta := specs.ObjectMeta(rp, specs.ConfigMapName(rp))
	meta.Annotations = map[string]string{specs.AnnotationMode: string(rp.Spec.Mode), specs.AnnotationRuntimeConfigHash: specs.RuntimeConfigHash(rp)}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Data:       map[string]string{"redis.conf": config, specs.ExporterScriptFile: specs.ExporterScript},
	}
}

// buildHeadlessService gives each pod its DNS name <pod>.<name>-headless: the
// servers' and, for a replicated instance, the Sentinels'.
func buildHeadlessService(rp *v1alpha1.RedisPersistence) *corev1.Service {
	svc := buildClientService(rp)
	svc.Name = specs.HeadlessServiceName(rp)
	if specs.Replicated(rp) {
		svc.Spec.Selector = map[string]string{labelPartOf: rp.Name}
	}
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.PublishNotReadyAddresses = true
	return svc
}

// buildClientService selects the server, or a replicated instance's primary.
func buildClientService(rp *v1alpha1.RedisPersistence) *corev1.Service {
	selector := specs.SelectorLabels(rp)
	if specs.Replicated(rp) {
		selector = withRole(selector, v1alpha1.RolePrimary)
	}
	ports := []corev1.ServicePort{{Name: "redis", Port: specs.RedisPort, TargetPort: intstr.FromString("redis"), Protocol: corev1.ProtocolTCP}}
	if specs.ExporterEnabled(rp) {
		ports = append(ports, corev1.ServicePort{Name: "metrics", Port: specs.ExporterPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: specs.ObjectMeta(rp, rp.Name),
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    ports,
		},
	}
}

// hasVolume is true when the data directory is a claimed volume: always with
// spec.storage, and by default for the modes that keep data. mode: none
// without spec.storage runs on an emptyDir: it needs no claim, so no
// StorageClass.
func hasVolume(rp *v1alpha1.RedisPersistence) bool {
	return rp.Spec.Storage != nil || rp.Spec.Mode != v1alpha1.ModeNone
}

// storageOf is spec.storage, or the CRD's defaults for a volume without one.
func storageOf(rp *v1alpha1.RedisPersistence) v1alpha1.StorageSpec {
	if rp.Spec.Storage != nil {
		return *rp.Spec.Storage
	}
	return v1alpha1.StorageSpec{Profile: v1alpha1.StorageCustom}
}

func storageClassName(rp *v1alpha1.RedisPersistence, opts specs.Options) *string {
	s := storageOf(rp)
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

// keepClaimSize makes sts claim volumes of the size the existing StatefulSet
// claims: volumeClaimTemplates cannot change, so a volume grows by expanding
// its claim (resizeVolume), not through the template.
func keepClaimSize(sts, existing *appsv1.StatefulSet) {
	if len(sts.Spec.VolumeClaimTemplates) == 0 || len(existing.Spec.VolumeClaimTemplates) == 0 {
		return
	}
	sts.Spec.VolumeClaimTemplates[0].Spec.Resources = *existing.Spec.VolumeClaimTemplates[0].Spec.Resources.DeepCopy()
}

// keepClaimClass makes sts claim volumes of the class the existing StatefulSet
// already claims. volumeClaimTemplates cannot change and the data lives on the
// claims they made: when the class a storage profile maps to changes (operator
// flags, chart values), an existing instance keeps its volume and only new
// instances use the new class. It returns the class kept and the class sts
// asked for, and whether they differ.
func keepClaimClass(sts, existing *appsv1.StatefulSet) (kept, wanted string, differ bool) {
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

func volumeSize(rp *v1alpha1.RedisPersistence) resource.Quantity {
	return ptr.Deref(storageOf(rp).Size, defaultVolumeSize)
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
		RunAsUser:           ptr.To[int64](specs.RedisUID),
		RunAsGroup:          ptr.To[int64](specs.RedisUID),
		FSGroup:             ptr.To[int64](specs.RedisUID),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      seccomp,
	}
}

func podSeccomp(rp *v1alpha1.RedisPersistence, opts specs.Options) *corev1.SeccompProfile {
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
	major, minor, ok := parseMajorMinor(version)
	if !ok {
		return nil
	}
	var terms []corev1.NodeSelectorTerm
	for _, keys := range specs.KernelLabelSets {
		terms = append(terms, kernelTerms(major, minor, keys)...)
	}
	return terms
}

// kernelTerms admit nodes whose labels keys say major > M, or major == M and
// minor >= m. Node affinity compares integers only with Gt/Lt, hence the two
// terms.
func kernelTerms(major, minor int, keys specs.KernelLabels) []corev1.NodeSelectorTerm {
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
	kernel := kernelAffinity(specs.MinKernel(rp))
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

func buildStatefulSet(rp *v1alpha1.RedisPersistence, opts specs.Options, in podInputs) *appsv1.StatefulSet {
	template := buildPodTemplate(rp, opts, in)
	var claims []corev1.PersistentVolumeClaim
	if hasVolume(rp) {
		claims = []corev1.PersistentVolumeClaim{{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: specs.SelectorLabels(rp)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: storageClassName(rp, opts),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: volumeSize(rp)}},
			},
		}}
	}
	meta := specs.ObjectMeta(rp, rp.Name)
	meta.Annotations = rolloutAnnotations(rp, opts, in, template)
	meta.Annotations[specs.AnnotationAuthSource] = string(specs.AuthSourceOf(rp))

	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(specs.ReplicasOf(rp)),
			ServiceName: specs.HeadlessServiceName(rp),
			Selector:    &metav1.LabelSelector{MatchLabels: specs.SelectorLabels(rp)},
			// The pod holds the only copy of the data: replace it only once the old one is gone.
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template:             template,
			VolumeClaimTemplates: claims,
		},
	}
}

// buildPodTemplate is the StatefulSet's pod template: the data directory is
// the volume claimed from the StatefulSet's claim template, or an emptyDir
// for mode: none without spec.storage.
func buildPodTemplate(rp *v1alpha1.RedisPersistence, opts specs.Options, in podInputs) corev1.PodTemplateSpec {
	image := cmp.Or(rp.Spec.Image, opts.RedisImage)
	volumeMounts := []corev1.VolumeMount{
		{Name: "data", MountPath: specs.DataDir},
		{Name: "config", MountPath: specs.ConfigDir, ReadOnly: true},
		{Name: "run", MountPath: specs.RunDir},
	}
	cliEnv := append([]corev1.EnvVar{{Name: "REDISCLI_HISTFILE", Value: "/dev/null"}}, specs.PasswordEnv(rp, "REDISCLI_AUTH")...)

	prepare := corev1.Container{
		Name:                     specs.ContainerPrepare,
		Image:                    image,
		Command:                  shellCommand(prepareScript),
		Env:                      slices.Concat(measureEnv(), []corev1.EnvVar{specs.EnvVar("RUN_DIR", specs.RunDir)}, specs.PasswordEnv(rp, "REDIS_PASSWORD"), specs.ACLEnv(rp)),
		VolumeMounts:             volumeMounts,
		SecurityContext:          restrictedSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}

	redis := corev1.Container{
		Name:    specs.ContainerRedis,
		Image:   image,
		Command: []string{"valkey-server", specs.ConfigDir + "/redis.conf"},
		Env:     cliEnv,
		Ports:   []corev1.ContainerPort{{Name: "redis", ContainerPort: specs.RedisPort, Protocol: corev1.ProtocolTCP}},
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
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: []string{"sh", "-c", specs.ValkeyCLI(rp) + " -p " + strconv.Itoa(specs.RedisPort) + " ping | grep -qx PONG"},
			}},
			PeriodSeconds:  5,
			TimeoutSeconds: 3,
		},
		VolumeMounts:    volumeMounts,
		SecurityContext: restrictedSecurityContext(),
	}
	if rp.Spec.Resources != nil {
		redis.Resources = *rp.Spec.Resources.DeepCopy()
	}
	if specs.TLSEnabled(rp) {
		redis.VolumeMounts = append(slices.Clone(volumeMounts), specs.TLSVolumeMount)
	}

	containers := []corev1.Container{redis}
	if specs.ExporterEnabled(rp) {
		containers = append(containers, buildExporter(rp, opts))
	}

	volumes := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: specs.ConfigMapName(rp)},
		}}},
		{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))}}},
	}
	if !hasVolume(rp) {
		volumes = append(volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	if specs.TLSEnabled(rp) {
		volumes = append(volumes, specs.TLSVolume(rp))
	}

	var tolerations []corev1.Toleration
	if len(rp.Spec.Placement.Tolerations) > 0 {
		tolerations = append(tolerations, rp.Spec.Placement.Tolerations...)
	}

	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      specs.ObjectLabels(rp),
			Annotations: in.annotations(),
		},
		Spec: corev1.PodSpec{
			InitContainers:                []corev1.Container{prepare},
			Containers:                    containers,
			Volumes:                       volumes,
			SecurityContext:               serverPodSecurity(podSeccomp(rp, opts)),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](60),
			NodeSelector:                  copyMap(rp.Spec.Placement.NodeSelector),
			Tolerations:                   tolerations,
			Affinity:                      buildAffinity(rp),
		},
	}
	if specs.Replicated(rp) {
		replicateServer(rp, &template, in.antiAffinity)
	}
	opts.ImagePull.ApplyTo(&template.Spec)
	return template
}

func buildExporter(rp *v1alpha1.RedisPersistence, opts specs.Options) corev1.Container {
	scheme := "redis"
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: specs.ConfigDir, ReadOnly: true}}
	if specs.TLSEnabled(rp) {
		scheme = "rediss"
		mounts = append(mounts, specs.TLSVolumeMount)
	}
	c := corev1.Container{
		Name:  specs.ContainerExporter,
		Image: cmp.Or(rp.Spec.Exporter.Image, opts.ExporterImage),
		Args: []string{
			"--redis.addr=" + scheme + "://localhost:" + strconv.Itoa(specs.RedisPort),
			"--web.listen-address=:" + strconv.Itoa(specs.ExporterPort),
			"--script=" + specs.ConfigDir + "/" + specs.ExporterScriptFile,
		},
		VolumeMounts: mounts,
		Env:          specs.SignInEnv(rp, specs.ExporterUser, specs.ACLExporterKey),
		Ports:        []corev1.ContainerPort{{Name: "metrics", ContainerPort: specs.ExporterPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("metrics")}},
			PeriodSeconds: 10,
		},
		SecurityContext: restrictedSecurityContext(),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
	}
	if specs.ACLUsersEnabled(rp) {
		// The exporter's user may not send CONFIG, which shows requirepass.
		c.Args = append(c.Args, "--config-command=-")
	}
	if specs.TLSEnabled(rp) {
		c.Args = append(c.Args, specs.ExporterTLSArgs(rp)...)
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
