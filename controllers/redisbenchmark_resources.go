package controllers

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// BenchmarkOptions are the operator-wide settings of benchmark Jobs.
type BenchmarkOptions struct {
	// Image runs the benchmark (cmd/bench) unless spec.image overrides it.
	Image string
}

const (
	containerBench = "bench"
	// labelJobName is set by the Job controller on the Job's pods.
	labelJobName = "batch.kubernetes.io/job-name"
	// labelBenchmarkTarget names the RedisPersistence a benchmark Job drives.
	labelBenchmarkTarget = "uringredis.io/benchmark-target"
	// benchmarkRunnerUID is the runner image's user.
	benchmarkRunnerUID = 65532
)

// benchmarkJobName is the Job that runs target number index of rb. The API
// limits benchmark names so that it stays a valid label value.
func benchmarkJobName(rb *v1alpha1.RedisBenchmark, index int) string {
	return fmt.Sprintf("%s-%d", rb.Name, index)
}

// crashCheckAccountName is the runner's ServiceAccount when a crash check
// needs to exec into the server pods.
func crashCheckAccountName(rb *v1alpha1.RedisBenchmark) string { return rb.Name + "-crash-check" }

func benchmarkLabels(rb *v1alpha1.RedisBenchmark) map[string]string {
	return map[string]string{
		labelName:      "redis-benchmark",
		labelInstance:  rb.Name,
		labelManagedBy: fieldOwner,
		labelComponent: "benchmark",
	}
}

func benchmarkObjectMeta(rb *v1alpha1.RedisBenchmark, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: rb.Namespace,
		Labels:    benchmarkLabels(rb),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         v1alpha1.GroupVersion.String(),
			Kind:               "RedisBenchmark",
			Name:               rb.Name,
			UID:                rb.UID,
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// persistenceMode names a RedisPersistence's persistence the way results and
// metrics label it: none, rdb, aof-<fsync> or uring-<ack>.
func persistenceMode(rp *v1alpha1.RedisPersistence) string {
	switch rp.Spec.Mode {
	case v1alpha1.ModeAOF:
		fsync := v1alpha1.FsyncEverySec
		if rp.Spec.AOF != nil && rp.Spec.AOF.Fsync != "" {
			fsync = rp.Spec.AOF.Fsync
		}
		return "aof-" + string(fsync)
	case v1alpha1.ModeUring:
		ack := v1alpha1.AckDurable
		if rp.Spec.Uring != nil && rp.Spec.Uring.Ack != "" {
			ack = rp.Spec.Uring.Ack
		}
		return "uring-" + string(ack)
	default:
		return string(rp.Spec.Mode)
	}
}

// durableMode is true for the modes that promise never to lose an acknowledged write.
func durableMode(mode string) bool { return mode == "aof-always" || mode == "uring-durable" }

// benchmarkArgs is the runner's command line for one target.
func benchmarkArgs(rb *v1alpha1.RedisBenchmark, rp *v1alpha1.RedisPersistence) []string {
	w := rb.Spec.Workload
	commands := make([]string, 0, len(w.Commands))
	for _, c := range w.Commands {
		commands = append(commands, string(c))
	}
	if len(commands) == 0 {
		commands = []string{"set", "hset", "lpush", "incr"}
	}
	args := []string{
		"--addr=" + fmt.Sprintf("%s.%s.svc:%d", rp.Name, rp.Namespace, redisPort),
		"--target=" + rp.Name,
		"--mode=" + persistenceMode(rp),
		"--commands=" + strings.Join(commands, ","),
		"--requests=" + strconv.Itoa(int(orDefaultInt(w.Requests, 100000))),
		"--clients=" + strconv.Itoa(int(orDefaultInt(w.Clients, 50))),
		"--pipeline=" + strconv.Itoa(int(orDefaultInt(w.Pipeline, 1))),
		"--value-size=" + strconv.Itoa(int(orDefaultInt(w.ValueSize, 64))),
		"--keyspace=" + strconv.Itoa(int(orDefaultInt(w.Keyspace, 100000))),
		"--repetitions=" + strconv.Itoa(int(orDefaultInt(rb.Spec.Repetitions, 1))),
	}
	if w.MixedReads {
		args = append(args, "--mixed-reads")
	}
	if cc := rb.Spec.CrashCheck; cc != nil {
		args = append(args,
			"--crash-check",
			"--crash-clients="+strconv.Itoa(int(orDefaultInt(cc.Clients, 50))),
			"--crash-seconds="+strconv.Itoa(int(orDefaultInt(cc.WriteSeconds, 5))),
			"--crash-pod="+rp.Name+"-0",
			"--crash-container="+containerRedis,
		)
	}
	return args
}

// buildBenchmarkJob runs the benchmark against target number index, rp. The
// runner prints its result as the termination message, which the operator
// reads from the finished pod; backoffLimit 0 because a retried benchmark
// would measure a server the failed run already loaded.
func buildBenchmarkJob(rb *v1alpha1.RedisBenchmark, index int, rp *v1alpha1.RedisPersistence, opts BenchmarkOptions) *batchv1.Job {
	meta := benchmarkObjectMeta(rb, benchmarkJobName(rb, index))
	meta.Labels[labelBenchmarkTarget] = rp.Name
	image := opts.Image
	if rb.Spec.Image != "" {
		image = rb.Spec.Image
	}
	container := corev1.Container{
		Name:                     containerBench,
		Image:                    image,
		Args:                     benchmarkArgs(rb, rp),
		Env:                      passwordEnv(rp, "REDIS_PASSWORD"),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedSecurityContext(),
	}
	if rb.Spec.Resources != nil {
		container.Resources = *rb.Spec.Resources
	}
	pod := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []corev1.Container{container},
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(int64(benchmarkRunnerUID)),
			RunAsGroup:     ptr.To(int64(benchmarkRunnerUID)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	if rb.Spec.CrashCheck != nil {
		pod.ServiceAccountName = crashCheckAccountName(rb)
		pod.AutomountServiceAccountToken = ptr.To(true)
	}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: benchmarkLabels(rb)},
				Spec:       pod,
			},
		},
	}
	job.Spec.Template.Labels[labelBenchmarkTarget] = rp.Name
	return job
}

// buildCrashCheckAccess lets the runner kill the targets' servers: exec into
// exactly those pods, nothing else.
func buildCrashCheckAccess(rb *v1alpha1.RedisBenchmark) []client.Object {
	name := crashCheckAccountName(rb)
	pods := make([]string, 0, len(rb.Spec.Targets))
	for _, t := range rb.Spec.Targets {
		pods = append(pods, t+"-0")
	}
	return []client.Object{
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: benchmarkObjectMeta(rb, name),
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: benchmarkObjectMeta(rb, name),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: pods, Verbs: []string{"get"}},
				{APIGroups: []string{""}, Resources: []string{"pods/exec"}, ResourceNames: pods, Verbs: []string{"create"}},
			},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: benchmarkObjectMeta(rb, name),
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: rb.Namespace}},
		},
	}
}
