package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestRunAsTheBenchmarkUser runs everything a runner does (the claim, every
// test a RedisBenchmark can name, the mixed reads, the crash check's DEBUG
// SEGFAULT and read-back, the cleanup) as the benchmark user under
// ACLRules, against a real server with a password: nothing is refused but
// valkey-benchmark's CONFIG GET, the application's keys in another database
// keep their values, and what the user could do beyond its work is refused.
func TestRunAsTheBenchmarkUser(t *testing.T) {
	ctx := context.Background()
	s := startRestartable(t, "requirepass admin-pw\nenable-debug-command yes\nappendonly yes\nappendfsync always\n"+
		"user "+User+" on >bench-pw "+ACLRules(true, false)+"\n")
	admin := redis.NewClient(&redis.Options{Addr: s.addr, Password: "admin-pw", MaxRetries: 20})
	defer func() { _ = admin.Close() }()
	r := Runner{Tool: toolBin(t), Addr: s.addr, User: User, Password: "bench-pw", DB: 15}
	if err := r.WaitServing(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	app := map[string]string{"orders:1": "o", "key:000000000001": "named like the tool's"}
	for k, v := range app {
		if err := admin.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.ACLLogReset(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	if err := r.ClaimDatabase(ctx); err != nil {
		t.Fatal(err)
	}
	w := Workload{Target: "t", Mode: "aof-always", Commands: []string{"set", "get", "hset", "lpush", "incr"}, Requests: 2000,
		Clients: 4, Pipeline: 1, ValueSize: 16, Keyspace: 100, MixedReads: true}
	res, err := r.Run(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commands) != 6 {
		t.Fatalf("%d results, want 6", len(res.Commands))
	}
	refused(t, admin, "config|get")
	kill := func(ctx context.Context) error {
		if err := r.DebugSegfault(ctx); err != nil {
			return err
		}
		_ = s.cmd.Wait()
		s.start()
		return nil
	}
	crash, err := r.CrashCheck(ctx, 4, 500*time.Millisecond, 30*time.Second, kill)
	if err != nil {
		t.Fatal(err)
	}
	if crash.Acknowledged == 0 || crash.Lost != 0 {
		t.Errorf("crash check: %d of %d lost", crash.Lost, crash.Acknowledged)
	}
	if err := r.DeleteKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if n := admin.Do(ctx, "EVAL", "redis.call('SELECT', 15) return redis.call('DBSIZE')", 0).Val(); n != int64(0) {
		t.Errorf("database 15 holds %v keys after the cleanup", n)
	}
	for k, v := range app {
		if got := admin.Get(ctx, k).Val(); got != v {
			t.Errorf("%s = %q, want the application's %q", k, got, v)
		}
	}

	// The crash check restarted the server, whose ACL LOG starts empty.
	refused(t, admin)

	// Beyond its work, everything is refused.
	c := redis.NewClient(&redis.Options{Addr: s.addr, Username: User, Password: "bench-pw", DB: 15})
	defer func() { _ = c.Close() }()
	for _, cmd := range [][]any{
		{"FLUSHALL"}, {"FLUSHDB"}, {"CONFIG", "GET", "requirepass"}, {"KEYS", "*"}, {"SET", "orders:1", "x"},
		{"GET", "orders:1"}, {"EVAL", "return 1", 0}, {"ACL", "LIST"}, {"SHUTDOWN"}, {"DEBUG", "SLEEP", 0},
	} {
		if err := c.Do(ctx, cmd...).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("%v as %s: %v, want NOPERM", cmd, User, err)
		}
	}
}

// refused checks that the server's ACL LOG holds a refusal of the benchmark
// user for each of objects and nothing else, and resets it.
func refused(t *testing.T, admin *redis.Client, objects ...string) {
	t.Helper()
	var want []string
	for _, o := range objects {
		want = append(want, User+" "+o)
	}
	if got := testenv.ACLRefusals(t, admin); !slices.Equal(got, want) {
		t.Errorf("ACL LOG: %q, want %q", got, want)
	}
}
