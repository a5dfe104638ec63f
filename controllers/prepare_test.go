package controllers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestPrepareScript runs the prepare container's script with sh: it must
// report the filesystem of a mount point and render a password the real
// server parses back exactly, quotes and backslashes included.
func TestPrepareScript(t *testing.T) {
	dir := t.TempDir()
	script := strings.NewReplacer(
		"dir="+dataDir+" ", "dir=/ ",
		"/dev/termination-log", filepath.Join(dir, "termination-log"),
		runDir+"/auth.conf", filepath.Join(dir, "auth.conf"),
	).Replace(prepareScript)
	password := `p"a\ss word$1`
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "REDIS_PASSWORD="+password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prepare script: %v\n%s", err, out)
	}

	report, err := os.ReadFile(filepath.Join(dir, "termination-log"))
	if err != nil {
		t.Fatal(err)
	}
	fs, ok := strings.CutPrefix(strings.TrimSpace(string(report)), "filesystem=")
	if !ok || fs == "" || fs == "unknown" {
		t.Fatalf("termination message %q does not name the root filesystem", report)
	}

	auth, err := os.ReadFile(filepath.Join(dir, "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(dir, "auth.conf")); info.Mode().Perm() != 0o600 {
		t.Errorf("auth.conf mode %v, want 0600", info.Mode().Perm())
	}
	addr := testenv.StartServer(t, "save \"\"\n"+string(auth))
	ctx := context.Background()
	good := redis.NewClient(&redis.Options{Addr: addr, Password: password})
	defer func() { _ = good.Close() }()
	if err := good.Ping(ctx).Err(); err != nil {
		t.Fatalf("the password did not survive rendering: %v (auth.conf %q)", err, auth)
	}
	bad := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = bad.Close() }()
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("a client without the password got %v, want NOAUTH", err)
	}
}
