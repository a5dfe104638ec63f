package bench

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
// real server with the posix and the io_uring engine; both report the
// fdatasyncs of every command.
func TestRunAgainstTheRealServer(t *testing.T) {
	for _, tc := range []struct {
		mode, config, engine string
		fsyncs               bool
	}{
		{"aof-always", "appendonly yes\nappendfsync always\n", "posix", true},
		{"uring-durable", "appendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n", "uring", true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r := Runner{Tool: toolBin(t), Addr: testenv.StartServer(t, "save \"\"\n"+tc.config)}
			w := Workload{Target: "t", Mode: tc.mode, Commands: []string{"set", "incr"}, Requests: 3000, Clients: 8, Pipeline: 1,
				ValueSize: 32, Keyspace: 1000, MixedReads: true}
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

// TestSampleReadsEveryModesFsyncs samples the real server in each
// appendfsync policy around a second and a half of writes, long enough for
// everysec's background fdatasync: every policy that syncs reports its
// fdatasyncs, whichever engine ran them, and appendfsync no reports none.
func TestSampleReadsEveryModesFsyncs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		mode, config string
		fsyncs       bool
	}{
		{"aof-always", "appendfsync always\n", true},
		{"aof-everysec", "appendfsync everysec\n", true},
		{"aof-no", "appendfsync no\n", false},
		{"uring-fast", "appendfsync always\nappendfsync-engine uring\naof-uring-ack fast\n", true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r := Runner{Addr: testenv.StartServer(t, "save \"\"\nappendonly yes\n"+tc.config)}
			before, err := r.Sample(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c := redis.NewClient(&redis.Options{Addr: r.Addr})
			defer func() { _ = c.Close() }()
			for start := time.Now(); time.Since(start) < 1500*time.Millisecond; {
				if err := c.Incr(ctx, "counter").Err(); err != nil {
					t.Fatal(err)
				}
			}
			after, err := r.Sample(ctx)
			if err != nil {
				t.Fatal(err)
			}
			count, p50, p99 := FsyncDelta(before, after)
			if got := count > 0; got != tc.fsyncs {
				t.Errorf("%d fsyncs reported, want some: %v", count, tc.fsyncs)
			}
			if tc.fsyncs && (p50 <= 0 || p99 < p50) {
				t.Errorf("fsync quantiles %d/%d", p50, p99)
			}
		})
	}
}

// TestRunAgainstAReplicatedPrimary measures a primary whose durable replies
// wait for its replica's fsync: the result names the replica and the wait, and
// the replica itself is refused as a target.
func TestRunAgainstAReplicatedPrimary(t *testing.T) {
	const uring = "save \"\"\nappendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n"
	primary := testenv.StartServer(t, uring+"aof-uring-ack-replicas 1\n")
	replica := testenv.StartReplica(t, primary, uring)
	w := Workload{Target: "t", Mode: "uring-durable", Commands: []string{"set"}, Requests: 2000, Clients: 8, Pipeline: 1, ValueSize: 32, Keyspace: 1000}

	res, err := Runner{Tool: toolBin(t), Addr: primary}.Run(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replicas != 1 || res.AckReplicas != 1 || res.Engine != "uring" || len(res.Commands) != 1 || res.Commands[0].OpsPerSecond <= 0 {
		t.Errorf("result %+v, want 1 replica, 1 awaited, engine uring and a SET measurement", res)
	}
	if got := StatusResults(res)[0]; got.Replicas != 1 || got.AckReplicas != 1 {
		t.Errorf("status result %+v does not carry the replicas", got)
	}

	_, err = Runner{Tool: toolBin(t), Addr: replica}.Run(context.Background(), w)
	if err == nil || !strings.Contains(err.Error(), "is a replica") {
		t.Errorf("a run against the replica: %v, want a refusal naming it a replica", err)
	}
}

func TestRunReportsAnUnreachableServer(t *testing.T) {
	r := Runner{Tool: toolBin(t), Addr: "127.0.0.1:1"}
	_, err := r.Run(context.Background(), Workload{Target: "t", Commands: []string{"set"}, Requests: 1000, Clients: 1, Pipeline: 1, ValueSize: 8, Keyspace: 10})
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
			if err := r.WaitServing(context.Background(), 10*time.Second); err != nil {
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

// TestCrashCheckWaitsForReplicas kills a primary whose writes wait for its
// replica's fsync: the check waits until the replica streams from the
// restarted primary again, so the runner's cleanup, a write, is not refused
// with NOREPLICAS, and nothing acknowledged is lost.
func TestCrashCheckWaitsForReplicas(t *testing.T) {
	const uring = "appendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n"
	s := startRestartable(t, uring+"aof-uring-ack-replicas 1\n")
	testenv.StartReplica(t, s.addr, "save \"\"\n"+uring)
	r := Runner{Addr: s.addr, DB: 15}
	res, err := r.CrashCheck(context.Background(), 8, time.Second, 30*time.Second, s.kill9)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acknowledged == 0 || res.Lost != 0 {
		t.Errorf("%d of %d acknowledged keys lost", res.Lost, res.Acknowledged)
	}
	if err := r.DeleteKeys(context.Background()); err != nil {
		t.Errorf("the cleanup after the crash check: %v", err)
	}
}

// TestCrashCheckCountsLoss proves the check sees loss: a server that keeps
// nothing on disk must lose every acknowledged key.
func TestCrashCheckCountsLoss(t *testing.T) {
	s := startRestartable(t, "appendonly no\n")
	r := Runner{Addr: s.addr}
	if err := r.WaitServing(context.Background(), 10*time.Second); err != nil {
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

// TestRunWritesOnlyItsDatabase runs every write test next to an
// application's keys in db 0, some named like the tool's own: they keep
// their values, and nothing the run wrote remains anywhere.
func TestRunWritesOnlyItsDatabase(t *testing.T) {
	ctx := context.Background()
	addr := testenv.StartServer(t, "save \"\"\nappendonly yes\nappendfsync always\n")
	app := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = app.Close() }()
	user := map[string]string{"key:000000000001": "mine", "key:000000000002": "mine too", "counter:000000000001": "7", "session": "s", "user:1": "u"}
	for k, v := range user {
		if err := app.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := Runner{Tool: toolBin(t), Addr: addr, DB: 15}
	if err := r.ClaimDatabase(ctx); err != nil {
		t.Fatal(err)
	}
	w := Workload{Target: "t", Mode: "aof-always", Commands: []string{"set", "hset", "lpush", "incr"}, Requests: 2000, Clients: 4, Pipeline: 1,
		ValueSize: 16, Keyspace: 10}
	if _, err := r.Run(ctx, w); err != nil {
		t.Fatal(err)
	}
	bench := redis.NewClient(&redis.Options{Addr: addr, DB: 15})
	defer func() { _ = bench.Close() }()
	if n := bench.DBSize(ctx).Val(); n < 2 {
		t.Fatalf("database 15 holds %d keys during the run: the tool did not write there", n)
	}
	if err := r.DeleteKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if n := bench.DBSize(ctx).Val(); n != 0 {
		t.Errorf("database 15 holds %d keys after the run", n)
	}
	if n := app.DBSize(ctx).Val(); n != int64(len(user)) {
		t.Errorf("database 0 holds %d keys, want the application's %d", n, len(user))
	}
	for k, v := range user {
		if got := app.Get(ctx, k).Val(); got != v {
			t.Errorf("%s = %q, want the application's %q", k, got, v)
		}
	}
}

// TestClaimDatabaseRefusesAnApplicationsKeys: a database with a key no
// benchmark wrote is not the benchmark's; one an interrupted benchmark left
// behind is.
func TestClaimDatabaseRefusesAnApplicationsKeys(t *testing.T) {
	ctx := context.Background()
	addr := testenv.StartServer(t, "save \"\"\n")
	c := redis.NewClient(&redis.Options{Addr: addr, DB: 3})
	defer func() { _ = c.Close() }()
	if err := c.Set(ctx, "orders:1", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := Runner{Addr: addr, DB: 3}
	if err := r.ClaimDatabase(ctx); err == nil || !strings.Contains(err.Error(), "database 3 holds 1 keys that no benchmark wrote") {
		t.Fatalf("claiming a database in use: %v", err)
	}
	if c.Get(ctx, "orders:1").Val() != "x" {
		t.Fatal("the refused claim touched the application's key")
	}

	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.ClaimDatabase(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "key:000000000042", "left behind", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.ClaimDatabase(ctx); err != nil {
		t.Fatalf("claiming what an interrupted benchmark left: %v", err)
	}
	if n := c.Exists(ctx, "key:000000000042").Val(); n != 0 {
		t.Error("the leftover key survived the claim")
	}
}

// TestCrashCheckDebugSegfault kills the real server the way the runner does
// in a cluster: DEBUG SEGFAULT over the network, allowed by
// enable-debug-command yes. A durable mode keeps every acknowledged key.
func TestCrashCheckDebugSegfault(t *testing.T) {
	ctx := context.Background()
	s := startRestartable(t, "enable-debug-command yes\nappendonly yes\nappendfsync always\n")
	r := Runner{Addr: s.addr, DB: 15}
	if err := r.WaitServing(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var exit error
	kill := func(ctx context.Context) error {
		if err := r.DebugSegfault(ctx); err != nil {
			return err
		}
		exit = s.cmd.Wait()
		s.start()
		return nil
	}
	res, err := r.CrashCheck(ctx, 8, time.Second, 30*time.Second, kill)
	if err != nil {
		t.Fatal(err)
	}
	var exitErr *exec.ExitError
	if !errors.As(exit, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSEGV {
		t.Errorf("the server ended with %v, want SIGSEGV", exit)
	}
	if res.Acknowledged < 100 || res.Lost != 0 {
		t.Errorf("aof-always: %d acknowledged, %d lost", res.Acknowledged, res.Lost)
	}
}

// TestDebugSegfaultNeedsTheOptIn: without enable-debug-command the kill is
// refused, and the runner says how to allow it.
func TestDebugSegfaultNeedsTheOptIn(t *testing.T) {
	r := Runner{Addr: testenv.StartServer(t, "save \"\"\nenable-debug-command no\n")}
	err := r.DebugSegfault(context.Background())
	if err == nil || !strings.Contains(err.Error(), "spec.benchmark.crashCheck") {
		t.Fatalf("DEBUG SEGFAULT on a server that does not allow it: %v", err)
	}
}

// TestRunOverTLS drives valkey-benchmark and the runner's own client over TLS
// with a client certificate, against a server that serves TLS only.
func TestRunOverTLS(t *testing.T) {
	ca := testenv.NewCA(t)
	certPEM, keyPEM := ca.Issue(t, time.Hour, "server")
	dir := t.TempDir()
	testenv.WriteTLSFiles(t, dir, certPEM, keyPEM, ca.PEM)
	addr := testenv.StartServer(t, fmt.Sprintf("save \"\"\nappendonly yes\nappendfsync always\nappendfsync-engine uring\ntls-port 6379\n"+
		"tls-cert-file %[1]s/tls.crt\ntls-key-file %[1]s/tls.key\ntls-ca-cert-file %[1]s/ca.crt\ntls-auth-clients yes\n", dir))
	serverTLS, err := LoadTLS(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	w := Workload{Target: "t", Mode: "uring", Commands: []string{"set"}, Requests: 2000, Clients: 4, Pipeline: 1, ValueSize: 32, Keyspace: 100}

	// Without TLS neither valkey-benchmark nor the client is served.
	if _, err := (Runner{Tool: toolBin(t), Addr: addr}).Run(context.Background(), w); err == nil {
		t.Fatal("a plain runner was served by a TLS-only server")
	}
	r := Runner{Tool: toolBin(t), Addr: addr, TLS: serverTLS, DB: 15}
	res, err := r.Run(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commands) != 1 || res.Commands[0].OpsPerSecond <= 0 || res.Engine != "uring" || res.Commands[0].FsyncCount <= 0 {
		t.Errorf("result over TLS %+v", res)
	}
	keys, err := r.client().DBSize(context.Background()).Result()
	if err != nil || keys == 0 {
		t.Errorf("valkey-benchmark wrote %d keys over TLS (err %v)", keys, err)
	}
}

// TestDeleteKeysRetriesAServerComingBack: the cleanup after a crash check can
// find the restarted server out of reach for a moment (its Service drops it
// as the kubelet notices the restart; a dial timed out on the kind test bed):
// DeleteKeys retries until the server answers, and deletes the keys.
func TestDeleteKeysRetriesAServerComingBack(t *testing.T) {
	ctx := context.Background()
	s := startRestartable(t, "appendonly yes\nappendfsync always\n")
	r := Runner{Addr: s.addr, DB: 15}
	if err := r.WaitServing(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr, DB: 15})
	defer func() { _ = c.Close() }()
	for i := range 100 {
		if err := c.Set(ctx, fmt.Sprintf("key:%012d", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(1500 * time.Millisecond)
		s.start()
	}()
	if err := r.DeleteKeys(ctx); err != nil {
		t.Fatalf("DeleteKeys while the server restarts: %v", err)
	}
	<-restarted
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Errorf("database 15 holds %d keys after DeleteKeys", n)
	}
}
