package specs

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

const (
	// ContainerRestore restores spec.bootstrap.recovery's backup into the
	// first server's volume before it first starts.
	ContainerRestore = "restore"
	// The keys of the ConfigMap <name>-recovery.
	RecoveryLocationKey   = "location"
	RecoverySHA256Key     = "sha256"
	RecoveryArchiveKey    = "archive"
	RecoveryTargetTimeKey = "targetTime"
	// RecoveryBackupKey names the backup of spec.bootstrap.recovery.storedBackup,
	// which the operator finds in the store when the instance is created.
	RecoveryBackupKey = "backup"
)

// RecoveryConfigMapName is what the restore container reads the snapshot
// from, at each start: the pods of an instance with spec.bootstrap do not
// start without it.
func RecoveryConfigMapName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-recovery" }

// RecoveryConfigMap holds the snapshot, or the archive and target time,
// status.recovery fixed until the instance was Ready on it
// (status.recovery.restoredAt), then nothing: from then on the restore
// container does nothing, so the volume of a server that restarts later,
// or of a replica, is never restored into.
func RecoveryConfigMap(rp *v1alpha1.RedisPersistence) *corev1.ConfigMap {
	data := map[string]string{RecoveryLocationKey: "", RecoverySHA256Key: "", RecoveryArchiveKey: "", RecoveryTargetTimeKey: ""}
	stored := rp.Spec.Bootstrap != nil && rp.Spec.Bootstrap.Recovery.StoredBackup != nil
	if stored {
		data[RecoveryBackupKey] = ""
	}
	if rec := rp.Status.Recovery; rec != nil && rec.RestoredAt == nil {
		data[RecoveryLocationKey], data[RecoverySHA256Key], data[RecoveryArchiveKey] = rec.Location, rec.SHA256, rec.Archive
		if rec.TargetTime != nil {
			data[RecoveryTargetTimeKey] = rec.TargetTime.UTC().Format(time.RFC3339)
		}
		if stored {
			data[RecoveryBackupKey] = rec.Backup
		}
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: ObjectMeta(rp, RecoveryConfigMapName(rp)),
		Data:       data,
	}
}

// withRecovery runs the backup agent's restore before the prepare container
// of an instance with spec.bootstrap.recovery: it puts the snapshot, or the
// archive's base and INCR entries up to the target time, where the server
// loads it, once, into the empty volume of ordinal 0 (replicas
// copy it from there), and fails, saying why, on a volume with data. The
// snapshot's location and digest, or the archive and target, come from
// RecoveryConfigMap, read at each start, so the template stays the same
// when the restore is done.
func withRecovery(rp *v1alpha1.RedisPersistence, opts Options, _ PodInputs, template *corev1.PodTemplateSpec) {
	if rp.Spec.Bootstrap == nil || rp.Spec.Backup == nil {
		return
	}
	pod := &template.Spec
	var args []string
	if b := rp.Spec.Bootstrap.Recovery.Backup; b != nil {
		args = append(args, "--backup="+b.Name)
	}
	restore := corev1.Container{
		Name:    ContainerRestore,
		Image:   opts.AgentImage,
		Command: []string{BackupAgent, "restore"},
		Args: append(args,
			"--data-dir="+DataDir,
			"--aof="+strconv.FormatBool(rp.Spec.Mode.KeepsAOF()),
			"--ordinal-zero-only",
		),
		Env: append(StoreEnv(rp),
			configMapEnv("RESTORE_LOCATION", RecoveryConfigMapName(rp), RecoveryLocationKey),
			configMapEnv("RESTORE_SHA256", RecoveryConfigMapName(rp), RecoverySHA256Key),
		),
		VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: DataDir}},
		SecurityContext:          restrictedSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}
	if rp.Spec.Bootstrap.Recovery.StoredBackup != nil {
		// Its name, the newest backup's when the spec gives none, is known
		// once the operator has read the store.
		restore.Env = append(restore.Env, configMapEnv("RESTORE_BACKUP", RecoveryConfigMapName(rp), RecoveryBackupKey))
	}
	if rp.Spec.Bootstrap.Recovery.Archive != nil {
		restore.Env = append(restore.Env,
			configMapEnv("RESTORE_ARCHIVE", RecoveryConfigMapName(rp), RecoveryArchiveKey),
			configMapEnv("RESTORE_TARGET_TIME", RecoveryConfigMapName(rp), RecoveryTargetTimeKey))
	}
	restore.Args = append(restore.Args, StoreArgs(rp, pod, &restore)...)
	pod.InitContainers = append([]corev1.Container{restore}, pod.InitContainers...)
}

// configMapEnv is a required key of a ConfigMap: the container does not
// start without it.
func configMapEnv(name, configMap, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap}, Key: key,
	}}}
}
