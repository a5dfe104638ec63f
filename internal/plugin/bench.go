package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/benchreport"
)

// BenchName is the RedisBenchmark `bench` creates at now when --name is
// not given: bench-<yyyymmddhhmmss> in UTC.
func BenchName(now time.Time) string { return "bench-" + now.UTC().Format("20060102150405") }

// benchOptions are bench's flags: the workload every target is driven with.
type benchOptions struct {
	name        string
	commands    []string
	clients     int32
	requests    int32
	pipeline    int32
	valueSize   int32
	repetitions int32
	mixedReads  bool
	// crashCheck runs the crash check for crashSeconds of writes by as many
	// clients as the workload's.
	crashCheck   bool
	crashSeconds int32
	// runnerCPU is the runner's CPU request ("" for none).
	runnerCPU string
	wait      bool
	timeout   time.Duration
}

func (r *root) benchCommand() *cobra.Command {
	o := benchOptions{wait: true}
	cmd := &cobra.Command{
		Use:   "bench NAME... [--commands set,hset] [--clients 50] [--requests 100000] [--repetitions 3]",
		Short: "Compare instances with a RedisBenchmark and print the table `make demo` prints",
		Long: "bench creates a RedisBenchmark of the instances NAME... (each must allow benchmarks with\n" +
			"spec.benchmark), which the operator runs one target at a time, the repetitions interleaved.\n" +
			"It follows the benchmark and prints one row per target (the median repetition): write\n" +
			"throughput and its ratio to the aof-everysec and aof-always targets when there are such,\n" +
			"CPU, p99, fsync p99 and the crash check: the comparison table of `make demo`, from the\n" +
			"same code. With -o json|yaml it prints the RedisBenchmark instead. It exits non-zero when\n" +
			"the benchmark Failed.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, namespace, err := r.client()
			if err != nil {
				return err
			}
			b, err := createBenchmark(cmd.Context(), c, namespace, args, o, r.env.Clock.Now())
			if err != nil {
				return err
			}
			progress := r.env.Out
			if output(r.output) != outputTable {
				progress = r.env.ErrOut
			}
			_, _ = fmt.Fprintf(progress, "redisbenchmark/%s created: %s, %d repetition(s) of %s\n", b.Name,
				strings.Join(b.Spec.Targets, ", "), b.Spec.Repetitions, describeWorkload(b.Spec.Workload))
			if !o.wait {
				_, err := r.print(r.env.Out, b)
				return err
			}
			var deadline <-chan time.Time
			if o.timeout > 0 {
				timer := time.NewTimer(o.timeout)
				defer timer.Stop()
				deadline = timer.C
			}
			b, err = waitForBenchmark(cmd.Context(), c, b, r.env.PollInterval, deadline, progress)
			if b == nil {
				return err
			}
			if printed, perr := r.print(r.env.Out, b); printed {
				return errors.Join(perr, err)
			}
			if err != nil {
				return err
			}
			return benchreport.Table(r.env.Out, b.Status.Results, b.Status.CrashChecks)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "The RedisBenchmark's name (default bench-<yyyymmddhhmmss>).")
	f.StringSliceVar(&o.commands, "commands", nil, "Commands to run: set, hset, lpush, incr, get (default: the operator's, set).")
	f.Int32Var(&o.clients, "clients", 0, "Connections per target (default: the operator's, 50).")
	f.Int32Var(&o.requests, "requests", 0, "Requests per command (default: the operator's, 100000).")
	f.Int32Var(&o.pipeline, "pipeline", 0, "Requests per round trip (default 1).")
	f.Int32Var(&o.valueSize, "value-size", 0, "Value size in bytes (default 64).")
	f.Int32Var(&o.repetitions, "repetitions", 0, "Interleaved repetitions of every target; the table shows the median (default 1).")
	f.BoolVar(&o.mixedReads, "mixed-reads", false, "Also read clean keys while SET runs (command get-during-set).")
	f.BoolVar(&o.crashCheck, "crash-check", false, "Kill each target's server after its writes and count the acknowledged writes lost (each target must allow it: spec.benchmark.crashCheck).")
	f.Int32Var(&o.crashSeconds, "crash-check-seconds", 0, "With --crash-check, how long the clients write before the kill (default: the operator's, 5).")
	f.StringVar(&o.runnerCPU, "runner-cpu", "", "The runner's CPU request (e.g. 500m), so that it does not compete with the servers for CPU.")
	f.BoolVar(&o.wait, "wait", true, "Follow the benchmark to its end and print the table; --wait=false only creates it.")
	f.DurationVar(&o.timeout, "timeout", 0, "Give up following after this long (0: as long as it takes); the benchmark goes on.")
	return cmd
}

// createBenchmark creates the RedisBenchmark of targets once each exists
// and allows benchmarks: one that does not would hold the benchmark
// waiting, which the operator reports only in a condition.
func createBenchmark(ctx context.Context, c client.Client, namespace string, targets []string, o benchOptions, now time.Time) (*v1alpha1.RedisBenchmark, error) {
	for _, name := range targets {
		rp, err := getInstance(ctx, c, namespace, name)
		if err != nil {
			return nil, err
		}
		if rp.Spec.Benchmark == nil {
			return nil, fmt.Errorf("the RedisPersistence %s/%s does not allow benchmarks: set spec.benchmark: {} on it (a benchmark writes to its database 15 and empties it after)", namespace, name)
		}
		if o.crashCheck && !rp.Spec.Benchmark.CrashCheck {
			return nil, fmt.Errorf("the RedisPersistence %s/%s does not allow the crash check: set spec.benchmark.crashCheck: true on it (it turns on DEBUG, and changing it restarts the server)", namespace, name)
		}
	}
	w := v1alpha1.BenchmarkWorkload{Requests: o.requests, Clients: o.clients, Pipeline: o.pipeline, ValueSize: o.valueSize, MixedReads: o.mixedReads}
	for _, command := range o.commands {
		w.Commands = append(w.Commands, v1alpha1.BenchmarkCommand(strings.TrimSpace(command)))
	}
	b := &v1alpha1.RedisBenchmark{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RedisBenchmark"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: o.name},
		Spec:       v1alpha1.RedisBenchmarkSpec{Targets: targets, Workload: w, Repetitions: o.repetitions},
	}
	if o.crashCheck {
		b.Spec.CrashCheck = &v1alpha1.CrashCheckSpec{Clients: o.clients, WriteSeconds: o.crashSeconds}
	}
	if o.runnerCPU != "" {
		cpu, err := resource.ParseQuantity(o.runnerCPU)
		if err != nil {
			return nil, fmt.Errorf("--runner-cpu %s: %w", o.runnerCPU, err)
		}
		b.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}
	}
	if b.Name == "" {
		b.Name = BenchName(now)
	}
	// The API server fills in the defaults and refuses what the schema does
	// not allow (a command it does not know, too many targets), saying why.
	if err := c.Create(ctx, b, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("the RedisBenchmark %s/%s already exists: give another --name, or delete it", namespace, b.Name)
		}
		return nil, fmt.Errorf("creating the RedisBenchmark %s/%s: %w", namespace, b.Name, err)
	}
	return b, nil
}

func describeWorkload(w v1alpha1.BenchmarkWorkload) string {
	commands := make([]string, 0, len(w.Commands))
	for _, c := range w.Commands {
		commands = append(commands, string(c))
	}
	return fmt.Sprintf("%s, %d requests, %d clients, pipeline %d", strings.Join(commands, " "), w.Requests, w.Clients, w.Pipeline)
}

// errBenchmarkFailed is returned when a benchmark ended Failed.
var errBenchmarkFailed = errors.New("benchmark failed")

// waitForBenchmark reads b every interval until its Complete or Failed
// condition is True, or until deadline (nil: none), writing its progress
// (runs done, the Job running) to progress as it changes. It returns the
// benchmark as last read, with errBenchmarkFailed when it Failed; a nil
// benchmark only when it could not be read at all.
func waitForBenchmark(ctx context.Context, c client.Client, b *v1alpha1.RedisBenchmark, interval time.Duration, deadline <-chan time.Time,
	progress io.Writer) (*v1alpha1.RedisBenchmark, error) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	runs := int32(len(b.Spec.Targets)) * max(b.Spec.Repetitions, 1)
	var seen string
	for {
		current := &v1alpha1.RedisBenchmark{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), current); err != nil {
			return nil, fmt.Errorf("reading the RedisBenchmark %s: %w", b.Name, err)
		}
		b = current
		if failed := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionFailed); failed != nil && failed.Status == metav1.ConditionTrue {
			return b, fmt.Errorf("%w: the RedisBenchmark %s Failed (%s): %s", errBenchmarkFailed, b.Name, failed.Reason, failed.Message)
		}
		if meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.ConditionComplete) {
			_, _ = fmt.Fprintf(progress, "%s: Complete, %d of %d runs\n", b.Name, b.Status.CompletedRuns, runs)
			return b, nil
		}
		state := fmt.Sprintf("%s: %d of %d runs done", b.Name, b.Status.CompletedRuns, runs)
		if b.Status.CurrentJob != "" {
			state += ", Job " + b.Status.CurrentJob + " running"
		} else if waiting := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionComplete); waiting != nil && waiting.Message != "" {
			state += ": " + waiting.Message
		}
		if state != seen {
			seen = state
			_, _ = fmt.Fprintln(progress, state)
		}
		select {
		case <-ctx.Done():
			return b, fmt.Errorf("stopped following the RedisBenchmark %s (%d of %d runs done): %w", b.Name, b.Status.CompletedRuns, runs, context.Cause(ctx))
		case <-deadline:
			return b, fmt.Errorf("the RedisBenchmark %s has %d of %d runs done after --timeout; it goes on without the plugin (kubectl get redisbenchmark %s)",
				b.Name, b.Status.CompletedRuns, runs, b.Name)
		case <-ticker.C:
		}
	}
}
