package specs

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
)

const (
	// ContainerArchive ships the AOF to spec.backup's store
	// (spec.backup.archive), beside the server.
	ContainerArchive = "archive"
	// defaultArchiveInterval is spec.backup.archive.interval's default.
	defaultArchiveInterval = 30 * time.Second
)

// ArchiveEnabled says whether rp's servers archive their AOF.
func ArchiveEnabled(rp *v1alpha1.RedisPersistence) bool {
	return rp.Spec.Backup != nil && rp.Spec.Backup.Archive != nil && rp.Spec.Mode.KeepsAOF()
}

// ArchiveInterval is how often the open INCR file's new entries ship.
func ArchiveInterval(rp *v1alpha1.RedisPersistence) time.Duration {
	if a := rp.Spec.Backup.Archive; a.Interval != nil && a.Interval.Duration > 0 {
		return a.Interval.Duration
	}
	return defaultArchiveInterval
}

// ArchiveLocation is the archive that spec.bootstrap.recovery.archive
// names, s3://<bucket>/<path>: the agent reads it under <path>/archive/.
func ArchiveLocation(rp *v1alpha1.RedisPersistence) string {
	return "s3://" + rp.Spec.Backup.Destination.S3.Bucket + "/" + rp.Spec.Bootstrap.Recovery.Archive.Path
}

// withArchive runs the backup agent's archive command beside the server of
// an instance with spec.backup.archive. It reads the AOF from the data
// volume, where it keeps its timeline's name and progress, and asks the server over the pod's loopback, as the
// backup user (INFO only is what it sends), whether it is the primary: only
// the primary's AOF is shipped. The server writes the timestamp annotations
// the archive is cut at (RuntimeSettings: aof-timestamp-enabled).
func withArchive(rp *v1alpha1.RedisPersistence, opts Options, _ PodInputs, template *corev1.PodTemplateSpec) {
	if !ArchiveEnabled(rp) || opts.AgentImage == "" {
		return
	}
	pod := &template.Spec
	archive := corev1.Container{
		Name:    ContainerArchive,
		Image:   opts.AgentImage,
		Command: []string{BackupAgent, "archive"},
		Args: []string{
			"--source=localhost:" + strconv.Itoa(RedisPort),
			"--data-dir=" + DataDir,
			"--interval=" + ArchiveInterval(rp).String(),
		},
		Env:             append(SignInEnv(rp, backup.BackupUser, ACLBackupKey), StoreEnv(rp)...),
		VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: DataDir}},
		SecurityContext: restrictedSecurityContext(),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
	}
	if TLSEnabled(rp) {
		// withTLS mounted the Secret's volume; the agent checks the chain
		// and not the name, as the benchmark runner does.
		archive.Args = append(archive.Args, "--tls-ca-cert="+TLSCAFile)
		if ClientAuth(rp) {
			archive.Args = append(archive.Args, "--tls-cert="+TLSCertFile, "--tls-key="+TLSKeyFile)
		}
		archive.VolumeMounts = append(archive.VolumeMounts, TLSVolumeMount)
	}
	if a := rp.Spec.Backup.Archive; a.MaxAge != nil {
		archive.Args = append(archive.Args, "--max-age="+a.MaxAge.Duration.String())
	}
	archive.Args = append(archive.Args, StoreArgs(rp, pod, &archive)...)
	pod.Containers = append(pod.Containers, archive)
}
