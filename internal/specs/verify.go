package specs

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

const (
	// LabelVerifyOf marks the temporary RedisPersistence a verification of
	// the named instance's backups restores into.
	LabelVerifyOf = "uringredis.io/verify-of"
	// AnnotationVerifies names the RedisBackup that temporary instance
	// restores.
	AnnotationVerifies = "uringredis.io/verifies"
	// verifySuffix ends the temporary instance's name; the instance's name
	// is cut so that the whole is a RedisPersistence name (52 characters).
	verifySuffix    = "-verify"
	verifyNameLimit = 52 - len(verifySuffix)
)

// VerifyInstanceName is the temporary instance rp's verifications restore
// into: one name per instance, so two verifications of it can never run at
// once.
func VerifyInstanceName(rp *v1alpha1.RedisPersistence) string {
	prefix := rp.Name
	if len(prefix) > verifyNameLimit {
		prefix = prefix[:verifyNameLimit]
	}
	return prefix + verifySuffix
}

// VerifyInstance is the temporary RedisPersistence that restores b, a
// backup of rp, to verify it: rp's mode and its options (mode none, which
// cannot restore, becomes rdb), image, config, resources, placement and
// storage, so the restore takes the path a real one would and the data
// fits as it does in rp; one server, no Sentinel, no exporter, no backups
// of its own, rp's destination to read the snapshot with. Its path in the
// store is under rp's, so a key confined to rp's path covers it; it writes
// nothing there. rp owns it: deleting rp deletes it.
func VerifyInstance(rp *v1alpha1.RedisPersistence, b *v1alpha1.RedisBackup) *v1alpha1.RedisPersistence {
	src := &rp.Spec
	dest := src.Backup.Destination.DeepCopy()
	dest.S3.Path = BackupPrefix(rp) + "/verify"
	spec := v1alpha1.RedisPersistenceSpec{
		Mode:      src.Mode,
		AOF:       src.AOF.DeepCopy(),
		RDB:       src.RDB.DeepCopy(),
		Uring:     src.Uring.DeepCopy(),
		Storage:   src.Storage.DeepCopy(),
		Placement: *src.Placement.DeepCopy(),
		Image:     src.Image,
		Resources: src.Resources.DeepCopy(),
		Exporter:  v1alpha1.ExporterSpec{Enabled: ptr.To(false)},
		Monitoring: v1alpha1.MonitoringSpec{
			PodMonitor: v1alpha1.PodMonitorSpec{Enabled: ptr.To(false)},
		},
		Backup:    &v1alpha1.BackupSpec{Destination: *dest, Compression: src.Backup.Compression},
		Bootstrap: &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Backup: &v1alpha1.LocalObjectReference{Name: b.Name}}},
	}
	for k, v := range src.Config {
		if spec.Config == nil {
			spec.Config = map[string]v1alpha1.ServerOptionValue{}
		}
		spec.Config[k] = v
	}
	if spec.Uring != nil {
		// One server: no replica to wait for.
		spec.Uring.AckReplicas = 0
	}
	if spec.Mode == v1alpha1.ModeNone {
		spec.Mode = v1alpha1.ModeRDB
		spec.RDB = &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 3600, Changes: 1}}}
	}
	return &v1alpha1.RedisPersistence{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RedisPersistence"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            VerifyInstanceName(rp),
			Namespace:       rp.Namespace,
			Labels:          map[string]string{LabelVerifyOf: rp.Name, LabelManagedBy: FieldOwner},
			Annotations:     map[string]string{AnnotationVerifies: b.Name},
			OwnerReferences: []metav1.OwnerReference{OwnerReference(rp)},
		},
		Spec: spec,
	}
}
