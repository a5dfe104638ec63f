package testenv

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// shardEnv marks a process RunShards started: it runs the tests its -run
// names, itself.
const shardEnv = "TESTENV_SHARD"

// RunShards runs the package's tests in n processes at once, each with its
// own TestMain (its own API server, operator and servers), and reports
// whether it did; the caller then exits with code:
//
//	if code, done := testenv.RunShards(m, 2); done {
//		os.Exit(code)
//	}
//
// A suite whose tests mostly wait (for a reconcile, a server, a timer)
// leaves the CPUs idle most of the time: two processes take little more than
// half as long. The tests are dealt out in the order -test.list gives,
// round-robin; each process runs its share one test at a time, as the suite
// always has, so no test shares its process with one it did not before.
// The first shard's output is streamed; the others' follows it, whole, so
// `go test -json` reads every test's events in order. Coverage is kept: the
// shards write their counters into the same -test.gocoverdir, which this
// process merges into -test.coverprofile as it ends.
//
// It does nothing (done false) in a shard, for a run that names its tests
// with -run, when listing, or with TESTENV_SHARDS=1.
func RunShards(m *testing.M, n int) (code int, done bool) {
	if os.Getenv(shardEnv) != "" {
		return 0, false
	}
	flag.Parse()
	if flag.Lookup("test.list").Value.String() != "" {
		// Listing needs no cluster.
		return m.Run(), true
	}
	if v := os.Getenv("TESTENV_SHARDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			fail(fmt.Sprintf("TESTENV_SHARDS=%s: want a number of processes, 1 or more", v))
		}
	}
	if n < 2 || flag.Lookup("test.run").Value.String() != "" {
		return 0, false
	}
	names, err := listTests()
	if err != nil {
		fail("listing the tests: " + err.Error())
	}
	shares := make([][]string, min(n, len(names)))
	for i, name := range names {
		shares[i%len(shares)] = append(shares[i%len(shares)], regexp.QuoteMeta(name))
	}

	codes := make([]int, len(shares))
	outputs := make([]bytes.Buffer, len(shares))
	var wg sync.WaitGroup
	for i, share := range shares {
		cmd := exec.Command(os.Args[0], shardArgs(i, "^("+strings.Join(share, "|")+")$")...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d/%d", shardEnv, i+1, len(shares)))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if i > 0 {
			cmd.Stdout, cmd.Stderr = &outputs[i], &outputs[i]
		}
		// A shard does not outlive go test's kill of this process.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			fail(err.Error())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = exitCode(cmd.Wait())
		}()
	}
	wg.Wait()
	for i := 1; i < len(shares); i++ {
		_, _ = os.Stdout.Write(outputs[i].Bytes())
	}
	// No test of its own: this run writes the coverage profile the shards'
	// counters make, and go test's last lines. (A -bench that matches
	// nothing keeps testing from warning that there were no tests to run.)
	for name, value := range map[string]string{"test.run": "^$", "test.bench": "^$"} {
		if err := flag.Set(name, value); err != nil {
			fail(err.Error())
		}
	}
	code = m.Run()
	for _, c := range codes {
		if c != 0 {
			code = c
		}
	}
	return code, true
}

// listTests asks the test binary itself for its top-level tests.
func listTests() ([]string, error) {
	cmd := exec.Command(os.Args[0], "-test.list=.*")
	cmd.Env = append(os.Environ(), shardEnv+"=list")
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Test") && !strings.ContainsAny(line, " \t") {
			names = append(names, line)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("-test.list printed no test: %q", out)
	}
	return names, nil
}

// shardArgs are this process's arguments for shard i: -run is its share, and
// its text coverage profile a file of its own (the counters still go to the
// shared -test.gocoverdir, which this process reads at its end).
func shardArgs(i int, run string) []string {
	args := []string{"-test.run=" + run}
	for _, a := range os.Args[1:] {
		switch name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); name {
		case "test.run":
			continue
		case "test.coverprofile":
			a = fmt.Sprintf("-test.coverprofile=%s", filepath.Join(filepath.Dir(value), fmt.Sprintf("shard%d-%s", i+1, filepath.Base(value))))
		}
		args = append(args, a)
	}
	return args
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() > 0 {
		return exit.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "testenv: shard:", err)
	return 1
}
