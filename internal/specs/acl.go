package specs

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
)

const (
	// ExporterUser is redis_exporter's ACL user.
	ExporterUser = "uringredis-exporter"
	// ExporterACLRules are what redis_exporter sends when it does not ask
	// for CONFIG (--config-command=-) and checks no keys, found by running
	// it against the real server until its ACL LOG stayed empty
	// (TestExporterSignsInAsItsUser): INFO, its client name, LATENCY
	// LATEST and HISTOGRAM, SLOWLOG LEN and GET (the slowest commands'
	// arguments, which it reads for their ids and durations), and EVAL of
	// the chart's script, which calls INFO.
	ExporterACLRules = "resetkeys resetchannels -@all +ping +info +eval +client|setname +latency|latest +latency|histogram +slowlog|len +slowlog|get"
	// exporterClusterRules are added on a cluster node, whose INFO says
	// cluster_enabled:1: the exporter then reads CLUSTER INFO into the
	// redis_cluster_* series (state, slots assigned, ok and failing).
	exporterClusterRules = " +cluster|info"

	// The keys of the Secret <name>-acl.
	ACLExporterKey  = "exporter"
	ACLBenchmarkKey = "benchmark"
	ACLBackupKey    = "backup"

	// AnnotationACLHash on the pod template changes when the users'
	// passwords do (a new Secret <name>-acl), so the pods restart with them.
	AnnotationACLHash = "uringredis.io/acl-hash"
)

func ACLSecretName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-acl" }

// ACLUsersEnabled: the ACL users exist on servers that have a password.
func ACLUsersEnabled(rp *v1alpha1.RedisPersistence) bool { return AuthSecretRef(rp) != nil }

// benchmarkACLRules are the benchmark user's rules on rp's servers.
func benchmarkACLRules(rp *v1alpha1.RedisPersistence) string {
	return bench.ACLRules(rp.Spec.Benchmark != nil && rp.Spec.Benchmark.CrashCheck, Sharded(rp))
}

// ACLPasswords are the users' passwords, read from the Secret <name>-acl.
type ACLPasswords struct {
	Exporter, Benchmark, Backup string
}

// Hash is the pod template's AnnotationACLHash, "" without users; salted
// like AuthHash.
func (p ACLPasswords) Hash(rp *v1alpha1.RedisPersistence) string {
	if p == (ACLPasswords{}) {
		return ""
	}
	sum := sha256.Sum256([]byte(string(rp.UID) + "\x00" + p.Exporter + "\x00" + p.Benchmark + "\x00" + p.Backup))
	return hex.EncodeToString(sum[:8])
}

// ACLEnv is what the prepare container renders the users from, nil
// without users.
func ACLEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	if !ACLUsersEnabled(rp) {
		return nil
	}
	return []corev1.EnvVar{
		{Name: "EXPORTER_USER", Value: ExporterUser},
		secretKeyEnv("EXPORTER_PASSWORD", ACLSecretName(rp), ACLExporterKey),
		{Name: "EXPORTER_ACL", Value: exporterACLRules(rp)},
		{Name: "BENCHMARK_USER", Value: bench.User},
		secretKeyEnv("BENCHMARK_PASSWORD", ACLSecretName(rp), ACLBenchmarkKey),
		{Name: "BENCHMARK_ACL", Value: benchmarkACLRules(rp)},
		{Name: "BACKUP_USER", Value: backup.BackupUser},
		secretKeyEnv("BACKUP_PASSWORD", ACLSecretName(rp), ACLBackupKey),
		{Name: "BACKUP_ACL", Value: backup.BackupUserRules()},
	}
}

// exporterACLRules are redis_exporter's rules on rp's servers.
func exporterACLRules(rp *v1alpha1.RedisPersistence) string {
	if Sharded(rp) {
		return ExporterACLRules + exporterClusterRules
	}
	return ExporterACLRules
}

// SignInEnv is how a client of rp's servers other than the operator signs
// in: as user with the password in key of the Secret <name>-acl when the
// servers have users, else as default with the server's password (none
// without auth).
func SignInEnv(rp *v1alpha1.RedisPersistence, user, key string) []corev1.EnvVar {
	if !ACLUsersEnabled(rp) {
		return PasswordEnv(rp, "REDIS_PASSWORD")
	}
	return []corev1.EnvVar{{Name: "REDIS_USER", Value: user}, secretKeyEnv("REDIS_PASSWORD", ACLSecretName(rp), key)}
}

func ACLSecret(rp *v1alpha1.RedisPersistence, passwords ACLPasswords) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: ObjectMeta(rp, ACLSecretName(rp)),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			ACLExporterKey: []byte(passwords.Exporter), ACLBenchmarkKey: []byte(passwords.Benchmark), ACLBackupKey: []byte(passwords.Backup),
		},
	}
}
