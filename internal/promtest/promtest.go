// Package promtest runs the real Prometheus and redis_exporter for tests:
// Prometheus and promtool from Debian's packages and redis_exporter at the
// sidecar's pinned version, fetched and built into bin/ by
// `make observability-tools` (hack/prometheus-tools.sh, hack/redis-exporter.sh).
package promtest

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// Bin finds a tool under bin/: prometheus and promtool in
// bin/prometheus/<version>/, redis_exporter in bin/redis-exporter/<version>/.
func Bin(t testing.TB, name string) string {
	t.Helper()
	dir := "prometheus"
	if name == "redis_exporter" {
		dir = "redis-exporter"
	}
	matches, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "bin", dir, "*", name))
	if len(matches) == 0 {
		t.Fatalf("%s is missing under bin/%s: run `make observability-tools` (part of `make test`)", name, dir)
	}
	return matches[len(matches)-1]
}

// FreeAddr is a loopback address nothing listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// run starts a process whose output goes to a log file kept in the test's
// temporary directory and shown when the test fails.
func run(t testing.TB, name string, args ...string) {
	t.Helper()
	runEnv(t, nil, name, args...)
}

// runEnv is run with env added to the test's environment.
func runEnv(t testing.TB, env []string, name string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), filepath.Base(name)+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", filepath.Base(name), lastBytes(out, 4000))
		}
	})
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Exporter runs redis_exporter for the server at redisAddr with a Lua
// script, as the sidecar does, and returns its listen address.
func Exporter(t testing.TB, redisAddr, script string) string {
	t.Helper()
	addr := FreeAddr(t)
	run(t, Bin(t, "redis_exporter"), "--redis.addr=redis://"+redisAddr, "--web.listen-address="+addr, "--script="+script)
	waitHTTP(t, "http://"+addr+"/metrics")
	return addr
}

// ExporterWith runs redis_exporter with args (which name the server and
// everything else but where it listens) and env added to the test's
// environment, as a pod's container runs; it returns its listen address.
func ExporterWith(t testing.TB, args, env []string) string {
	t.Helper()
	addr := FreeAddr(t)
	runEnv(t, env, Bin(t, "redis_exporter"), append(args, "--web.listen-address="+addr)...)
	waitHTTP(t, "http://"+addr+"/metrics")
	return addr
}

// Prometheus runs Prometheus with config (prometheus.yml text) and returns
// its base URL once it is ready.
func Prometheus(t testing.TB, config string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := FreeAddr(t)
	run(t, Bin(t, "prometheus"), "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	base := "http://" + addr
	waitHTTP(t, base+"/-/ready")
	return base
}

func waitHTTP(t testing.TB, u string) {
	t.Helper()
	var last error
	if wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, err := http.Get(u)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("HTTP %d", resp.StatusCode)
			}
		}
		last = err
		return err == nil, nil
	}) != nil {
		t.Fatalf("%s did not answer: %v", u, last)
	}
}

// Query runs an instant query against the Prometheus at base and returns
// its vector.
func Query(ctx context.Context, base, query string) (model.Vector, error) {
	client, err := api.NewClient(api.Config{Address: base})
	if err != nil {
		return nil, err
	}
	value, _, err := promv1.NewAPI(client).Query(ctx, query, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	vector, ok := value.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %q: result type %s, want vector", query, value.Type())
	}
	return vector, nil
}

// HasNumbers is true when some sample is a number (not NaN): a
// histogram_quantile over buckets that did not move returns NaN, which a
// panel shows as "No data".
func HasNumbers(samples model.Vector) bool {
	for _, s := range samples {
		if !math.IsNaN(float64(s.Value)) {
			return true
		}
	}
	return false
}

// AwaitData runs each of queries (keyed by a description) against the
// Prometheus at base every interval until each has returned a number once,
// or patience has passed, and returns those that never did.
func AwaitData(ctx context.Context, base string, queries map[string]string, interval, patience time.Duration) (pending map[string]string, err error) {
	pending = queries
	err = wait.PollUntilContextTimeout(ctx, interval, patience, true, func(ctx context.Context) (bool, error) {
		next := map[string]string{}
		for desc, q := range pending {
			samples, err := Query(ctx, base, q)
			if err != nil {
				return false, fmt.Errorf("%s: %w", desc, err)
			}
			if !HasNumbers(samples) {
				next[desc] = q
			}
		}
		pending = next
		return len(pending) == 0, nil
	})
	if wait.Interrupted(err) {
		err = nil
	}
	return pending, err
}
