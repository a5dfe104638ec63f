package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets a test run this binary's main: the test binary re-executes
// itself with KUBECTL_URING_MAIN set and the plugin's arguments.
func TestMain(m *testing.M) {
	if os.Getenv("KUBECTL_URING_MAIN") != "" {
		os.Args = append(os.Args[:1], strings.Fields(os.Getenv("KUBECTL_URING_MAIN"))...)
		os.Exit(run())
	}
	os.Exit(m.Run())
}

func runMain(t *testing.T, args string) (stdout, stderr string, exitCode int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "KUBECTL_URING_MAIN="+args)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// A failed command exits 1 and says why on stderr, once, as kubectl does;
// no API server is needed to refuse these.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args, wantErr string
		wantCode      int
	}{
		{"status cache -o wide", "error: -o wide: the outputs are json and yaml (and the default table)\n", 1},
		{"restore cache --to new", "error: restore needs one of --backup BACKUP (a Completed RedisBackup of cache), --time RFC3339 (a point its archive reaches) or --latest\n", 1},
		{"status", "error: accepts 1 arg(s), received 0\n", 1},
	} {
		stdout, stderr, code := runMain(t, tc.args)
		if code != tc.wantCode || stderr != tc.wantErr || stdout != "" {
			t.Errorf("kubectl uring %s: exit %d, stderr %q, stdout %q; want exit %d, stderr %q", tc.args, code, stderr, stdout, tc.wantCode, tc.wantErr)
		}
	}
	stdout, _, code := runMain(t, "--help")
	if code != 0 || !strings.Contains(stdout, "kubectl uring [command]") || !strings.Contains(stdout, "--kubeconfig") {
		t.Errorf("--help: exit %d, stdout:\n%s", code, stdout)
	}
}
