// Command bench is the RedisBenchmark runner: it drives valkey-benchmark
// against one server, samples the server's INFO before and after every test,
// optionally crash-checks it, and prints one JSON result, which it also writes
// as the container's termination message for the operator to collect.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/uring-redis/uring-redis-operator/internal/bench"
)

func main() {
	var (
		w                              bench.Workload
		addr, commands, tool, termPath string
		crashCheck                     bool
		crashClients, crashSeconds     int
		crashPod, crashContainer       string
	)
	flag.StringVar(&addr, "addr", "", "Server address, host:port.")
	flag.StringVar(&w.Target, "target", "", "RedisPersistence name, echoed in the result.")
	flag.StringVar(&w.Mode, "mode", "", "Persistence mode label, echoed in the result.")
	flag.StringVar(&commands, "commands", "set,hset,lpush,incr", "valkey-benchmark tests, comma-separated.")
	flag.IntVar(&w.Requests, "requests", 100000, "Requests per test.")
	flag.IntVar(&w.Clients, "clients", 50, "Concurrent connections.")
	flag.IntVar(&w.Pipeline, "pipeline", 1, "Pipelined requests per connection.")
	flag.IntVar(&w.ValueSize, "value-size", 64, "Value size in bytes.")
	flag.IntVar(&w.Keyspace, "keyspace", 100000, "Distinct keys.")
	flag.IntVar(&w.Repetitions, "repetitions", 1, "Runs per test; the median by throughput is reported.")
	flag.BoolVar(&w.MixedReads, "mixed-reads", false, "Also measure GETs of untouched keys during SET load.")
	flag.BoolVar(&crashCheck, "crash-check", false, "Kill the server while clients write and count lost acknowledged keys.")
	flag.IntVar(&crashClients, "crash-clients", 50, "Writers during the crash check.")
	flag.IntVar(&crashSeconds, "crash-seconds", 5, "Seconds of writes before the kill.")
	flag.StringVar(&crashPod, "crash-pod", "", "Server pod to crash, in the runner's namespace.")
	flag.StringVar(&crashContainer, "crash-container", "redis", "Server container in that pod.")
	flag.StringVar(&tool, "tool", "", "valkey-benchmark binary (default: valkey-benchmark or redis-benchmark from PATH).")
	flag.StringVar(&termPath, "termination-log", "/dev/termination-log", "Where the result is written for the operator; empty to skip.")
	flag.Parse()
	w.Commands = strings.Split(commands, ",")

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, w, addr, tool, termPath, crashCheck, crashClients, time.Duration(crashSeconds)*time.Second, crashPod, crashContainer)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w bench.Workload, addr, tool, termPath string, crashCheck bool, crashClients int, crashWrite time.Duration, crashPod, crashContainer string) error {
	if addr == "" || w.Target == "" {
		return errors.New("--addr and --target are required")
	}
	if tool == "" {
		for _, name := range []string{"valkey-benchmark", "redis-benchmark"} {
			if path, err := exec.LookPath(name); err == nil {
				tool = path
				break
			}
		}
		if tool == "" {
			return errors.New("neither valkey-benchmark nor redis-benchmark is on PATH")
		}
	}
	r := bench.Runner{Tool: tool, Addr: addr, Password: os.Getenv("REDIS_PASSWORD")}
	res, err := r.Run(ctx, w)
	if err != nil {
		return err
	}
	if crashCheck {
		kill, err := execKiller(crashPod, crashContainer)
		if err != nil {
			return err
		}
		crash, err := r.CrashCheck(ctx, crashClients, crashWrite, 5*time.Minute, kill)
		if err != nil {
			return fmt.Errorf("crash check: %w", err)
		}
		res.Crash = &crash
	}
	out, err := bench.Encode(res)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	if termPath != "" {
		return os.WriteFile(termPath, out, 0o644)
	}
	return nil
}

// execKiller crashes the server through the pods/exec API. A process cannot
// SIGKILL its own PID namespace's init, and the server is PID 1 of its
// container, so the runner asks the server to fault: DEBUG SEGFAULT (allowed
// from loopback with enable-debug-command local) dies on a real SIGSEGV,
// which, like kill -9, runs no shutdown path and flushes nothing.
func execKiller(pod, container string) (bench.Killer, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("the crash check needs the in-cluster API: %w", err)
	}
	ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(string(ns)).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{
				Container: container,
				Command:   []string{"valkey-cli", "-p", "6379", "DEBUG", "SEGFAULT"},
				Stdout:    true,
				Stderr:    true,
			}, scheme.ParameterCodec)
		exe, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
		if err != nil {
			return err
		}
		var out bytes.Buffer
		// The connection drops when the server dies; an error reply before that is what matters.
		_ = exe.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
		if strings.Contains(out.String(), "ERR") {
			return fmt.Errorf("DEBUG SEGFAULT in %s/%s: %s", pod, container, strings.TrimSpace(out.String()))
		}
		return nil
	}, nil
}
