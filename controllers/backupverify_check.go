package controllers

// The check of a verification: the temporary instance's restore container
// and, once it is Ready, its server against the backup's backup.json.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// verification is a verification's outcome.
type verification struct {
	result  v1alpha1.VerificationResult
	message string
	keys    *int64
}

func failedVerification(format string, args ...any) *verification {
	return &verification{result: v1alpha1.VerificationFailed, message: fmt.Sprintf(format, args...)}
}

// shownProblems is how many differences a message lists.
const shownProblems = 5

// check returns the outcome once there is one: the restore container
// refused the backup, or the instance is Ready and its server was compared
// with backup.json. Until then it says what it waits for.
func (r *BackupVerifier) check(ctx context.Context, rp, temp *v1alpha1.RedisPersistence, b *v1alpha1.RedisBackup) (*verification, string, error) {
	pod := &corev1.Pod{}
	podName := temp.Name + "-0"
	if err := r.Get(ctx, types.NamespacedName{Namespace: temp.Namespace, Name: podName}, pod); client.IgnoreNotFound(err) != nil {
		return nil, "", err
	} else if err != nil {
		return nil, "its server's pod " + podName + " does not exist: " + readyMessage(temp), nil
	}
	if msg, failed := restoreFailure(pod); failed {
		return failedVerification("the restore refused the backup: %s", msg), "", nil
	}
	if !meta.IsStatusConditionTrue(temp.Status.Conditions, v1alpha1.ConditionReady) {
		return nil, "it is not Ready: " + readyMessage(temp), nil
	}
	m, err := r.recorded(ctx, rp, b)
	if errors.Is(err, backup.ErrNoBackup) {
		return failedVerification("the store lost the backup's metadata: %v", err), "", nil
	} else if err != nil {
		return nil, "the backup's backup.json cannot be read: " + err.Error(), nil
	}
	if m.SHA256 != b.Status.SHA256 {
		return failedVerification("backup.json describes a snapshot of SHA-256 %s, the RedisBackup one of %s", m.SHA256, b.Status.SHA256), "", nil
	}
	password, err := r.password(ctx, temp)
	if err != nil {
		return nil, err.Error(), nil
	}
	server := dialServer(r.ServerAddress(pod), serverCredentials{password: password})
	defer func() { _ = server.Close() }()
	size, err := server.DBSize(ctx).Result()
	if err != nil {
		return nil, "its server does not answer: " + err.Error(), nil
	}
	restored := &verification{keys: &size}
	if m.Keyspace == nil {
		restored.result = v1alpha1.VerificationVerified
		restored.message = fmt.Sprintf("the snapshot passed its SHA-256 and RDB checksum and the server loaded %d keys; the backup recorded no keys to compare with (%s)",
			size, firstNonEmpty(m.KeyspaceError, "taken before backups recorded them"))
		return restored, "", nil
	}
	if b.Status.Keys != nil && *b.Status.Keys != m.Keyspace.Keys() {
		return failedVerification("backup.json records %d keys, the RedisBackup %d", m.Keyspace.Keys(), *b.Status.Keys), "", nil
	}
	summary, problems, err := backup.CheckRestore(ctx, server, m.Keyspace, r.Clock.Now())
	if err != nil {
		return nil, "its server does not answer: " + err.Error(), nil
	}
	restored.result, restored.message = v1alpha1.VerificationVerified, "the snapshot passed its SHA-256 and RDB checksum; "+summary+": all match"
	if len(problems) > 0 {
		restored.result, restored.message = v1alpha1.VerificationFailed, summary+"; "+listProblems(problems)
	}
	return restored, "", nil
}

func listProblems(problems []string) string {
	shown := problems[:min(len(problems), shownProblems)]
	text := strings.Join(shown, "; ")
	if more := len(problems) - len(shown); more > 0 {
		text += fmt.Sprintf(" (and %d more)", more)
	}
	return text
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// recorded reads b's backup.json from the store its location names, with
// rp's destination.
func (r *BackupVerifier) recorded(ctx context.Context, rp *v1alpha1.RedisPersistence, b *v1alpha1.RedisBackup) (backup.Metadata, error) {
	if rp.Spec.Backup == nil {
		return backup.Metadata{}, errors.New("the instance has no spec.backup.destination to read it with")
	}
	key := strings.TrimPrefix(b.Status.Location, "s3://"+rp.Spec.Backup.Destination.S3.Bucket+"/")
	cut := strings.LastIndex(key, "/backups/")
	if cut < 0 {
		return backup.Metadata{}, fmt.Errorf("the location %s is not in the bucket %s", b.Status.Location, rp.Spec.Backup.Destination.S3.Bucket)
	}
	store, err := openStore(ctx, r.APIReader, rp, key[:cut])
	if err != nil {
		return backup.Metadata{}, err
	}
	return backup.FindBackup(ctx, store, b.Name)
}

// password is the temporary instance's server password, "" without one.
func (r *BackupVerifier) password(ctx context.Context, temp *v1alpha1.RedisPersistence) (string, error) {
	ref := specs.AuthSecretRef(temp)
	if ref == nil {
		return "", nil
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: temp.Namespace, Name: ref.Name}, secret); err != nil {
		return "", fmt.Errorf("its password Secret %s cannot be read: %w", ref.Name, err)
	}
	return string(secret.Data[ref.Key]), nil
}

// restoreFailure is the message of the pod's restore container when it
// ended with an error, now or before its last restart.
func restoreFailure(pod *corev1.Pod) (string, bool) {
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name != specs.ContainerRestore {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode != 0 {
				return lastLine(firstNonEmpty(t.Message, fmt.Sprintf("exit code %d", t.ExitCode))), true
			}
		}
	}
	return "", false
}

// readyMessage is what the instance's Ready condition says.
func readyMessage(rp *v1alpha1.RedisPersistence) string {
	if c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return "it has no Ready condition yet"
}
