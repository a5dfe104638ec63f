package specs_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

// TestStoreKeyOnlyWhereTheStoreIsTalkedTo walks every container of every
// pod the operator builds for an instance with spec.backup and names those
// that can read the object store's credentials Secret: the archive
// container (only with spec.backup.archive), the restore init container
// (only with spec.bootstrap) and the backup Job's agent. The server, the
// exporter, the prepare container, the Sentinels, the volume probe and the
// benchmark runners never get the key (docs/backup.md, Least privilege).
// A sharded instance has no spec.backup: the API refuses it.
func TestStoreKeyOnlyWhereTheStoreIsTalkedTo(t *testing.T) {
	privateStore := v1alpha1.S3Destination{
		Endpoint: "https://s3.storage.svc:8333", Bucket: "backups", Path: "team/cache", Region: "us-east-1",
		Credentials: v1alpha1.S3Credentials{SecretName: "s3", AccessKeyIDKey: "id", SecretAccessKeyKey: "secret"},
		CASecret:    &v1alpha1.CASecretRef{Name: "store-ca", Key: "ca.crt"},
	}
	replicatedArchivedRestored := specstest.ReplicatedSpec
	replicatedArchivedRestored.TLS = &v1alpha1.TLSSpec{SecretName: "cache-certs", ClientAuth: true}
	replicatedArchivedRestored.Backup = &v1alpha1.BackupSpec{
		Destination: v1alpha1.BackupDestination{S3: privateStore},
		Schedule:    "0 3 * * *",
		Archive:     &v1alpha1.ArchiveSpec{Interval: &metav1.Duration{Duration: 10 * time.Second}},
	}
	replicatedArchivedRestored.Bootstrap = &v1alpha1.BootstrapSpec{Recovery: v1alpha1.RecoverySpec{Backup: &v1alpha1.LocalObjectReference{Name: "nightly"}}}
	scheduledOnly := v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeRDB, Backup: &v1alpha1.BackupSpec{
		Destination: v1alpha1.BackupDestination{S3: privateStore}, Schedule: "@daily",
	}}

	for _, tc := range []struct {
		name string
		spec v1alpha1.RedisPersistenceSpec
		// server is the containers of a server pod that hold the key.
		server []string
	}{
		{"replicated, archived, restored from a backup", replicatedArchivedRestored, []string{specs.ContainerRestore, specs.ContainerArchive}},
		{"recovered from an archive, archived", specstest.GoldenCases["aof-archive-recovery"], []string{specs.ContainerRestore, specs.ContainerArchive}},
		{"restored from a backup, not archived", specstest.GoldenCases["uring-restore"], []string{specs.ContainerRestore}},
		{"scheduled backups only", scheduledOnly, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := specstest.NewRedisPersistence(tc.spec)
			secret := rp.Spec.Backup.Destination.S3.Credentials.SecretName
			in := specs.NewPodInputs(rp, specstest.Password(rp))
			b := &v1alpha1.RedisBackup{
				ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: rp.Namespace},
				Spec:       v1alpha1.RedisBackupSpec{RedisPersistence: v1alpha1.LocalObjectReference{Name: rp.Name}},
			}
			rb := &v1alpha1.RedisBenchmark{
				ObjectMeta: metav1.ObjectMeta{Name: "cmp", Namespace: rp.Namespace},
				Spec:       v1alpha1.RedisBenchmarkSpec{Targets: []string{rp.Name}},
			}
			bench := specs.BenchmarkOptions{Image: "uring-redis-bench:test"}
			pods := []struct {
				pod  string
				spec corev1.PodSpec
				want []string
			}{
				{"server", specs.StatefulSet(rp, specstest.Options, in).Spec.Template.Spec, tc.server},
				{"backup Job", specs.BackupJob(b, rp, rp.Name+"-0", specs.BackupOptions{Image: "uring-redis-operator:test"}).Spec.Template.Spec, []string{specs.ContainerBackup}},
				{"volume probe Job", specs.StorageProbeJob(rp, specstest.Options, "redis-uring:test", "node-a").Spec.Template.Spec, nil},
				{"benchmark Job", specs.BenchmarkJob(rb, specs.RunAt(rb, 0), rp, bench).Spec.Template.Spec, nil},
				{"steady writer", specs.SteadyWriterPod(rp, "writer", 100, bench).Spec, nil},
			}
			if rp.Spec.Sentinel != nil {
				pods = append(pods, struct {
					pod  string
					spec corev1.PodSpec
					want []string
				}{"Sentinel", specs.SentinelStatefulSet(rp, specstest.Options, in).Spec.Template.Spec, nil})
			}
			for _, p := range pods {
				if got := secretReaders(p.spec, secret); !slices.Equal(got, p.want) {
					t.Errorf("in the %s pod, the containers that can read the Secret %s are %q, want %q", p.pod, secret, got, p.want)
				}
				// The restore and archive containers share the store's CA
				// volume; the API server refuses a pod with two of one name.
				names := map[string]bool{}
				for _, v := range p.spec.Volumes {
					if names[v.Name] {
						t.Errorf("the %s pod has two volumes named %s", p.pod, v.Name)
					}
					names[v.Name] = true
				}
			}
		})
	}
}

// secretReaders names the containers of pod, init containers first, that
// can read the Secret secret: through an env var, envFrom, or a mounted
// volume of it (a secret volume, or a projected one with it among its
// sources).
func secretReaders(pod corev1.PodSpec, secret string) []string {
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			volumes[v.Name] = true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil && s.Secret.Name == secret {
					volumes[v.Name] = true
				}
			}
		}
	}
	var readers []string
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		reads := false
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secret {
				reads = true
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil && e.SecretRef.Name == secret {
				reads = true
			}
		}
		for _, m := range c.VolumeMounts {
			if volumes[m.Name] {
				reads = true
			}
		}
		if reads {
			readers = append(readers, c.Name)
		}
	}
	return readers
}
