package specs

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// FsprobeMillis bounds the probe (uring-redis-fsprobe -t): the server starts
// this many milliseconds later, plus the write+fdatasync under way then.
const FsprobeMillis = "2000"

// The periodic re-probe (spec.storage.probeInterval): a Job on the server's
// node runs measureScript on the server's claim, and its pod's termination
// message is read like the prepare container's. The Job is never deleted by
// the operator: its TTL removes it, and a new one is made only once the old
// one is gone, so a probe that fails is retried at most every
// storageProbeTTL.
const (
	ContainerStorageProbe = "storage-probe"
	// storageProbeTTL is how long a finished probe Job stays for the
	// operator (and a person) to read.
	storageProbeTTL = 5 * time.Minute
	// storageProbeDeadline ends a probe whose volume does not answer.
	storageProbeDeadline = 2 * time.Minute
)

func StorageProbeJobName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-storage-probe" }

func storageProbeLabels(rp *v1alpha1.RedisPersistence) map[string]string {
	return map[string]string{
		LabelName:      "redis-storage-probe",
		LabelInstance:  rp.Name,
		LabelManagedBy: FieldOwner,
		LabelComponent: "storage-probe",
	}
}

// StorageProbeJob image's probe on node, on the claim of rp's first server
// (a sharded instance's: shard 0's), as the server's user.
func StorageProbeJob(rp *v1alpha1.RedisPersistence, opts Options, image, node string) *batchv1.Job {
	labels := storageProbeLabels(rp)
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: StorageProbeJobName(rp), Namespace: rp.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{OwnerReference(rp)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			ActiveDeadlineSeconds:   ptr.To(int64(storageProbeDeadline.Seconds())),
			TTLSecondsAfterFinished: ptr.To(int32(storageProbeTTL.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// The server's node: a ReadWriteOnce claim mounts only there.
					NodeName:      node,
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:                     ContainerStorageProbe,
						Image:                    image,
						Command:                  shellCommand(measureScript),
						Env:                      measureEnv(),
						VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: DataDir}},
						SecurityContext:          restrictedSecurityContext(),
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
						},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: DataClaimNames(rp)[0]},
					}}},
					SecurityContext:              serverPodSecurity(&corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}),
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
				},
			},
		},
	}
	opts.ImagePull.ApplyTo(&job.Spec.Template.Spec)
	return job
}

// DataClaimName is the data claim of the server with this ordinal: the
// StatefulSet's claim template "data" and the pod's name.
func DataClaimName(rp *v1alpha1.RedisPersistence, ordinal int32) string {
	return dataClaimOf(rp.Name, ordinal)
}

// dataClaimOf is the data claim the StatefulSet sts makes for its pod ordinal.
func dataClaimOf(sts string, ordinal int32) string { return fmt.Sprintf("data-%s-%d", sts, ordinal) }

// DataClaimNames are the data claims of every server rp asks for, in ordinal
// order; a sharded instance's shard by shard.
func DataClaimNames(rp *v1alpha1.RedisPersistence) []string {
	var names []string
	if !Sharded(rp) {
		for ordinal := range ReplicasOf(rp) {
			names = append(names, DataClaimName(rp, ordinal))
		}
		return names
	}
	for shard := range Shards(rp) {
		for ordinal := range ServersPerShard(rp) {
			names = append(names, dataClaimOf(ShardName(rp, shard), ordinal))
		}
	}
	return names
}
