package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goTest runs go test with args on testdata/sample, a package of a slow, a
// failing, a skipped and a passing test, and returns its stdout.
func goTest(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"test", "-count=1"}, append(args, ".")...)...)
	cmd.Dir = filepath.Join("testdata", "sample")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("go test %v passed; testdata/sample has a failing test", args)
	}
	return out.Bytes()
}

// durations are the times go test prints, which differ from run to run.
var durations = regexp.MustCompile(`[0-9]+\.[0-9]+s`)

func TestEchoAndTable(t *testing.T) {
	stream := goTest(t, "-json")
	for _, tc := range []struct {
		desc    string
		verbose bool
		want    string
	}{
		{desc: "-v: all of it", verbose: true, want: "=== RUN   TestSlow\n" +
			"    sample_test.go:12: passing output\n" +
			"--- PASS: TestSlow (X)\n" +
			"=== RUN   TestFails\n" +
			"=== RUN   TestFails/sub\n" +
			"    sample_test.go:16: the subtest's failure\n" +
			"--- FAIL: TestFails/sub (X)\n" +
			"    sample_test.go:17: the parent's log\n" +
			"--- FAIL: TestFails (X)\n" +
			"=== RUN   TestSkipped\n" +
			"    sample_test.go:20: not here\n" +
			"--- SKIP: TestSkipped (X)\n" +
			"=== RUN   TestPasses\n" +
			"--- PASS: TestPasses (X)\n" +
			"FAIL\n" +
			"FAIL\tsample\tX\n"},
		{desc: "without -v: the failing test's, and the package's lines", want: "=== RUN   TestFails\n" +
			"=== RUN   TestFails/sub\n" +
			"    sample_test.go:16: the subtest's failure\n" +
			"--- FAIL: TestFails/sub (X)\n" +
			"    sample_test.go:17: the parent's log\n" +
			"--- FAIL: TestFails (X)\n" +
			"FAIL\n" +
			"FAIL\tsample\tX\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			jsonPath, tablePath := filepath.Join(dir, "test.json"), filepath.Join(dir, "times.txt")
			var out bytes.Buffer
			if err := run(bytes.NewReader(stream), &out, jsonPath, tablePath, -1, tc.verbose); err != nil {
				t.Fatal(err)
			}
			if got := durations.ReplaceAllString(out.String(), "X"); got != durations.ReplaceAllString(tc.want, "X") {
				t.Errorf("printed:\n%s\nwant:\n%s", got, tc.want)
			}
			if kept, err := os.ReadFile(jsonPath); err != nil || !bytes.Equal(kept, stream) {
				t.Errorf("the kept stream differs from go test's (%v)", err)
			}
			table, err := os.ReadFile(tablePath)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(table)), "\n")
			want := []string{`^1 packages in [0-9]+ s \(wall\), slowest first:$`, `^ +0\.[0-9] s  FAIL  sample$`,
				`^4 slowest of 4 top-level tests:$`, `^ +0\.[3-9] s  ok    sample\.TestSlow$`,
				`^ +0\.0 s  FAIL  sample\.TestFails$`, `^ +0\.0 s  ok    sample\.TestPasses$`, `^ +0\.0 s  skip  sample\.TestSkipped$`,
				`^2 failed, with what they said`, `^  sample\.TestFails/sub$`, `^      sample_test\.go:16: the subtest's failure$`,
				`^  sample\.TestFails$`, `^      sample_test\.go:17: the parent's log$`}
			if len(lines) != len(want) {
				t.Fatalf("the table:\n%s\nwant %d lines", table, len(want))
			}
			for i, re := range want {
				if !regexp.MustCompile(re).MatchString(lines[i]) {
					t.Errorf("line %d of the table is %q, want %s", i+1, lines[i], re)
				}
			}
		})
	}
}

// A stream cut short (a test binary killed mid-test) still prints the
// running test's output and writes the table; lines that are no events (go
// vet's) are printed as they came.
func TestCutShort(t *testing.T) {
	stream := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestHangs"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"=== RUN   TestHangs\n"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"    hang_test.go:9: waiting\n"}
# p
vet: hang_test.go:3: something
`
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(strings.NewReader(stream), &out, filepath.Join(dir, "test.json"), filepath.Join(dir, "times.txt"), -1, false); err != nil {
		t.Fatal(err)
	}
	if want := "# p\nvet: hang_test.go:3: something\n=== RUN   TestHangs\n    hang_test.go:9: waiting\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	if table, err := os.ReadFile(filepath.Join(dir, "times.txt")); err != nil || !strings.HasPrefix(string(table), "0 packages") {
		t.Errorf("the table of a stream cut short: %q, %v", table, err)
	}
}
