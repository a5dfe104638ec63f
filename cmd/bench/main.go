// Command bench is the RedisBenchmark runner: it drives valkey-benchmark
// against one server, samples the server's INFO before and after every test,
// optionally crash-checks it, and prints one JSON result, which it also writes
// as the container's termination message for the operator to collect. Every
// key it writes goes to one database the RedisPersistence set aside for
// benchmarks, which it empties before it exits.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/uring-redis/uring-redis-operator/internal/bench"
)

func main() {
	var (
		w                          bench.Workload
		addr, commands, tool       string
		termPath                   string
		tlsCA, tlsCert, tlsKey     string
		db                         int
		crashCheck, cluster        bool
		crashClients, crashSeconds int
		steady                     bench.SteadyOptions
	)
	flag.StringVar(&addr, "addr", "", "Server address, host:port.")
	flag.IntVar(&db, "db", 15, "Database every key is written to; it must hold no application's keys, and is emptied at the end.")
	flag.BoolVar(&cluster, "cluster", false, "The server is a node of a cluster: drive every primary (valkey-benchmark --cluster); --db must be 0.")
	flag.StringVar(&w.Target, "target", "", "RedisPersistence name, echoed in the result.")
	flag.StringVar(&w.Mode, "mode", "", "Persistence mode label, echoed in the result.")
	flag.StringVar(&w.Storage, "storage", "", "The target's volume (StorageClass or storage profile), echoed in the result.")
	flag.StringVar(&commands, "commands", "set,hset,lpush,incr", "valkey-benchmark tests, comma-separated.")
	flag.IntVar(&w.Requests, "requests", 100000, "Requests per test.")
	flag.IntVar(&w.Clients, "clients", 50, "Concurrent connections.")
	flag.IntVar(&w.Pipeline, "pipeline", 1, "Pipelined requests per connection.")
	flag.IntVar(&w.ValueSize, "value-size", 64, "Value size in bytes.")
	flag.IntVar(&w.Keyspace, "keyspace", 100000, "Distinct keys.")
	flag.BoolVar(&w.MixedReads, "mixed-reads", false, "Also measure GETs of untouched keys during SET load.")
	flag.BoolVar(&crashCheck, "crash-check", false, "Kill the server (DEBUG SEGFAULT) while clients write and count lost acknowledged keys.")
	flag.IntVar(&crashClients, "crash-clients", 50, "Writers during the crash check.")
	flag.IntVar(&crashSeconds, "crash-seconds", 5, "Seconds of writes before the kill.")
	flag.IntVar(&steady.Rate, "steady-rate", 0, "Instead of benchmarking, measure write availability: SET this many distinct keys per second until SIGTERM, print each outage (a stretch with no write acknowledged) as a JSON line when it ends, and at the end the result, with the acknowledged writes the instance lost.")
	flag.IntVar(&steady.Writers, "steady-writers", 4, "Connections the --steady-rate writes are spread over.")
	flag.StringVar(&tool, "tool", "", "valkey-benchmark binary (default: valkey-benchmark or redis-benchmark from PATH).")
	flag.StringVar(&tlsCA, "tls-ca-cert", "", "CA certificate file: reach the server over TLS, verifying its certificate against it.")
	flag.StringVar(&tlsCert, "tls-cert", "", "Client certificate file, for a server that requires one (with --tls-key).")
	flag.StringVar(&tlsKey, "tls-key", "", "Client key file.")
	flag.StringVar(&termPath, "termination-log", "/dev/termination-log", "Where the result is written for the operator; empty to skip.")
	flag.Parse()
	w.Commands = strings.Split(commands, ",")

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	var serverTLS *bench.TLS
	if tlsCA != "" {
		var err error
		if serverTLS, err = bench.LoadTLS(tlsCA, tlsCert, tlsKey); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	r := bench.Runner{Tool: tool, Addr: addr, User: os.Getenv("REDIS_USER"), Password: os.Getenv("REDIS_PASSWORD"), DB: db, TLS: serverTLS, Cluster: cluster}
	var err error
	if steady.Rate > 0 {
		err = runSteady(ctx, r, steady, termPath)
	} else {
		err = run(ctx, r, w, termPath, crashCheck, crashClients, time.Duration(crashSeconds)*time.Second)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// startWait bounds how long the runner waits for its target to serve before
// it starts: a Service without a ready endpoint yet, or a primary whose
// replicas are still connecting.
const startWait = 2 * time.Minute

func run(ctx context.Context, r bench.Runner, w bench.Workload, termPath string, crashCheck bool, crashClients int, crashWrite time.Duration) (err error) {
	switch {
	case r.Addr == "" || w.Target == "":
		return errors.New("--addr and --target are required")
	case errClusterDB(r) != nil:
		return errClusterDB(r)
	case r.Cluster && crashCheck:
		return errors.New("--crash-check kills one server; a cluster fails over instead of restarting it, so the check has no meaning there")
	}
	if r.Tool == "" {
		for _, name := range []string{"valkey-benchmark", "redis-benchmark"} {
			if path, err := exec.LookPath(name); err == nil {
				r.Tool = path
				break
			}
		}
		if r.Tool == "" {
			return errors.New("neither valkey-benchmark nor redis-benchmark is on PATH")
		}
	}
	if err := r.WaitServing(ctx, startWait); err != nil {
		return err
	}
	if err := r.ClaimDatabase(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.DeleteKeys(ctx)) }()
	res, err := r.Run(ctx, w)
	if err != nil {
		return err
	}
	if crashCheck {
		crash, err := r.CrashCheck(ctx, crashClients, crashWrite, 5*time.Minute, r.DebugSegfault)
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

// errClusterDB refuses a database other than 0 on a cluster.
func errClusterDB(r bench.Runner) error {
	if r.Cluster && r.DB != 0 {
		return errors.New("--cluster needs --db=0: a cluster has database 0 only")
	}
	return nil
}

// runSteady writes steadily until ctx ends (SIGTERM): the availability
// measurement of a day-2 operation. Each outage is a JSON line on stdout
// ({"outage": ...}) as it ends; the result is the last line, and without
// its outages the termination message.
func runSteady(ctx context.Context, r bench.Runner, o bench.SteadyOptions, termPath string) (err error) {
	switch {
	case r.Addr == "":
		return errors.New("--addr is required")
	case errClusterDB(r) != nil:
		return errClusterDB(r)
	}
	if err := r.WaitServing(ctx, startWait); err != nil {
		return err
	}
	if err := r.ClaimDatabase(ctx); err != nil {
		return err
	}
	// The writes stop at SIGTERM; the read-back and the cleanup come after.
	defer func() { err = errors.Join(err, r.DeleteKeys(context.WithoutCancel(ctx))) }()
	enc := json.NewEncoder(os.Stdout)
	res, err := r.SteadyWrite(ctx, o, func(outage bench.Outage) {
		_ = enc.Encode(map[string]bench.Outage{"outage": outage})
	})
	if err != nil {
		return err
	}
	out, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	if termPath == "" {
		return nil
	}
	// A termination message holds 4 KiB: the outages and the failures by
	// second are the log's.
	res.Outages, res.FailedBySecond = nil, nil
	if out, err = json.Marshal(res); err != nil {
		return err
	}
	return os.WriteFile(termPath, out, 0o644)
}
