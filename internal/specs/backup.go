package specs

import (
	"cmp"
	"path"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
)

const (
	// ContainerBackup is the backup agent's container in a RedisBackup's Job.
	ContainerBackup = "backup"
	// BackupAgent is the backup agent's path in the operator's image
	// (cmd/uring-backup).
	BackupAgent = "/uring-backup"
	// LabelBackupOf names the RedisPersistence a backup Job's pod reads
	// from; the instance's NetworkPolicy admits pods with it.
	LabelBackupOf = "uringredis.io/backup-of"

	// BackupSnapshotObject and BackupMetadataObject are a backup's objects
	// under BackupKeyPrefix: the RDB, and what the agent wrote of it
	// (backup.Metadata), written last.
	BackupSnapshotObject = "dump.rdb"
	BackupMetadataObject = "backup.json"

	// backupStoreCADir is where a backup pod mounts the object store's CA.
	backupStoreCADir = "/etc/uring-backup/store-ca"
	// backupAttempts is how many pods a backup Job runs before it fails:
	// a snapshot interrupted by a restart or a failover is taken again
	// from the start, by a new pod.
	backupAttempts = 3
	// defaultBackupDeadline bounds a backup Job (seconds).
	defaultBackupDeadline = 6 * 3600
)

// BackupOptions are the operator's settings for backup Jobs.
type BackupOptions struct {
	// Image holds the backup agent: the operator's own image.
	Image     string
	ImagePull ImagePull
}

// BackupJobName is the Job that takes b.
func BackupJobName(b *v1alpha1.RedisBackup) string { return b.Name + "-backup" }

// BackupPrefix is where rp's objects go in the bucket: spec's path, or
// <namespace>/<name>.
func BackupPrefix(rp *v1alpha1.RedisPersistence) string {
	return cmp.Or(rp.Spec.Backup.Destination.S3.Path, rp.Namespace+"/"+rp.Name)
}

// BackupKeyPrefix is the directory of b's objects in the bucket.
func BackupKeyPrefix(rp *v1alpha1.RedisPersistence, b *v1alpha1.RedisBackup) string {
	return path.Join(BackupPrefix(rp), "backups", b.Name)
}

// BackupLocation is the URL of b's snapshot, with .zst after it when the
// agent compresses it.
func BackupLocation(rp *v1alpha1.RedisPersistence, b *v1alpha1.RedisBackup) string {
	location := "s3://" + rp.Spec.Backup.Destination.S3.Bucket + "/" + path.Join(BackupKeyPrefix(rp, b), BackupSnapshotObject)
	if rp.Spec.Backup.Compression == v1alpha1.CompressionZstd {
		location += ".zst"
	}
	return location
}

func backupLabels(b *v1alpha1.RedisBackup, rp *v1alpha1.RedisPersistence) map[string]string {
	return map[string]string{
		LabelName:      "redis-backup",
		LabelInstance:  b.Name,
		LabelManagedBy: FieldOwner,
		LabelComponent: "backup",
		LabelBackupOf:  rp.Name,
	}
}

// StoreEnv is how the agent signs in to rp's object store: the access key
// from the credentials Secret, in the variables S3 tools read.
func StoreEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	creds := rp.Spec.Backup.Destination.S3.Credentials
	idKey, secretKey := creds.Keys()
	return []corev1.EnvVar{
		secretKeyEnv("AWS_ACCESS_KEY_ID", creds.SecretName, idKey),
		secretKeyEnv("AWS_SECRET_ACCESS_KEY", creds.SecretName, secretKey),
	}
}

// StoreArgs are the agent's flags that name rp's object store; a CA adds
// its volume to pod, once however many agents the pod runs (the restore
// and archive containers both mount it), and mounts it in agent.
func StoreArgs(rp *v1alpha1.RedisPersistence, pod *corev1.PodSpec, agent *corev1.Container) []string {
	s3 := rp.Spec.Backup.Destination.S3
	args := []string{
		"--endpoint=" + s3.Endpoint,
		"--bucket=" + s3.Bucket,
		"--prefix=" + BackupPrefix(rp),
		"--region=" + s3.RegionOrDefault(),
	}
	if s3.ServerSideEncryption != "" {
		args = append(args, "--sse="+string(s3.ServerSideEncryption))
	}
	if c := rp.Spec.Backup.Compression; c != "" && c != v1alpha1.CompressionNone {
		args = append(args, "--compression="+string(c))
	}
	if s3.CASecret != nil {
		key := s3.CASecret.KeyOrDefault()
		args = append(args, "--store-ca-file="+backupStoreCADir+"/"+key)
		if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "store-ca" }) {
			pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "store-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: s3.CASecret.Name, Items: []corev1.KeyToPath{{Key: key, Path: key}},
			}}})
		}
		agent.VolumeMounts = append(agent.VolumeMounts, corev1.VolumeMount{Name: "store-ca", MountPath: backupStoreCADir, ReadOnly: true})
	}
	return args
}

// BackupJob takes b from the server pod source of rp: the agent streams
// an RDB from the server, as a replica would, into the object store, then
// writes the backup's metadata and prints it as the pod's termination
// message, which the operator reads into b's status. It needs no
// Kubernetes API, so its pod gets no ServiceAccount token.
func BackupJob(b *v1alpha1.RedisBackup, rp *v1alpha1.RedisPersistence, source string, opts BackupOptions) *batchv1.Job {
	labels := backupLabels(b, rp)
	container := corev1.Container{
		Name:    ContainerBackup,
		Image:   opts.Image,
		Command: []string{BackupAgent, "take"},
		Args: []string{
			"--source=" + source + "." + HeadlessDomain(rp) + ":" + strconv.Itoa(RedisPort),
			"--source-pod=" + source,
			"--backup=" + b.Name,
			"--instance=" + rp.Name,
			"--mode=" + string(rp.Spec.Mode),
		},
		Env: append(append(SignInEnv(rp, backup.BackupUser, ACLBackupKey), StoreEnv(rp)...), corev1.EnvVar{
			Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
		}),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedSecurityContext(),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		}},
	}
	if n := rp.VerifySampleKeys(); n > 0 {
		container.Args = append(container.Args, "--sample-keys="+strconv.Itoa(int(n)))
	}
	pod := jobPod(container)
	pod.Containers[0].Args = append(pod.Containers[0].Args, StoreArgs(rp, &pod, &pod.Containers[0])...)
	if TLSEnabled(rp) {
		// The agent takes the benchmark runner's TLS flags.
		BenchmarkOverTLS(rp, &pod)
	}
	opts.ImagePull.ApplyTo(&pod)
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      BackupJobName(b),
			Namespace: b.Namespace,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1alpha1.GroupVersion.String(),
				Kind:               "RedisBackup",
				Name:               b.Name,
				UID:                b.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(int32(backupAttempts - 1)),
			ActiveDeadlineSeconds: ptr.To(int64(defaultBackupDeadline)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: backupLabels(b, rp)},
				Spec:       pod,
			},
		},
	}
}
