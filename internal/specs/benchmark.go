package specs

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
)

// BenchmarkOptions are the operator-wide settings of benchmark Jobs.
type BenchmarkOptions struct {
	// Image runs the benchmark (cmd/bench) unless spec.image overrides it.
	Image string
	// ImagePull is how benchmark pods pull their image.
	ImagePull ImagePull
}

const (
	ContainerBench = "bench"
	// LabelJobName is set by the Job controller on the Job's pods.
	LabelJobName = "batch.kubernetes.io/job-name"
	// LabelBenchmarkTarget names the RedisPersistence a benchmark Job drives.
	LabelBenchmarkTarget = "uringredis.io/benchmark-target"
	// benchmarkRunnerUID is the runner image's user.
	benchmarkRunnerUID = 65532
)

// BenchmarkJobName is the Job of run number index of rb. The API limits
// benchmark names so that it stays a valid label value.
func BenchmarkJobName(rb *v1alpha1.RedisBenchmark, index int) string {
	return fmt.Sprintf("%s-%d", rb.Name, index)
}

// BenchmarkRun is one Job of a benchmark: a target in a repetition.
type BenchmarkRun struct {
	Index      int // in run order, from 0; names the Job
	Target     int // in spec.targets
	Repetition int // from 1
}

// Runs is how many Jobs rb runs: every target once per repetition.
func Runs(rb *v1alpha1.RedisBenchmark) int {
	return len(rb.Spec.Targets) * Repetitions(rb)
}

func Repetitions(rb *v1alpha1.RedisBenchmark) int {
	return int(cmp.Or(rb.Spec.Repetitions, 1))
}

// RunAt is run number index: repetitions interleave, so the targets of
// repetition 1 come first, in spec order, then those of repetition 2.
func RunAt(rb *v1alpha1.RedisBenchmark, index int) BenchmarkRun {
	n := len(rb.Spec.Targets)
	return BenchmarkRun{Index: index, Target: index % n, Repetition: index/n + 1}
}

// Last is true for the run that ends its target's repetitions.
func (run BenchmarkRun) Last(rb *v1alpha1.RedisBenchmark) bool {
	return run.Repetition == Repetitions(rb)
}

func benchmarkLabels(rb *v1alpha1.RedisBenchmark) map[string]string {
	return map[string]string{
		LabelName:      "redis-benchmark",
		LabelInstance:  rb.Name,
		LabelManagedBy: FieldOwner,
		LabelComponent: "benchmark",
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

// PersistenceMode names a RedisPersistence's persistence the way results and
// metrics label it: none, rdb, aof-<fsync> or uring-<ack>.
func PersistenceMode(rp *v1alpha1.RedisPersistence) string {
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

// StorageLabel names rp's volume for a benchmark's results: its
// StorageClass when spec.storage names one, else its storage profile (the
// StorageClass behind a profile is the operator's flag, the same for every
// target of a benchmark).
func StorageLabel(rp *v1alpha1.RedisPersistence) string {
	s := StorageOf(rp)
	return cmp.Or(s.StorageClassName, string(s.Profile))
}

// DurableMode is true for the modes that promise never to lose an acknowledged write.
func DurableMode(mode string) bool { return mode == "aof-always" || mode == "uring-durable" }

// benchmarkDatabase is the database rp set aside for benchmarks.
func benchmarkDatabase(rp *v1alpha1.RedisPersistence) int32 {
	if rp.Spec.Benchmark == nil {
		return DefaultBenchmarkDatabase
	}
	return cmp.Or(rp.Spec.Benchmark.Database, DefaultBenchmarkDatabase)
}

// runnerDatabase is the database a runner writes to on rp: the benchmark's,
// or 0 on a cluster, which has no other.
func runnerDatabase(rp *v1alpha1.RedisPersistence) int32 {
	if Sharded(rp) {
		return 0
	}
	return benchmarkDatabase(rp)
}

// runnerAddr is where a runner reaches rp: its Service, which on a cluster
// selects every server (the runner reads the slot map from the one it
// reaches).
func runnerAddr(rp *v1alpha1.RedisPersistence) string {
	return fmt.Sprintf("%s.%s.svc:%d", rp.Name, rp.Namespace, RedisPort)
}

// DefaultBenchmarkDatabase is the API's default of spec.benchmark.database.
const DefaultBenchmarkDatabase = 15

// defaultBenchmarkDeadline is the API's default of spec.activeDeadlineSeconds.
const defaultBenchmarkDeadline = 3600

// benchmarkArgs is the runner's command line for one run against rp. Each
// Job measures every command once; the repetitions are Jobs of their own.
func benchmarkArgs(rb *v1alpha1.RedisBenchmark, run BenchmarkRun, rp *v1alpha1.RedisPersistence) []string {
	w := rb.Spec.Workload
	commands := make([]string, 0, len(w.Commands))
	for _, c := range w.Commands {
		commands = append(commands, string(c))
	}
	if len(commands) == 0 {
		commands = []string{"set", "hset", "lpush", "incr"}
	}
	args := []string{
		"--addr=" + runnerAddr(rp),
		"--db=" + strconv.Itoa(int(runnerDatabase(rp))),
		"--target=" + rp.Name,
		"--mode=" + PersistenceMode(rp),
		"--storage=" + StorageLabel(rp),
		"--commands=" + strings.Join(commands, ","),
		"--requests=" + strconv.Itoa(int(cmp.Or(w.Requests, 100000))),
		"--clients=" + strconv.Itoa(int(cmp.Or(w.Clients, 50))),
		"--pipeline=" + strconv.Itoa(int(cmp.Or(w.Pipeline, 1))),
		"--value-size=" + strconv.Itoa(int(cmp.Or(w.ValueSize, 64))),
		"--keyspace=" + strconv.Itoa(int(cmp.Or(w.Keyspace, 100000))),
	}
	if w.MixedReads {
		args = append(args, "--mixed-reads")
	}
	if Sharded(rp) {
		// The runner drives every primary.
		args = append(args, "--cluster")
	}
	if cc := rb.Spec.CrashCheck; cc != nil && run.Last(rb) {
		args = append(args,
			"--crash-check",
			"--crash-clients="+strconv.Itoa(int(cmp.Or(cc.Clients, 50))),
			"--crash-seconds="+strconv.Itoa(int(cmp.Or(cc.WriteSeconds, 5))),
		)
	}
	return args
}

// runnerPod is the pod spec of a runner of rp's (a benchmark Job's, the
// steady writer): image with args, signed in as the benchmark user, over
// TLS when rp serves it.
func runnerPod(rp *v1alpha1.RedisPersistence, image string, args []string, resources *corev1.ResourceRequirements, pull ImagePull) corev1.PodSpec {
	container := corev1.Container{
		Name:                     ContainerBench,
		Image:                    image,
		Args:                     args,
		Env:                      SignInEnv(rp, bench.User, ACLBenchmarkKey),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          restrictedSecurityContext(),
	}
	if resources != nil {
		container.Resources = *resources
	}
	pod := jobPod(container)
	if TLSEnabled(rp) {
		BenchmarkOverTLS(rp, &pod)
	}
	pull.ApplyTo(&pod)
	return pod
}

// jobPod is the pod of a benchmark or backup Job, which runs container once
// as the images' non-root user (both images run as 65532), without a
// ServiceAccount token: neither needs the Kubernetes API.
func jobPod(container corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{
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
}

// SteadyWriterPod is a pod named name of the benchmark runner that measures
// rp's write availability (bench --steady-rate, internal/bench.SteadyWrite):
// rate SETs a second through rp's Service, as the benchmark user, in the
// benchmark's database, until the pod is deleted. Each outage is a line of
// its log as it ends; at SIGTERM it reads the acknowledged writes back and
// its result is the termination message (the grace period leaves it a
// minute for that).
func SteadyWriterPod(rp *v1alpha1.RedisPersistence, name string, rate int, opts BenchmarkOptions) *corev1.Pod {
	args := []string{
		"--addr=" + runnerAddr(rp),
		"--steady-rate=" + strconv.Itoa(rate),
		"--steady-writers=4",
		"--db=" + strconv.Itoa(int(runnerDatabase(rp))),
	}
	if Sharded(rp) {
		args = append(args, "--cluster")
	}
	spec := runnerPod(rp, opts.Image, args, nil, opts.ImagePull)
	spec.TerminationGracePeriodSeconds = ptr.To(int64(90))
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		// A benchmark runner of rp's: its NetworkPolicy admits it.
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rp.Namespace, Labels: map[string]string{
			LabelManagedBy: FieldOwner, LabelComponent: "benchmark", LabelBenchmarkTarget: rp.Name,
		}},
		Spec: spec,
	}
}

// BenchmarkJob is the Job of run, against its target rp. The
// runner prints its result as the termination message, which the operator
// reads from the finished pod; backoffLimit 0 because a retried benchmark
// would measure a server the failed run already loaded. The runner needs no
// Kubernetes API: it kills the server for the crash check over the Redis
// protocol, so its pod gets no ServiceAccount token.
func BenchmarkJob(rb *v1alpha1.RedisBenchmark, run BenchmarkRun, rp *v1alpha1.RedisPersistence, opts BenchmarkOptions) *batchv1.Job {
	meta := benchmarkObjectMeta(rb, BenchmarkJobName(rb, run.Index))
	meta.Labels[LabelBenchmarkTarget] = rp.Name
	image := opts.Image
	if rb.Spec.Image != "" {
		image = rb.Spec.Image
	}
	pod := runnerPod(rp, image, benchmarkArgs(rb, run, rp), rb.Spec.Resources, opts.ImagePull)
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(int32(0)),
			ActiveDeadlineSeconds: ptr.To(cmp.Or(rb.Spec.ActiveDeadlineSeconds, defaultBenchmarkDeadline)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: benchmarkLabels(rb)},
				Spec:       pod,
			},
		},
	}
	job.Spec.Template.Labels[LabelBenchmarkTarget] = rp.Name
	return job
}
