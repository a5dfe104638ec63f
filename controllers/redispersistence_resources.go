package controllers

import (
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Fixed facts about the pods the operator runs.
const (
	redisPort    = 6379
	exporterPort = 9121

	dataDir   = "/data"
	configDir = "/etc/redis"
	runDir    = "/run/redis"

	// The server and exporter images run as this user; fsGroup makes the data volume theirs.
	redisUID = 999

	containerRedis    = "redis"
	containerExporter = "exporter"
	// containerPrepare reports the data directory's filesystem through its
	// termination message and writes the auth include file.
	containerPrepare = "prepare"

	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelComponent = "app.kubernetes.io/component"

	annotationConfigHash = "uringredis.io/config-hash"
	annotationAuthHash   = "uringredis.io/auth-hash"
	// annotationMode on the ConfigMap is the mode whose files hold the data:
	// the operator writes a new mode there only once the running server has
	// switched to it.
	annotationMode = "uringredis.io/mode"
	// annotationRuntimeConfigHash on the ConfigMap identifies its runtime
	// options; status.appliedConfigHash equals it once the server runs them.
	annotationRuntimeConfigHash = "uringredis.io/runtime-config-hash"

	fieldOwner = "uring-redis-operator"
)

// exporterScript is redis_exporter's --script: it turns the io_uring engine's
// INFO fields, which the exporter does not map, into redis_script_values.
//
//go:embed uring-info.lua
var exporterScript string

const exporterScriptFile = "uring-info.lua"

// Options are the operator-wide settings the builders need.
type Options struct {
	// RedisImage runs the server unless spec.image overrides it.
	RedisImage string
	// ExporterImage runs the redis_exporter sidecar unless spec.exporter.image overrides it.
	ExporterImage string
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

// applyTo sets the pull policy of every container of pod and its pull secrets.
func (p ImagePull) applyTo(pod *corev1.PodSpec) {
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
	kernelLabelSets      = []KernelLabels{NFDKernelLabels, OperatorKernelLabels}
)

func configMapName(rp *v1alpha1.RedisPersistence) string       { return rp.Name + "-config" }
func headlessServiceName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-headless" }

func selectorLabels(rp *v1alpha1.RedisPersistence) map[string]string {
	return map[string]string{labelName: "redis", labelInstance: rp.Name}
}

func objectLabels(rp *v1alpha1.RedisPersistence) map[string]string {
	labels := selectorLabels(rp)
	labels[labelManagedBy] = fieldOwner
	labels[labelComponent] = "server"
	return labels
}

func ownerReference(rp *v1alpha1.RedisPersistence) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "RedisPersistence",
		Name:               rp.Name,
		UID:                rp.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

func objectMeta(rp *v1alpha1.RedisPersistence, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       rp.Namespace,
		Labels:          objectLabels(rp),
		OwnerReferences: []metav1.OwnerReference{ownerReference(rp)},
	}
}

// minKernel is the kernel a RedisPersistence needs, or "" for none.
func minKernel(rp *v1alpha1.RedisPersistence) string {
	if v := rp.Spec.Placement.MinKernelVersion; v != "" {
		return v
	}
	if rp.Spec.Mode == v1alpha1.ModeUring {
		return "6.0"
	}
	return ""
}

func exporterEnabled(rp *v1alpha1.RedisPersistence) bool {
	return ptr.Deref(rp.Spec.Exporter.Enabled, true)
}

// renderConfig renders redis.conf: what the server reads only at start, then
// the options the operator also sets on the running server (runtimeSettings).
// Every persistence knob is written out, defaults included, so the file alone
// says what the server does after a restart.
func renderConfig(rp *v1alpha1.RedisPersistence) string {
	var b strings.Builder
	b.WriteString(startupConfig(rp))
	b.WriteString("# Runtime options: the operator applies changes to them with CONFIG SET, without a restart.\n")
	for _, s := range runtimeSettings(rp) {
		if s.implicit {
			continue
		}
		value := s.value
		switch {
		case s.user:
			value = configValue(value)
		case value == "":
			value = `""`
		}
		fmt.Fprintf(&b, "%s %s\n", s.name, value)
	}
	return b.String()
}

// startupConfig is the part of redis.conf the server reads only at start: a
// change to it restarts the pod (configHash).
func startupConfig(rp *v1alpha1.RedisPersistence) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	line("# Rendered by uring-redis-operator from RedisPersistence %s/%s (mode %s); do not edit.", rp.Namespace, rp.Name, rp.Spec.Mode)
	line("bind * -::*")
	if tlsEnabled(rp) {
		for _, l := range tlsServerConfig(rp, redisPort) {
			line("%s", l)
		}
	} else {
		line("port %d", redisPort)
	}
	line("protected-mode no")
	line("dir %s", dataDir)
	line("daemonize no")
	line("loglevel notice")
	line(`logfile ""`)
	// DEBUG only where the owner allowed a RedisBenchmark's crash check,
	// which kills the server with DEBUG SEGFAULT.
	line("enable-debug-command %s", yesNo(rp.Spec.Benchmark != nil && rp.Spec.Benchmark.CrashCheck))
	line("dbfilename dump.rdb")
	line("appenddirname appendonlydir")
	if authSecretRef(rp) != nil {
		line("include %s/auth.conf", runDir)
	}
	for _, name := range slices.Sorted(maps.Keys(rp.Spec.Config)) {
		if startupOnlyOptions[name] {
			line("%s %s", name, configValue(string(rp.Spec.Config[name])))
		}
	}
	return b.String()
}

// startupOnlyOptions are the server options spec.config may set that Valkey
// 8.1.1 takes only at start (IMMUTABLE_CONFIG, or PROTECTED_CONFIG, which
// CONFIG SET refuses while enable-protected-configs is no): they go to the
// part of redis.conf whose change restarts the server. The operator's own
// options (the CRD's denylist) are not listed.
var startupOnlyOptions = map[string]bool{
	"always-show-logo": true, "aof-rewrite-cpulist": true, "bgsave-cpulist": true, "bio-cpulist": true,
	"client-default-resp": true, "cluster-config-file": true, "cluster-enabled": true, "cluster-port": true,
	"databases": true, "disable-thp": true, "enable-debug-assert": true, "io-threads": true,
	"lua-enable-insecure-api": true, "rdbchecksum": true, "rdma-completion-vector": true, "rdma-rx-size": true,
	"req-res-logfile": true, "server-cpulist": true, "set-proc-title": true, "socket-mark-id": true,
	"syslog-enabled": true, "syslog-facility": true, "syslog-ident": true, "tcp-backlog": true,
}

// configValue writes a spec.config value as one redis.conf argument: bare
// when it is a plain word, else double-quoted with the escapes the server's
// config parser (sdssplitargs) reads back. A multi-argument option given as
// one quoted argument is split on spaces by the server.
func configValue(v string) string {
	plain := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/+,@%", r)
	}
	if v != "" && !strings.ContainsFunc(v, func(r rune) bool { return !plain(r) }) {
		return v
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(v) + `"`
}

// maxmemoryShare is the part of the memory limit a server gets as maxmemory
// when spec.config does not set it. maxmemory counts the dataset, not what
// the process needs beside it: the pages a snapshot or AOF rewrite child
// copies on write (up to the whole dataset under heavy writes, a fraction
// under most loads), the AOF buffer and the io_uring engine's batches in
// flight and the replies the durable gate holds (both left out of maxmemory
// by the server), client buffers and allocator fragmentation. 30% of the
// limit is room for those under moderate write load; the limit itself is
// what the kernel OOM-kills at.
const maxmemoryShare = 0.7

// defaultMaxmemory is the maxmemory a memory limit implies, or "" without one.
func defaultMaxmemory(rp *v1alpha1.RedisPersistence) string {
	if rp.Spec.Resources == nil {
		return ""
	}
	limit, ok := rp.Spec.Resources.Limits[corev1.ResourceMemory]
	if !ok || limit.IsZero() {
		return ""
	}
	return strconv.FormatInt(int64(float64(limit.Value())*maxmemoryShare), 10)
}

// serverSetting is one server option the server can change at runtime.
type serverSetting struct {
	name, value string
	// implicit marks the server's default, left out of redis.conf so modes
	// other than uring run on a stock Valkey or Redis image; it is set only
	// on a server that knows the option.
	implicit bool
	// user marks an option from spec.config, written to redis.conf with configValue.
	user bool
}

// runtimeSettings are the options the running server takes with CONFIG SET,
// in the order they are applied: appendonly last, so that an AOF a mode change
// starts is written with the policy and engine already in place.
func runtimeSettings(rp *v1alpha1.RedisPersistence) []serverSetting {
	settings := []serverSetting{{name: "save", value: saveRules(rp)}}
	appendonly := "no"
	switch rp.Spec.Mode {
	case v1alpha1.ModeAOF:
		fsync := v1alpha1.FsyncEverySec
		if rp.Spec.AOF != nil && rp.Spec.AOF.Fsync != "" {
			fsync = rp.Spec.AOF.Fsync
		}
		appendonly = "yes"
		settings = append(settings,
			serverSetting{name: "appendfsync", value: string(fsync)},
			serverSetting{name: "appendfsync-engine", value: "posix", implicit: true})
	case v1alpha1.ModeUring:
		u := rp.Spec.Uring
		if u == nil {
			u = &v1alpha1.UringSpec{}
		}
		appendonly = "yes"
		sqpoll := u.SQPoll != nil && u.SQPoll.Enabled
		// The uring engine syncs every batch; "always" is the policy whose
		// guarantee it keeps, and what the server runs if the ring cannot start.
		settings = append(settings,
			serverSetting{name: "appendfsync", value: "always"},
			serverSetting{name: "appendfsync-engine", value: "uring"},
			serverSetting{name: "aof-uring-ack", value: cmp.Or(string(u.Ack), string(v1alpha1.AckDurable))},
			serverSetting{name: "aof-uring-queue-depth", value: strconv.Itoa(int(cmp.Or(u.QueueDepth, 256)))},
			serverSetting{name: "aof-uring-sqpoll", value: yesNo(sqpoll)},
			// Off is the server's default and left implicit, so a uring
			// image from before io-uring-replies still starts.
			serverSetting{name: "io-uring-replies", value: yesNo(u.Replies), implicit: !u.Replies},
			// 0 is the default and left implicit likewise. Every server of a
			// replicated instance carries it: a replica ignores it until the
			// Sentinels promote it.
			serverSetting{name: "aof-uring-ack-replicas", value: strconv.Itoa(int(u.AckReplicas)), implicit: u.AckReplicas == 0})
		if sqpoll && u.SQPoll.IdleMillis != nil {
			settings = append(settings, serverSetting{name: "aof-uring-sqpoll-idle-ms", value: strconv.Itoa(int(*u.SQPoll.IdleMillis))})
		}
		if sqpoll && u.SQPoll.CPU != nil {
			settings = append(settings, serverSetting{name: "aof-uring-sqpoll-cpu", value: strconv.Itoa(int(*u.SQPoll.CPU))})
		}
		settings = append(settings, serverSetting{name: "aof-uring-max-workers", value: strconv.Itoa(int(cmp.Or(u.MaxWorkers, 2)))})
		if u.MaxInFlight != nil {
			settings = append(settings, serverSetting{name: "aof-uring-max-inflight-bytes", value: strconv.FormatInt(u.MaxInFlight.Value(), 10)})
		}
	default:
		settings = append(settings, serverSetting{name: "appendfsync-engine", value: "posix", implicit: true})
	}
	if _, set := rp.Spec.Config["maxmemory"]; !set {
		if maxmemory := defaultMaxmemory(rp); maxmemory != "" {
			settings = append(settings, serverSetting{name: "maxmemory", value: maxmemory})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rp.Spec.Config)) {
		if !startupOnlyOptions[name] {
			settings = append(settings, serverSetting{name: name, value: string(rp.Spec.Config[name]), user: true})
		}
	}
	return append(settings, serverSetting{name: "appendonly", value: appendonly})
}

// saveRules is the value of the save option: the snapshot rules, or "" for none.
func saveRules(rp *v1alpha1.RedisPersistence) string {
	if rp.Spec.RDB == nil {
		return ""
	}
	rules := make([]string, 0, len(rp.Spec.RDB.Save))
	for _, r := range rp.Spec.RDB.Save {
		rules = append(rules, fmt.Sprintf("%d %d", r.Seconds, r.Changes))
	}
	return strings.Join(rules, " ")
}

// runtimeConfigHash identifies the runtime options; status.appliedConfigHash
// carries it once the running server has them.
func runtimeConfigHash(rp *v1alpha1.RedisPersistence) string {
	var b strings.Builder
	for _, s := range runtimeSettings(rp) {
		fmt.Fprintf(&b, "%s=%s\n", s.name, s.value)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// configHash changes whenever the pods must restart to pick up a change the
// pod template itself does not show: the startup part of redis.conf and the
// exporter's script. The runtime options are left out; the operator sets them
// on the running server.
func configHash(rp *v1alpha1.RedisPersistence) string {
	sum := sha256.Sum256([]byte(startupConfig(rp) + exporterScript))
	return hex.EncodeToString(sum[:8])
}

// authHash changes when the password does, so the pods restart with it: the
// server, its probes and the exporter read the password only at start. It is
// salted with the RedisPersistence's UID and truncated, so the pod template
// does not carry a plain hash of the password.
func authHash(rp *v1alpha1.RedisPersistence, password string) string {
	if password == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(string(rp.UID) + "\x00" + password))
	return hex.EncodeToString(sum[:8])
}

// podInputs are what the StatefulSet depends on besides the RedisPersistence
// and the operator's options.
type podInputs struct {
	// configHash is the hash of what the server reads only at start.
	configHash string
	// authHash is the salted hash of the password, "" without auth.
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
	return podInputs{configHash: configHash(rp), authHash: authHash(rp, password)}
}

func (in podInputs) annotations() map[string]string {
	annotations := map[string]string{annotationConfigHash: in.configHash}
	if in.authHash != "" {
		annotations[annotationAuthHash] = in.authHash
	}
	if in.aclHash != "" {
		annotations[annotationACLHash] = in.aclHash
	}
	return annotations
}

func buildConfigMap(rp *v1alpha1.RedisPersistence, config string) *corev1.ConfigMap {
	meta := objectMeta(rp, configMapName(rp))
	meta.Annotations = map[string]string{annotationMode: string(rp.Spec.Mode), annotationRuntimeConfigHash: runtimeConfigHash(rp)}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Data:       map[string]string{"redis.conf": config, exporterScriptFile: exporterScript},
	}
}

// buildHeadlessService gives each pod its DNS name <pod>.<name>-headless: the
// servers' and, for a replicated instance, the Sentinels'.
func buildHeadlessService(rp *v1alpha1.RedisPersistence) *corev1.Service {
	svc := buildClientService(rp)
	svc.Name = headlessServiceName(rp)
	if replicated(rp) {
		svc.Spec.Selector = map[string]string{labelPartOf: rp.Name}
	}
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.PublishNotReadyAddresses = true
	return svc
}

// buildClientService selects the server, or a replicated instance's primary.
func buildClientService(rp *v1alpha1.RedisPersistence) *corev1.Service {
	selector := selectorLabels(rp)
	if replicated(rp) {
		selector = withRole(selector, v1alpha1.RolePrimary)
	}
	ports := []corev1.ServicePort{{Name: "redis", Port: redisPort, TargetPort: intstr.FromString("redis"), Protocol: corev1.ProtocolTCP}}
	if exporterEnabled(rp) {
		ports = append(ports, corev1.ServicePort{Name: "metrics", Port: exporterPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(rp, rp.Name),
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

func storageClassName(rp *v1alpha1.RedisPersistence, opts Options) *string {
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
		RunAsUser:           ptr.To[int64](redisUID),
		RunAsGroup:          ptr.To[int64](redisUID),
		FSGroup:             ptr.To[int64](redisUID),
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

func passwordEnv(rp *v1alpha1.RedisPersistence, name string) []corev1.EnvVar {
	ref := authSecretRef(rp)
	if ref == nil {
		return nil
	}
	return []corev1.EnvVar{secretKeyEnv(name, ref.Name, ref.Key)}
}

// secretKeyEnv is the environment variable name holding key of Secret secret.
func secretKeyEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret},
		Key:                  key,
	}}}
}

// kernelAffinity is the node selector term set that admits nodes whose kernel
// is at least major.minor by either set of kernel labels.
func kernelAffinity(version string) []corev1.NodeSelectorTerm {
	major, minor, ok := parseMajorMinor(version)
	if !ok {
		return nil
	}
	var terms []corev1.NodeSelectorTerm
	for _, keys := range kernelLabelSets {
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
	kernel := kernelAffinity(minKernel(rp))
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

func buildStatefulSet(rp *v1alpha1.RedisPersistence, opts Options, in podInputs) *appsv1.StatefulSet {
	template := buildPodTemplate(rp, opts, in)
	var claims []corev1.PersistentVolumeClaim
	if hasVolume(rp) {
		claims = []corev1.PersistentVolumeClaim{{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: selectorLabels(rp)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: storageClassName(rp, opts),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: volumeSize(rp)}},
			},
		}}
	}
	meta := objectMeta(rp, rp.Name)
	meta.Annotations = rolloutAnnotations(rp, opts, in, template)
	meta.Annotations[annotationAuthSource] = string(authSourceOf(rp))

	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicasOf(rp)),
			ServiceName: headlessServiceName(rp),
			Selector:    &metav1.LabelSelector{MatchLabels: selectorLabels(rp)},
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
func buildPodTemplate(rp *v1alpha1.RedisPersistence, opts Options, in podInputs) corev1.PodTemplateSpec {
	image := cmp.Or(rp.Spec.Image, opts.RedisImage)
	volumeMounts := []corev1.VolumeMount{
		{Name: "data", MountPath: dataDir},
		{Name: "config", MountPath: configDir, ReadOnly: true},
		{Name: "run", MountPath: runDir},
	}
	cliEnv := append([]corev1.EnvVar{{Name: "REDISCLI_HISTFILE", Value: "/dev/null"}}, passwordEnv(rp, "REDISCLI_AUTH")...)

	prepare := corev1.Container{
		Name:                     containerPrepare,
		Image:                    image,
		Command:                  shellCommand(prepareScript),
		Env:                      slices.Concat(measureEnv(), []corev1.EnvVar{envVar("RUN_DIR", runDir)}, passwordEnv(rp, "REDIS_PASSWORD"), aclEnv(rp)),
		VolumeMounts:             volumeMounts,
		SecurityContext:          restrictedSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}

	redis := corev1.Container{
		Name:    containerRedis,
		Image:   image,
		Command: []string{"valkey-server", configDir + "/redis.conf"},
		Env:     cliEnv,
		Ports:   []corev1.ContainerPort{{Name: "redis", ContainerPort: redisPort, Protocol: corev1.ProtocolTCP}},
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
				Command: []string{"sh", "-c", valkeyCLI(rp) + " -p " + strconv.Itoa(redisPort) + " ping | grep -qx PONG"},
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
	if tlsEnabled(rp) {
		redis.VolumeMounts = append(slices.Clone(volumeMounts), tlsVolumeMount)
	}

	containers := []corev1.Container{redis}
	if exporterEnabled(rp) {
		containers = append(containers, buildExporter(rp, opts))
	}

	volumes := []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(rp)},
		}}},
		{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))}}},
	}
	if !hasVolume(rp) {
		volumes = append(volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	if tlsEnabled(rp) {
		volumes = append(volumes, tlsVolume(rp))
	}

	var tolerations []corev1.Toleration
	if len(rp.Spec.Placement.Tolerations) > 0 {
		tolerations = append(tolerations, rp.Spec.Placement.Tolerations...)
	}

	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      objectLabels(rp),
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
	if replicated(rp) {
		replicateServer(rp, &template, in.antiAffinity)
	}
	opts.ImagePull.applyTo(&template.Spec)
	return template
}

func buildExporter(rp *v1alpha1.RedisPersistence, opts Options) corev1.Container {
	scheme := "redis"
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: configDir, ReadOnly: true}}
	if tlsEnabled(rp) {
		scheme = "rediss"
		mounts = append(mounts, tlsVolumeMount)
	}
	c := corev1.Container{
		Name:  containerExporter,
		Image: cmp.Or(rp.Spec.Exporter.Image, opts.ExporterImage),
		Args: []string{
			"--redis.addr=" + scheme + "://localhost:" + strconv.Itoa(redisPort),
			"--web.listen-address=:" + strconv.Itoa(exporterPort),
			"--script=" + configDir + "/" + exporterScriptFile,
		},
		VolumeMounts: mounts,
		Env:          signInEnv(rp, exporterUser, aclExporterKey),
		Ports:        []corev1.ContainerPort{{Name: "metrics", ContainerPort: exporterPort, Protocol: corev1.ProtocolTCP}},
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
	if aclUsersEnabled(rp) {
		// The exporter's user may not send CONFIG, which shows requirepass.
		c.Args = append(c.Args, "--config-command=-")
	}
	if tlsEnabled(rp) {
		c.Args = append(c.Args, exporterTLSArgs(rp)...)
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
