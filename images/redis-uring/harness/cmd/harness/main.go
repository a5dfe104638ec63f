// Command harness runs the redis-uring durability tests (power cut, disk
// full, correctness) and the mode benchmark against one server build.
//
//	harness test         quick suite for `make test` (power cut, failover, disk full, correctness)
//	harness durability   >= 50 power-cut trials per durable mode and volume
//	harness powercut     power-cut trials for chosen modes
//	harness failover     primary lost, replica power-cut: ack-replicas 1 vs 0
//	harness diskfull     disk-full checks
//	harness logreads     appending the log reads nothing from the device
//	harness correctness  the thesis' correctness checks
//	harness bench        the mode benchmark table
//	harness bench-report re-render a bench.json (no root, no server)
//
// It must run as root (loop devices, mounts). Everything it creates is
// removed on exit, including on SIGINT/SIGTERM.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/cleanup"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/suite"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/volume"
)

func main() {
	cleanup.OnSignal()
	code := run(os.Args[1:])
	cleanup.All()
	os.Exit(code)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: harness test|durability|powercut|failover|diskfull|logreads|correctness|bench|bench-report [flags]  (harness CMD -h for flags)")
}

// env is what every subcommand shares.
type env struct {
	bin     server.Binaries
	caps    server.Capabilities
	work    string
	results string
	logs    string
	rnd     *rand.Rand
	rep     *suite.Report
	// fuseDisk is the fusedisk binary: the fuse and gp3 volumes.
	fuseDisk string
}

type common struct {
	binDir, work, results *string
	seed                  *int64
	uringFsync            *string
	tls                   *bool
	fuseDisk              *string
}

func commonFlags(fs *flag.FlagSet) common {
	return common{
		binDir:     fs.String("bin-dir", envOr("SERVER_BIN_DIR", "/work/main/bin/redis-uring/install/bin"), "directory with valkey-server/valkey-benchmark (or redis-*)"),
		work:       fs.String("work-dir", envOr("HARNESS_WORK_DIR", "/work/main/bin/harness"), "scratch directory for loop images, server state and results"),
		results:    fs.String("results", "", "results directory (default <work-dir>/results/<subcommand>-<UTC time>)"),
		seed:       fs.Int64("seed", 0, "random seed (0: from the clock; the seed used is printed)"),
		uringFsync: fs.String("uring-appendfsync", server.UringAppendfsync, "appendfsync rendered with appendfsync-engine uring"),
		tls:        fs.Bool("tls", false, "servers serve TLS only, require client certificates and replicate over TLS; every client speaks TLS"),
		fuseDisk:   fs.String("fusedisk", os.Getenv("FUSEDISK"), "the fusedisk binary (tests/tools/fusedisk.c) for the fuse and gp3 volumes (default: fusedisk two directories above -bin-dir, where make -C images/redis-uring builds it)"),
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (c common) env(sub string) (*env, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("must run as root (loop devices and mounts)")
	}
	bin, err := server.FindBinaries(*c.binDir)
	if err != nil {
		return nil, err
	}
	server.UringAppendfsync = *c.uringFsync
	seed := *c.seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	// Scratch space is per process, so concurrent runs never share image,
	// mount or state names; results go next to it.
	scratch := filepath.Join(*c.work, fmt.Sprintf("run-%d", os.Getpid()))
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, err
	}
	cleanup.Register("scratch "+scratch, func() error { return os.RemoveAll(scratch) })
	if *c.tls {
		if server.ServeTLS, err = server.NewTLS(filepath.Join(scratch, "tls")); err != nil {
			return nil, fmt.Errorf("generating certificates: %w", err)
		}
	}
	e := &env{bin: bin, work: scratch, results: *c.results, rnd: rand.New(rand.NewSource(seed)), rep: suite.New(os.Stdout), fuseDisk: *c.fuseDisk}
	if e.fuseDisk == "" {
		e.fuseDisk = filepath.Join(*c.binDir, "..", "..", "fusedisk")
	}
	if e.results == "" {
		e.results = filepath.Join(*c.work, "results", sub+"-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	e.logs = filepath.Join(e.results, "logs")
	if e.caps, err = server.Probe(bin, e.work); err != nil {
		return nil, fmt.Errorf("probing %s: %w", bin.Server, err)
	}
	fmt.Printf("harness %s: server %s (%s), seed %d, results %s\n", sub, e.caps.Version, bin.Server, seed, e.results)
	if server.ServeTLS != nil {
		fmt.Printf("TLS: the servers serve TLS only (client certificates required, TLS replication); every client speaks TLS\n")
	}
	if e.caps.UringSkip != "" {
		fmt.Printf("note: uring modes will be skipped: %s\n", e.caps.UringSkip)
	}
	return e, nil
}

// finish writes the JSON report and prints the closing line.
func (e *env) finish(name string) int {
	if err := e.rep.WriteJSON(e.results, name); err != nil {
		fmt.Fprintln(os.Stderr, "writing results:", err)
	}
	fmt.Println(e.rep.Summary())
	if _, failed, _ := e.rep.Counts(); failed > 0 {
		return 1
	}
	return 0
}

func parseModes(list string) ([]server.Mode, error) {
	var modes []server.Mode
	for _, n := range strings.Split(list, ",") {
		m, err := server.ModeByName(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		modes = append(modes, m)
	}
	return modes, nil
}

func run(args []string) int {
	if len(args) == 0 {
		usage()
		return 2
	}
	sub, args := args[0], args[1:]
	if sub == "bench-report" {
		return benchReport(args)
	}
	fs := flag.NewFlagSet(sub, flag.ExitOnError)
	c := commonFlags(fs)
	var body func(e *env) error
	switch sub {
	case "test":
		trials := fs.Int("trials", 4, "power-cut trials per mode")
		requests := fs.Int("requests", 200000, "requests per correctness sub-test")
		failoverTrials := fs.Int("failover-trials", 2, "failover trials per ack-replicas setting")
		body = func(e *env) error {
			pc := defaultPowercut(*trials)
			pc.run(e, powercutModes)
			fuseTrials := defaultPowercut(max(*trials/2, 1))
			fuseTrials.on(volume.Fuse).run(e, fuseDiskModes)
			fuseTrials.on(volume.GP3).run(e, fuseDiskModes)
			defaultPowercut(*failoverTrials).failover(e)
			runDiskfull(e, diskfullModes)
			runLogreads(e, logreadsModes)
			runCorrectness(e, correctnessModes, *requests)
			return nil
		}
	case "durability":
		trials := fs.Int("trials", 50, "power-cut trials per durable mode and volume")
		volumes := fs.String("volumes", "loop,gp3,fuse", "volumes to cut on: loop, gp3, fuse")
		body = func(e *env) error {
			vs, err := volume.Parse(*volumes)
			if err != nil {
				return err
			}
			for _, v := range vs {
				defaultPowercut(*trials).on(v).run(e, durableModes)
			}
			return nil
		}
	case "powercut":
		pc := defaultPowercut(3)
		modes := fs.String("modes", modeNames(powercutModes), "modes to cut")
		fs.IntVar(&pc.trials, "trials", pc.trials, "trials per mode")
		fs.IntVar(&pc.clients, "clients", pc.clients, "concurrent writers")
		fs.DurationVar(&pc.loadMin, "load-min", pc.loadMin, "shortest load before the cut")
		fs.DurationVar(&pc.loadMax, "load-max", pc.loadMax, "longest load before the cut")
		volumes := fs.String("volumes", string(volume.Loop), "volumes to cut on: loop, gp3, fuse")
		body = func(e *env) error {
			ms, err := parseModes(*modes)
			if err != nil {
				return err
			}
			vs, err := volume.Parse(*volumes)
			if err != nil {
				return err
			}
			for _, v := range vs {
				pc.on(v).run(e, ms)
			}
			return nil
		}
	case "failover":
		pc := defaultPowercut(3)
		fs.IntVar(&pc.trials, "trials", pc.trials, "trials per ack-replicas setting")
		body = func(e *env) error {
			pc.failover(e)
			return nil
		}
	case "diskfull":
		modes := fs.String("modes", modeNames(diskfullModes), "modes to fill")
		body = func(e *env) error {
			ms, err := parseModes(*modes)
			if err != nil {
				return err
			}
			runDiskfull(e, ms)
			return nil
		}
	case "logreads":
		modes := fs.String("modes", modeNames(logreadsModes), "modes to check")
		body = func(e *env) error {
			ms, err := parseModes(*modes)
			if err != nil {
				return err
			}
			runLogreads(e, ms)
			return nil
		}
	case "correctness":
		modes := fs.String("modes", modeNames(correctnessModes), "modes to check")
		requests := fs.Int("requests", 200000, "requests per sub-test")
		body = func(e *env) error {
			ms, err := parseModes(*modes)
			if err != nil {
				return err
			}
			runCorrectness(e, ms, *requests)
			return nil
		}
	case "bench":
		bf := benchFlags(fs)
		body = func(e *env) error { return runBench(e, bf) }
	default:
		usage()
		return 2
	}
	_ = fs.Parse(args) // ExitOnError
	e, err := c.env(sub)
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		fmt.Println("0 passed, 1 failed")
		return 1
	}
	if err := body(e); err != nil {
		e.rep.Add(suite.Result{Name: sub, Status: suite.Fail, Detail: err.Error()})
	}
	return e.finish("checks.json")
}

func modeNames(ms []server.Mode) string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return strings.Join(names, ",")
}
