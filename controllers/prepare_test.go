package controllers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestPrepareScript runs the prepare container's script with sh, the server
// build's storage probe on its PATH: it must report the filesystem of a mount
// point and the probe's measurement of the data directory within the probe's
// bound, and render a password the real server parses back exactly, quotes
// and backslashes included.
func TestPrepareScript(t *testing.T) {
	dir := t.TempDir()
	script := strings.NewReplacer(
		"dir="+dataDir+" ", "dir=/ ",
		" "+dataDir+" >>", " "+dir+" >>",
		"/dev/termination-log", filepath.Join(dir, "termination-log"),
		runDir+"/auth.conf", filepath.Join(dir, "auth.conf"),
	).Replace(prepareScript)
	password := `p"a\ss word$1`
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "REDIS_PASSWORD="+password, "PATH="+filepath.Dir(fsprobeBin())+":"+os.Getenv("PATH"))
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prepare script: %v\n%s", err, out)
	}
	if budget, _ := strconv.Atoi(fsprobeMillis); time.Since(start) > time.Duration(budget)*time.Millisecond+time.Second {
		t.Errorf("the prepare script took %s, the probe's bound is %s ms", time.Since(start), fsprobeMillis)
	}

	message, err := os.ReadFile(filepath.Join(dir, "termination-log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(message) > 4096 {
		t.Errorf("termination message of %d bytes, the kubelet keeps 4096", len(message))
	}
	report := parseStorageReport(string(message))
	if !strings.HasPrefix(string(message), "filesystem=") || report.filesystem == "" || report.filesystem == "unknown" {
		t.Fatalf("termination message %q does not name the root filesystem", message)
	}
	if !report.measured() || report.mountOptions == "" || report.writeCache == "" {
		t.Fatalf("termination message %q carries no measurement of %s", message, dir)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("the data directory holds %v: the probe must remove its scratch file", entries)
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
