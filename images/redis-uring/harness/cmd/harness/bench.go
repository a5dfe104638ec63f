package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/bench"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/suite"
)

type benchOpts struct {
	opts                            bench.Options
	modes, tests, volumes, baseline *string
}

// defaultTests: issue 3's four write tests at 50 clients and the mixed run;
// issue 12's read-heavy run, SET client sweep (1, 8, 50 = "set", 200) and
// pipelines (one client's 20 000 SETs in one pipeline; -P 16 at 50 clients).
const defaultTests = "set,hset,lpush,incr,mixed,read-heavy,set-c1,set-c8,set-c200,set-p16,set-c1-p20000-n20000"

func benchFlags(fs *flag.FlagSet) *benchOpts {
	b := &benchOpts{}
	o := &b.opts
	b.modes = fs.String("modes", modeNames(server.AllModes), "modes to compare")
	b.tests = fs.String("tests", defaultTests, "tests: valkey-benchmark tests, each with optional -c<clients>, -p<pipeline>, -n<requests> suffixes; mixed; read-heavy")
	b.volumes = fs.String("volumes", "loop,gp3", "volumes: root (a directory on the root disk), loop (ext4 on a loop device), gp3 (ext4 on a loop device over fusedisk with a 1.5 ms serial flush: gp3-like, emulated)")
	b.baseline = fs.String("baseline-bin-dir", "", "a second server build: every mode also runs on it, as <mode>@baseline, and the report sets the two builds side by side")
	fs.IntVar(&o.Clients, "clients", 50, "valkey-benchmark clients (C) of tests without -c")
	fs.IntVar(&o.Requests, "requests", 20000, "requests per 50-client run, scaled for other client counts and pipelines (the thesis used 4000000)")
	fs.IntVar(&o.Keyspace, "keyspace", 1000000, "valkey-benchmark -r")
	fs.IntVar(&o.DataSize, "data-size", 3, "valkey-benchmark -d")
	fs.IntVar(&o.Pipeline, "pipeline", 1, "valkey-benchmark -P")
	fs.IntVar(&o.Reps, "reps", 3, "repetitions (medians reported; mode order rotates per repetition)")
	fs.IntVar(&o.GetClients, "get-clients", 5, "GET clients in the mixed run")
	fs.IntVar(&o.ReadHeavySetClients, "read-heavy-set-clients", 8, "SET clients in the read-heavy run")
	fs.IntVar(&o.ReadOnlyKeys, "read-only-keys", 10000, "keys preloaded for the mixed and read-heavy runs' GETs")
	fs.IntVar(&o.LoopSizeMiB, "loop-size-mib", 0, "loop ext4 size (0: sized from requests)")
	fs.IntVar(&o.FsyncSamples, "fsync-samples", 500, "write+fdatasync pairs timed per volume, before and after the runs")
	return b
}

func runBench(e *env, b *benchOpts) error {
	o := b.opts
	var err error
	if o.Modes, err = parseModes(*b.modes); err != nil {
		return err
	}
	if *b.baseline != "" {
		if o.Baseline, err = server.FindBinaries(*b.baseline); err != nil {
			return fmt.Errorf("baseline build: %w", err)
		}
		o.BaselineDir = *b.baseline
		for _, m := range o.Modes {
			o.Modes = append(o.Modes, m.OnBaseline())
		}
	}
	o.Tests = strings.Split(*b.tests, ",")
	if o.Workloads, err = bench.ParseWorkloads(o.Tests, o); err != nil {
		return err
	}
	o.Volumes = strings.Split(*b.volumes, ",")
	o.Bin, o.WorkDir, o.LogDir, o.UringSkip, o.FuseDisk = e.bin, e.work, e.logs, e.caps.UringSkip, e.fuseDisk
	o.TLS = server.ServeTLS != nil
	if e.bin.Benchmark == "" {
		return fmt.Errorf("no valkey-benchmark or redis-benchmark in %s", e.bin.Dir)
	}
	if o.LoopSizeMiB == 0 {
		// Each run is followed by FLUSHALL+BGREWRITEAOF, so one run's AOF
		// per mode is the most the volume holds at a time.
		most := 0
		for _, w := range o.Workloads {
			most = max(most, w.Requests)
		}
		o.LoopSizeMiB = max(1024, most*200*len(o.Modes)/(1<<20)*2)
	}
	o.Log = e.rep.Logf
	rep, err := bench.Execute(o, e.caps.Version, strings.Join(os.Args, " "))
	if err != nil {
		return err
	}
	if err := rep.WriteFiles(e.results); err != nil {
		return err
	}
	fmt.Println()
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	fmt.Printf("\nresults: %s/bench.{txt,csv,json}\n", e.results)

	for _, s := range rep.Skipped {
		e.rep.Add(suite.Result{Name: "bench/" + strings.SplitN(s, ":", 2)[0], Status: suite.Skip, Detail: s})
	}
	failed := 0
	for _, r := range rep.Runs {
		if r.Error != "" {
			failed++
		}
	}
	res := suite.Result{Name: "bench/runs", Status: suite.Pass, Detail: fmt.Sprintf("%d runs completed in %.0f s", len(rep.Runs), rep.Seconds)}
	if failed > 0 {
		res.Status, res.Detail = suite.Fail, fmt.Sprintf("%d of %d runs failed (see errors above)", failed, len(rep.Runs))
	}
	e.rep.Add(res)
	cpu := suite.Result{Name: "bench/cpu-accounting", Status: suite.Pass, Detail: rep.CPUCheck.Detail}
	switch {
	case rep.CPUCheck.RunsWithUringThreads == 0:
		cpu.Status = suite.Skip
	case !rep.CPUCheck.Holds:
		cpu.Status = suite.Fail
	}
	e.rep.Add(cpu)
	return nil
}

func benchReport(args []string) int {
	fs := flag.NewFlagSet("bench-report", flag.ExitOnError)
	from := fs.String("from", "", "bench.json to render")
	_ = fs.Parse(args) // ExitOnError
	rep, err := bench.Load(*from)
	if err == nil {
		err = rep.WriteTable(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 1
	}
	return 0
}
