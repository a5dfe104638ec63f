// Command testtimes reads the event stream of `go test -json` on stdin,
// prints the tests' output as `go test` without -json would, keeps the stream
// in a file, and at its end writes where the time went: each package's
// seconds, slowest first, and the slowest top-level tests; then each failed
// test with its first t.Log and t.Error lines, which the end of a CI log
// shows however much a failing test printed.
//
//	go test -json ./... | testtimes -json bin/test/go-test.json -table bin/test/times.txt
//
// The table is written when the stream ends, a failed or timed-out run
// included; the exit status stays `go test`'s (set -o pipefail). With -v the
// output is all of it, as `go test -v` prints it but for where a subtest's
// result stands (where it ended); without, a passing test's output is left
// out, as `go test` leaves it out, and a failing test's is printed as with -v.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

func main() {
	jsonPath := flag.String("json", "", "keep the event stream in this file")
	tablePath := flag.String("table", "", "write the time table to this file at the end")
	tests := flag.Int("tests", 20, "how many of the slowest top-level tests the table lists (-1: all)")
	verbose := flag.Bool("v", false, "print every test's output, as go test -v does")
	flag.Parse()
	if *jsonPath == "" || *tablePath == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testtimes -json FILE -table FILE [-tests N] [-v]")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Stdout, *jsonPath, *tablePath, *tests, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, jsonPath, tablePath string, tests int, verbose bool) error {
	stream, err := os.Create(jsonPath)
	if err != nil {
		return err
	}
	defer func() { _ = stream.Close() }()
	p := newPrinter(out, verbose)
	var times timings
	lines := bufio.NewScanner(io.TeeReader(in, stream))
	lines.Buffer(make([]byte, 1<<20), 64<<20)
	for lines.Scan() {
		var e event
		if json.Unmarshal(lines.Bytes(), &e) != nil || e.Action == "" {
			// Not an event (go vet's or the toolchain's own words): as it came.
			_, _ = fmt.Fprintln(out, lines.Text())
			continue
		}
		p.event(e)
		times.event(e)
	}
	if err := lines.Err(); err != nil {
		return err
	}
	p.flush("")
	return os.WriteFile(tablePath, []byte(times.table(tests)), 0o644)
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Elapsed    float64
	Output     string
}

// printer prints the output of the events: all of it with verbose; without,
// that of the tests that fail, and the packages' own lines.
type printer struct {
	out     io.Writer
	verbose bool
	// held is each running test's output (package, then test), printed if
	// it fails, or if its package ends without saying (a panic, a timeout).
	// A failed subtest's joins its parent's, where it ran.
	held map[[2]string][]string
}

func newPrinter(out io.Writer, verbose bool) *printer {
	return &printer{out: out, verbose: verbose, held: map[[2]string][]string{}}
}

func (p *printer) event(e event) {
	switch {
	case e.Action == "build-output":
		_, _ = io.WriteString(p.out, e.Output)
	case p.verbose:
		if e.Action == "output" {
			_, _ = io.WriteString(p.out, e.Output)
		}
	case e.Test != "":
		key := [2]string{e.Package, e.Test}
		switch e.Action {
		case "output":
			p.held[key] = append(p.held[key], e.Output)
		case "fail":
			if parent, _, sub := cutLast(e.Test, "/"); sub {
				pkey := [2]string{e.Package, parent}
				p.held[pkey] = append(p.held[pkey], p.held[key]...)
				delete(p.held, key)
			} else {
				p.print(key)
			}
		case "pass", "skip":
			delete(p.held, key)
		}
	case e.Action == "output":
		// The package's own lines: ok or FAIL with its time, a panic's
		// trace; not those -v adds (PASS, coverage, which the ok line repeats).
		if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "coverage: ") {
			_, _ = io.WriteString(p.out, e.Output)
		}
	case e.Action == "fail":
		p.flush(e.Package)
	}
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func (p *printer) print(key [2]string) {
	for _, line := range p.held[key] {
		_, _ = io.WriteString(p.out, line)
	}
	delete(p.held, key)
}

// flush prints what the tests of pkg that never ended left held (all
// packages' when pkg is ""), in the order of their names.
func (p *printer) flush(pkg string) {
	keys := slices.Collect(maps.Keys(p.held))
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	for _, k := range keys {
		if pkg == "" || k[0] == pkg {
			p.print(k)
		}
	}
}

// timing is how long a package or a top-level test took and how it ended.
type timing struct {
	name    string
	seconds float64
	result  string
}

type timings struct {
	packages, tests []timing
	first, last     time.Time
	// said is each running test's t.Log and t.Error lines (file.go:N: ...),
	// failures what the failed tests said, in the order they failed: the
	// table ends with them, where a CI log's tail shows them even when a
	// test's output is long.
	said     map[[2]string][]string
	failures []failure
}

type failure struct {
	name string
	said []string
}

// saidLine is a line of t.Log or t.Error: indented, file.go:N: message.
var saidLine = regexp.MustCompile(`^\s+[\w.-]+\.go:[0-9]+: `)

const (
	saidPerTest = 6
	saidWidth   = 300
)

func (t *timings) event(e event) {
	if !e.Time.IsZero() {
		if t.first.IsZero() {
			t.first = e.Time
		}
		t.last = e.Time
	}
	if e.Test != "" {
		key := [2]string{e.Package, e.Test}
		switch e.Action {
		case "output":
			if saidLine.MatchString(e.Output) && len(t.said[key]) < saidPerTest {
				if t.said == nil {
					t.said = map[[2]string][]string{}
				}
				line := strings.TrimSpace(e.Output)
				if len(line) > saidWidth {
					line = line[:saidWidth] + "..."
				}
				t.said[key] = append(t.said[key], line)
			}
		case "fail":
			t.failures = append(t.failures, failure{e.Package + "." + e.Test, t.said[key]})
			delete(t.said, key)
		case "pass", "skip":
			delete(t.said, key)
		}
	}
	var result string
	switch e.Action {
	case "pass":
		result = "ok"
	case "fail", "build-fail":
		result = "FAIL"
	case "skip":
		result = "skip"
	default:
		return
	}
	switch {
	case e.Action == "build-fail":
		t.packages = append(t.packages, timing{e.ImportPath + " (build failed)", 0, result})
	case e.Test == "":
		t.packages = append(t.packages, timing{e.Package, e.Elapsed, result})
	case !strings.Contains(e.Test, "/"):
		t.tests = append(t.tests, timing{e.Package + "." + e.Test, e.Elapsed, result})
	}
}

// table lists the packages, slowest first, then the n slowest top-level
// tests (all with n < 0); packages run in parallel, so their seconds add up
// to more than the wall time the table's first line gives.
func (t *timings) table(n int) string {
	var b strings.Builder
	slowestFirst := func(a, b timing) int {
		if a.seconds != b.seconds {
			if a.seconds > b.seconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	}
	slices.SortFunc(t.packages, slowestFirst)
	slices.SortFunc(t.tests, slowestFirst)
	common := commonDir(t.packages)
	fmt.Fprintf(&b, "%d packages in %.0f s (wall), slowest first:\n", len(t.packages), t.last.Sub(t.first).Seconds())
	for _, p := range t.packages {
		fmt.Fprintf(&b, "%8.1f s  %-4s  %s\n", p.seconds, p.result, strings.TrimPrefix(p.name, common))
	}
	shown := t.tests
	if n >= 0 && n < len(shown) {
		shown = shown[:n]
	}
	if len(shown) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "%d slowest of %d top-level tests:\n", len(shown), len(t.tests))
	for _, p := range shown {
		fmt.Fprintf(&b, "%8.1f s  %-4s  %s\n", p.seconds, p.result, strings.TrimPrefix(p.name, common))
	}
	if len(t.failures) > 0 {
		fmt.Fprintf(&b, "%d failed, with what they said (the first %d t.Log and t.Error lines of each):\n", len(t.failures), saidPerTest)
		for _, f := range t.failures {
			fmt.Fprintf(&b, "  %s\n", strings.TrimPrefix(f.name, common))
			for _, line := range f.said {
				fmt.Fprintf(&b, "      %s\n", line)
			}
		}
	}
	return b.String()
}

// commonDir is the directory, ending in "/", that holds all the packages
// (the module's, for ./...): the table leaves it out, it says nothing.
func commonDir(packages []timing) string {
	var common string
	for i, p := range packages {
		if i == 0 {
			common = p.name[:strings.LastIndex(p.name, "/")+1]
		}
		for !strings.HasPrefix(p.name, common) {
			common = common[:strings.LastIndex(common[:len(common)-1], "/")+1]
		}
	}
	return common
}
