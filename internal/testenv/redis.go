package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ServerBin is the project's server build (make -C images/redis-uring build),
// or $REDIS_SERVER_BIN.
func ServerBin() string {
	if bin := os.Getenv("REDIS_SERVER_BIN"); bin != "" {
		return bin
	}
	return filepath.Join(RepoRoot(), "bin", "redis-uring", "install", "bin", "valkey-server")
}

// StartServer runs the real server with config (redis.conf text) on a free
// loopback port in a temporary data directory and returns its address. Lines
// that only make sense in a pod (port, dir, include) are overridden; a
// config with tls-port gets that port for TLS and none for plain TCP.
func StartServer(t testing.TB, config string) string {
	t.Helper()
	return runServer(t, ServerBin(), t.TempDir(), config, false).Addr
}

// StartReplica runs the real server with config as a replica of the server
// at primary and returns its address once the primary streams to it.
func StartReplica(t *testing.T, primary, config string) string {
	t.Helper()
	addr := StartServer(t, config+"replicaof "+strings.Replace(primary, ":", " ", 1)+"\n")
	c := redis.NewClient(&redis.Options{Addr: primary})
	defer func() { _ = c.Close() }()
	var info string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		info, err = c.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "state=online"), nil
	})
	if err != nil {
		t.Fatalf("the replica %s is not online at %s after 30 s:\n%s", addr, primary, info)
	}
	return addr
}

// RunClusterNode is RunServer in cluster mode: cluster-enabled yes, its
// nodes.conf in dir, and its cluster bus on a free port of its own (the
// default, port+10000, may be past 65535 for a port the kernel picked).
func RunClusterNode(t testing.TB, dir, config string) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bus := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return RunServer(t, dir, config+fmt.Sprintf("cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-port %d\n", bus))
}

// StartSentinel runs the server build's valkey-sentinel with config (a
// sentinel.conf, which Sentinel rewrites) on a free loopback port and returns
// its address.
func StartSentinel(t *testing.T, config string) string {
	t.Helper()
	return runServer(t, filepath.Join(filepath.Dir(ServerBin()), "valkey-sentinel"), t.TempDir(), config, false).Addr
}

// StartServerWithoutIOUring is StartServer under a seccomp filter that
// denies io_uring_setup, as a container runtime's default profile does.
func StartServerWithoutIOUring(t *testing.T, config string) string {
	t.Helper()
	return runServer(t, ServerBin(), t.TempDir(), config, true).Addr
}

// Server is a running server process.
type Server struct {
	Addr string
	Dir  string

	cmd    *exec.Cmd
	exited chan error
}

// RunServer is StartServer in dir, where an earlier server may have left
// its files: a restart, as a pod's container restarts on its volume.
func RunServer(t testing.TB, dir, config string) *Server {
	t.Helper()
	return runServer(t, ServerBin(), dir, config, false)
}

// stopGrace is the server pods' terminationGracePeriodSeconds
// (internal/specs): how long the kubelet waits after SIGTERM before SIGKILL.
var stopGrace = 60 * time.Second

// Stop stops the server as a kubelet stops its container: SIGTERM, then
// SIGKILL if it is still running after the pods' grace period. A server may
// refuse SIGTERM by design (upstream's "Writing initial AOF, can't exit" while
// a replica rewrites the AOF right after a full sync, which a loaded machine
// makes likely); a pod then ends the same way, and the test goes on.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		s.exited <- err
		return
	case <-time.After(stopGrace):
	}
	t.Logf("the server on %s did not stop within %s of SIGTERM: SIGKILL, as the kubelet sends", s.Addr, stopGrace)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-s.exited
	s.exited <- err
}

func runServer(t testing.TB, bin, dir, config string, denyIOUring bool) *Server {
	t.Helper()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the server binary %s is missing: run `make test`, which builds it", bin)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	var kept []string
	listen := fmt.Sprintf("port %d", port)
	for _, line := range strings.Split(config, "\n") {
		switch strings.SplitN(line, " ", 2)[0] {
		case "tls-port":
			listen = fmt.Sprintf("port 0\ntls-port %d", port)
			continue
		case "port", "dir", "include", "bind":
			continue
		}
		kept = append(kept, line)
	}
	kept = append(kept, "bind 127.0.0.1", listen, "dir "+dir)
	confPath := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(strings.Join(kept, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "server.log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, confPath)
	if denyIOUring {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(self, bin, confPath)
		cmd.Env = append(os.Environ(), denyIOUringEnv+"=1")
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, cmd: cmd, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := <-s.exited; t.Failed() {
			t.Logf("server exited: %v", err)
		}
		if t.Failed() {
			logTail(t, "server", logPath)
		}
	})
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-s.exited:
			s.exited <- err
			if err == nil {
				err = errors.New("exit status 0")
			}
			return false, fmt.Errorf("the server exited (%w)", err)
		default:
		}
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			return false, nil
		}
		_ = c.Close()
		return true, nil
	})
	if wait.Interrupted(err) {
		err = fmt.Errorf("the server did not start on %s", s.Addr)
	}
	if err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("%v:\n%s", err, out)
	}
	return s
}

// ACLRefusals reads the server's ACL LOG through admin and resets it: one
// "<username> <object>" per entry (the object is the refused command, key
// or channel). go-redis's ACLLog cannot parse Valkey's client-info field
// "capa", so the reply is read as it comes.
func ACLRefusals(t testing.TB, admin *redis.Client) []string {
	t.Helper()
	ctx := context.Background()
	entries, err := admin.Do(ctx, "ACL", "LOG").Slice()
	if err != nil {
		t.Fatalf("ACL LOG: %v", err)
	}
	var out []string
	for _, entry := range entries {
		e := map[string]any{}
		switch fields := entry.(type) {
		case []any: // RESP2
			for i := 0; i+1 < len(fields); i += 2 {
				e[fmt.Sprint(fields[i])] = fields[i+1]
			}
		case map[any]any: // RESP3
			for k, v := range fields {
				e[fmt.Sprint(k)] = v
			}
		}
		out = append(out, fmt.Sprintf("%v %v", e["username"], e["object"]))
	}
	if err := admin.Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatalf("ACL LOG RESET: %v", err)
	}
	return out
}

// WriteSteadily SETs keys on the server at addr every 5 ms until the test
// ends, so that its rates and fsync histograms keep moving while Prometheus
// scrapes.
func WriteSteadily(t testing.TB, addr string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer func() { _ = c.Close() }()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			_ = c.Set(ctx, fmt.Sprintf("steady:%d", i%1000), i, 0).Err()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// logTailLines is how much of a component's log a failed test prints.
const logTailLines = 40

// logTail prints the end of a component's log into a failed test's output
// and keeps all of it in a file that outlives the test: printed whole, a
// log of thousands of lines would bury what the test said.
func logTail(t testing.TB, component, path string) {
	out, err := os.ReadFile(path)
	if err != nil {
		t.Logf("%s log: %v", component, err)
		return
	}
	kept, err := os.CreateTemp("", "testenv-"+strings.ReplaceAll(component, " ", "-")+"-*.log")
	where := "not kept: " + fmt.Sprint(err)
	if err == nil {
		_, _ = kept.Write(out)
		_ = kept.Close()
		where = "all of it in " + kept.Name()
	}
	lines := strings.SplitAfter(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	t.Logf("%s log, last %d lines (%s):\n%s", component, len(lines), where, strings.Join(lines, ""))
}
