package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func toolBin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(testenv.ServerBin()), "valkey-benchmark")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make test`, which builds the server", bin)
	}
	return bin
}

// TestRunAgainstTheRealServer drives the real valkey-benchmark against the
// real server with the posix and the io_uring engine.
func TestRunAgainstTheRealServer(t *testing.T) {
	for _, tc := range []struct {
		mode, config, engine string
		fsyncs               bool
	}{
		{"aof-always", "appendonly yes\nappendfsync always\n", "posix", false},
		{"uring-durable", "appendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n", "uring", true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r := Runner{Tool: toolBin(t), Addr: testenv.StartServer(t, "save \"\"\n"+tc.config)}
			w := Workload{Target: "t", Mode: tc.mode, Commands: []string{"set", "incr"}, Requests: 3000, Clients: 8, Pipeline: 1,
				ValueSize: 32, Keyspace: 1000, Repetitions: 2, MixedReads: true}
			res, err := r.Run(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			if res.Engine != tc.engine {
				t.Errorf("engine %q, want %q", res.Engine, tc.engine)
			}
			var names []string
			for _, c := range res.Commands {
				names = append(names, c.Command)
				if c.OpsPerSecond <= 0 || c.P50Micros <= 0 || c.P99Micros < c.P50Micros || c.P999Micros < c.P99Micros {
					t.Errorf("%s: implausible throughput/latency %+v", c.Command, c)
				}
				if c.CPUMicrosPerKop <= 0 || c.RSSBytes <= 0 {
					t.Errorf("%s: no server CPU or RSS measured: %+v", c.Command, c)
				}
				if got := c.FsyncCount > 0; got != tc.fsyncs {
					t.Errorf("%s: %d fsyncs reported, want some: %v", c.Command, c.FsyncCount, tc.fsyncs)
				}
				if tc.fsyncs && (c.FsyncP50Micros <= 0 || c.FsyncP99Micros < c.FsyncP50Micros) {
					t.Errorf("%s: fsync quantiles %d/%d", c.Command, c.FsyncP50Micros, c.FsyncP99Micros)
				}
			}
			if got := strings.Join(names, ","); got != "set,incr,"+GetDuringSet {
				t.Errorf("commands %s", got)
			}
			if _, err := Encode(res); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRunReportsAnUnreachableServer(t *testing.T) {
	r := Runner{Tool: toolBin(t), Addr: "127.0.0.1:1"}
	_, err := r.Run(context.Background(), Workload{Target: "t", Commands: []string{"set"}, Requests: 1000, Clients: 1, Pipeline: 1, ValueSize: 8, Keyspace: 10, Repetitions: 1})
	if err == nil {
		t.Fatal("a run against nothing succeeded")
	}
}

// restartableServer is the real server under the test's control, so the crash
// check can SIGKILL it and start it again on the same data directory.
type restartableServer struct {
	t          *testing.T
	conf, addr string
	cmd        *exec.Cmd
}

func startRestartable(t *testing.T, config string) *restartableServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir := t.TempDir()
	s := &restartableServer{t: t, conf: filepath.Join(dir, "redis.conf"), addr: fmt.Sprintf("127.0.0.1:%d", port)}
	config += fmt.Sprintf("bind 127.0.0.1\nport %d\ndir %s\nsave \"\"\nlogfile %s\n", port, dir, filepath.Join(dir, "server.log"))
	if err := os.WriteFile(s.conf, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	return s
}

func (s *restartableServer) start() {
	s.cmd = exec.Command(testenv.ServerBin(), s.conf)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
}

// kill9 is a Killer: SIGKILL, then the restart a kubelet would do.
func (s *restartableServer) kill9(context.Context) error {
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	_ = s.cmd.Wait()
	s.start()
	return nil
}

// TestCrashCheckKill9 kills the real server with SIGKILL under write load:
// the durable modes must keep every acknowledged key.
func TestCrashCheckKill9(t *testing.T) {
	for mode, config := range map[string]string{
		"aof-always":    "appendonly yes\nappendfsync always\n",
		"uring-durable": "appendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n",
	} {
		t.Run(mode, func(t *testing.T) {
			s := startRestartable(t, config)
			r := Runner{Addr: s.addr}
			if err := r.waitServing(context.Background(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			res, err := r.CrashCheck(context.Background(), 8, time.Second, 30*time.Second, s.kill9)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d acknowledged, %d lost", mode, res.Acknowledged, res.Lost)
			if res.Acknowledged < 100 {
				t.Errorf("only %d writes acknowledged in a second", res.Acknowledged)
			}
			if res.Lost != 0 {
				t.Errorf("%s lost %d of %d acknowledged keys", mode, res.Lost, res.Acknowledged)
			}
		})
	}
}

// TestCrashCheckCountsLoss proves the check sees loss: a server that keeps
// nothing on disk must lose every acknowledged key.
func TestCrashCheckCountsLoss(t *testing.T) {
	s := startRestartable(t, "appendonly no\n")
	r := Runner{Addr: s.addr}
	if err := r.waitServing(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := r.CrashCheck(context.Background(), 4, 300*time.Millisecond, 30*time.Second, s.kill9)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acknowledged == 0 || res.Lost != res.Acknowledged {
		t.Errorf("a server without persistence kept %d of %d keys", res.Acknowledged-res.Lost, res.Acknowledged)
	}
}
