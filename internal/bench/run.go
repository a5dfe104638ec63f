package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/benchparse"
)

// GetDuringSet is the command name of the mixed-reads measurement.
const GetDuringSet = "get-during-set"

// Workload is one target's run, as the operator's Job arguments describe it.
type Workload struct {
	Target, Mode string
	// Storage names the target's volume, echoed in the result.
	Storage                     string
	Commands                    []string
	Requests, Clients, Pipeline int
	ValueSize, Keyspace         int
	MixedReads                  bool
}

// Runner drives valkey-benchmark against one server.
type Runner struct {
	// Tool is the valkey-benchmark binary.
	Tool string
	Addr string // host:port
	// User and Password sign in; User is empty for the default user, and
	// Password empty for a server without one.
	User, Password string
	// DB is the database every key is written to, never an application's.
	DB int
	// TLS reaches a server that serves TLS only; nil for plain TCP.
	TLS *TLS
	// Cluster drives a sharded instance through Addr, a seed: DB must be 0.
	Cluster bool
}

func (r Runner) client() *redis.Client {
	o := r.options()
	o.DB, o.DialTimeout, o.ReadTimeout = r.DB, 5*time.Second, 30*time.Second
	return redis.NewClient(o)
}

// options reach and sign in to the server; each client sets the rest.
func (r Runner) options() *redis.Options {
	return &redis.Options{Addr: r.Addr, Username: r.User, Password: r.Password, TLSConfig: r.TLS.clientConfig()}
}

// Sample reads the server's INFO cpu, memory, persistence, replication and
// stats; a cluster's primaries' added up.
func (r Runner) Sample(ctx context.Context) (Sample, error) {
	samples, err := r.samples(ctx)
	if err != nil {
		return Sample{}, err
	}
	return mergeSamples(samples), nil
}

func sampleOf(ctx context.Context, c *redis.Client) (Sample, error) {
	info, err := c.InfoMap(ctx, "cpu", "memory", "persistence", "replication", "stats").Result()
	if err != nil {
		return Sample{}, fmt.Errorf("INFO: %w", err)
	}
	return SampleFromInfo(info)
}

// Run measures every command of w once. Repetitions are the operator's: a
// Job per target and repetition, interleaved across targets.
func (r Runner) Run(ctx context.Context, w Workload) (Result, error) {
	res := Result{Target: w.Target, Mode: w.Mode, Storage: w.Storage}
	commands := append([]string(nil), w.Commands...)
	if w.MixedReads {
		commands = append(commands, GetDuringSet)
	}
	for i, cmd := range commands {
		cr, before, after, err := r.measure(ctx, w, cmd)
		if err != nil {
			return res, fmt.Errorf("%s: %w", cmd, err)
		}
		// A replicated target is reported with the fewest replicas seen
		// streaming, so a run that lost one while it measured says so.
		if i == 0 {
			res.Replicas = before.Replicas
		}
		res.Replicas = min(res.Replicas, before.Replicas, after.Replicas)
		res.Engine, res.AckReplicas, res.Shards = after.Engine, after.AckReplicas, cr.shards
		res.Commands = append(res.Commands, cr.CommandResult)
	}
	return res, nil
}

// measured is one test's figures and, for a cluster, how many primaries
// served it.
type measured struct {
	CommandResult
	shards int
}

// measure runs one test between two INFO samples, which it returns too.
func (r Runner) measure(ctx context.Context, w Workload, cmd string) (measured, Sample, Sample, error) {
	host, portText, err := net.SplitHostPort(r.Addr)
	if err != nil {
		return measured{}, Sample{}, Sample{}, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return measured{}, Sample{}, Sample{}, err
	}
	args := ToolArgs{Host: host, Port: port, DB: r.DB, Clients: w.Clients, Requests: w.Requests, Keyspace: w.Keyspace,
		ValueSize: w.ValueSize, Pipeline: w.Pipeline, User: r.User, Password: r.Password, TLS: r.TLS.toolArgs(), Test: cmd,
		Cluster: r.Cluster}
	beforeEach, err := r.samples(ctx)
	if err != nil {
		return measured{}, Sample{}, Sample{}, err
	}
	before := mergeSamples(beforeEach)
	if before.Role != "master" {
		// The Service <name> selects the primary only; a replica here means
		// a failover is under way, and its writes would be refused.
		return measured{}, Sample{}, Sample{}, fmt.Errorf("the server at %s is a replica (role %q), not a primary: the benchmark writes, so it measures the primary only", r.Addr, before.Role)
	}
	var tool benchparse.Report
	ops := float64(w.Requests)
	start := time.Now()
	if cmd == GetDuringSet {
		// GETs of keys no write touches, while SET loads the server: a durable
		// engine must not hold these replies back until the disk catches up.
		reads := args
		reads.Test, reads.Command = "", []string{"GET", "untouched:__rand_int__"}
		if r.Cluster {
			// valkey-benchmark --cluster sends a custom command's key to the
			// node whose slot its {tag} names.
			reads.Command[1] = "untouched:{tag}:__rand_int__"
		}
		var setErr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _, setErr = r.tool(ctx, args.withTest("set")) }()
		tool, err = r.tool(ctx, reads)
		wg.Wait()
		if err == nil {
			err = setErr
		}
		ops *= 2
	} else {
		tool, err = r.tool(ctx, args)
	}
	elapsed := time.Since(start)
	if err != nil {
		return measured{}, Sample{}, Sample{}, err
	}
	afterEach, err := r.samples(ctx)
	if err != nil {
		return measured{}, Sample{}, Sample{}, err
	}
	after := mergeSamples(afterEach)
	count, p50, p99 := FsyncDelta(before, after)
	m := measured{CommandResult: CommandResult{
		Command:         cmd,
		OpsPerSecond:    tool.OpsPerSecond,
		P50Micros:       millisToMicros(tool.P50Ms),
		P99Micros:       millisToMicros(tool.P99Ms),
		P999Micros:      millisToMicros(tool.P999Ms),
		CPUMicrosPerKop: int64((after.CPUSeconds - before.CPUSeconds) * 1e6 * 1000 / ops),
		FsyncCount:      count,
		FsyncP50Micros:  p50,
		FsyncP99Micros:  p99,
		RSSBytes:        after.RSSBytes,
	}}
	if r.Cluster {
		m.shards, m.ShardOpsMin, m.ShardOpsMax = shardSpread(beforeEach, afterEach, elapsed)
	}
	return m, before, after, nil
}

func (a ToolArgs) withTest(test string) ToolArgs { a.Test, a.Command = test, nil; return a }

func (r Runner) tool(ctx context.Context, a ToolArgs) (benchparse.Report, error) {
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, r.Tool, a.Argv()...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return benchparse.Report{}, fmt.Errorf("valkey-benchmark: %w: %s", err, lastLine(stderr.String()+out.String()))
	}
	res, err := benchparse.Parse(out.String())
	if err != nil {
		return res, fmt.Errorf("%w: %s", err, lastLine(stderr.String()+out.String()))
	}
	return res, nil
}

func millisToMicros(ms float64) int64 { return int64(ms*1000 + 0.5) }

func lastLine(s string) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	if len(lines) == 0 {
		return "(no output)"
	}
	return strings.TrimSpace(lines[len(lines)-1])
}
