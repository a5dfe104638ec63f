package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// durable is the servers' configuration: the io_uring AOF, every write
// acknowledged once it is on disk, and the shards kept as they were formed
// (see Admin).
const durable = "appendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\ncluster-allow-replica-migration no\n"

func newAdmin(t *testing.T) *Admin {
	return &Admin{
		Dial: func(addr string) *redis.Client { return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1}) },
		Log:  t.Logf,
	}
}

// A cluster of 3 shards of 2 durable servers forms from empty servers, and
// grows to 4 shards and back to 3 while a cluster-aware client writes: the
// slots move with their keys, the client sees no error (MOVED and ASK are
// followed), and no key is lost, TTLs included. A shard that still serves
// slots is never removed.
func TestClusterScalesWithItsKeys(t *testing.T) {
	ctx := context.Background()
	var (
		shards  [][]string
		servers [][]*testenv.Server
	)
	for range 4 {
		var shard []string
		var ss []*testenv.Server
		for range 2 {
			s := testenv.RunClusterNode(t, t.TempDir(), durable)
			shard, ss = append(shard, s.Addr), append(ss, s)
		}
		shards, servers = append(shards, shard), append(servers, ss)
	}
	admin := newAdmin(t)
	if err := admin.Create(ctx, shards[:3]); err != nil {
		t.Fatal(err)
	}
	// A second Create finds nothing to do.
	if err := admin.Create(ctx, shards[:3]); err != nil {
		t.Fatalf("Create again: %v", err)
	}
	checkShares(t, admin, shards[:3])

	var seeds []string
	for _, s := range shards[:3] {
		seeds = append(seeds, s...)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	defer func() { _ = c.Close() }()
	const keys = 20000
	for i := 0; i < keys; i += 500 {
		pipe := c.Pipeline()
		for j := i; j < i+500; j++ {
			ttl := time.Duration(0)
			if j%4 == 0 {
				ttl = time.Hour
			}
			pipe.Set(ctx, fmt.Sprintf("k:%d", j), fmt.Sprintf("v%d", j), ttl)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A client writing all along; every write it got an OK for must be
	// there at the end.
	var (
		mu      sync.Mutex
		written []string
		errs    []error
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("w:%d", i)
			err := c.Set(ctx, key, key, 0).Err()
			mu.Lock()
			if err != nil {
				errs = append(errs, fmt.Errorf("SET %s: %w", key, err))
			} else {
				written = append(written, key)
			}
			mu.Unlock()
		}
	}()

	// Out to 4 shards.
	if err := admin.Meet(ctx, shards[0][0], shards[3]); err != nil {
		t.Fatal(err)
	}
	if err := admin.Replicate(ctx, shards[3][0], shards[3][1:]); err != nil {
		t.Fatal(err)
	}
	primaries := []string{shards[0][0], shards[1][0], shards[2][0], shards[3][0]}
	if err := admin.Rebalance(ctx, primaries); err != nil {
		t.Fatal(err)
	}
	checkShares(t, admin, shards)

	// The fourth shard serves slots: it is not removed.
	var three []string
	for _, s := range shards[:3] {
		three = append(three, s...)
	}
	if err := admin.RemoveShard(ctx, three, shards[3]); err == nil || !strings.Contains(err.Error(), "still serves 4096 slots") {
		t.Errorf("removing a shard that serves slots: %v, want a refusal", err)
	}

	// Back to 3. The fourth shard leaves once every node agrees where its
	// slots went and the client had time to load the map again, while its
	// servers still answer MOVED.
	if err := admin.Rebalance(ctx, primaries[:3]); err != nil {
		t.Fatal(err)
	}
	if err := admin.WaitAgreed(ctx, append(slices.Clone(three), shards[3]...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second)
	if err := admin.RemoveShard(ctx, three, shards[3]); err != nil {
		t.Fatal(err)
	}
	// Its servers go, as the operator deletes their pods: a client that
	// still maps a slot to one of them reconnects elsewhere and learns
	// the slots anew.
	for _, s := range servers[3] {
		s.Stop(t)
	}
	if err := admin.WaitHealthy(ctx, three); err != nil {
		t.Fatal(err)
	}
	checkShares(t, admin, shards[:3])
	time.Sleep(time.Second) // the client writes on after the shard left
	close(stop)
	<-done

	if err := errors.Join(errs...); err != nil {
		t.Errorf("the writing client saw errors: %v", err)
	}
	t.Logf("the client wrote %d keys while the cluster scaled out and in", len(written))
	missing := 0
	report := func(key string, v string, err error) {
		if missing++; missing <= 10 {
			slot, _ := c.ClusterKeySlot(ctx, key).Result()
			t.Errorf("%s (slot %d): %q, %v", key, slot, v, err)
		}
	}
	for i := range keys {
		key := fmt.Sprintf("k:%d", i)
		v, err := c.Get(ctx, key).Result()
		if err != nil || v != fmt.Sprintf("v%d", i) {
			report(key, v, err)
			continue
		}
		if ttl := c.TTL(ctx, key).Val(); (i%4 == 0) != (ttl > 0) {
			t.Errorf("%s has TTL %v", key, ttl)
		}
	}
	for _, key := range written {
		if v, err := c.Get(ctx, key).Result(); err != nil || v != key {
			report(key, v, err)
		}
	}
	if missing > 0 {
		t.Errorf("%d of the %d keys are missing", missing, keys+len(written))
	}
	nodes, err := admin.Nodes(ctx, shards[0][0])
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 6 {
		t.Errorf("the cluster has %d nodes after the fourth shard left, want 6", len(nodes))
	}
}

// checkShares checks that the primary of shard i serves Share(i, n) slots
// in number and that its replicas follow it.
func checkShares(t *testing.T, admin *Admin, shards [][]string) {
	t.Helper()
	ctx := context.Background()
	nodes, err := admin.Nodes(ctx, shards[0][0])
	if err != nil {
		t.Fatal(err)
	}
	for i, shard := range shards {
		id, err := admin.myID(ctx, shard[0])
		if err != nil {
			t.Fatal(err)
		}
		want := Share(i, len(shards))
		for _, n := range nodes {
			switch {
			case n.ID == id && len(n.Slots) != want.Last-want.First+1:
				t.Errorf("shard %d's primary serves %d slots, want %d", i, len(n.Slots), want.Last-want.First+1)
			case n.PrimaryID == id && n.Addr != shard[1]:
				t.Errorf("%s replicates shard %d's primary, want %s", n.Addr, i, shard[1])
			}
		}
	}
}

// Moves cut short, as an operator restart or a reconcile's deadline leaves
// them: one in the middle of its keys, one after the receiver took the slot
// but before the giver let it go. FinishMoves completes what is open; no key
// is lost and no server, replicas included, has a move open afterwards.
func TestFinishMovesCutShort(t *testing.T) {
	ctx := context.Background()
	var shards [][]string
	var all []string
	for range 2 {
		var shard []string
		for range 2 {
			shard = append(shard, testenv.RunClusterNode(t, t.TempDir(), "appendonly yes\ncluster-allow-replica-migration no\n").Addr)
		}
		shards, all = append(shards, shard), append(all, shard...)
	}
	admin := newAdmin(t)
	if err := admin.Create(ctx, shards); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: all})
	defer func() { _ = c.Close() }()
	// {a} hashes to slot 15495 (shard 1's), {b} to 3300 (shard 0's).
	for i := range 200 {
		for _, tag := range []string{"a", "b"} {
			if err := c.Set(ctx, fmt.Sprintf("{%s}:%d", tag, i), i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	id := func(addr string) string {
		t.Helper()
		id, err := admin.myID(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	do := func(addr string, args ...any) {
		t.Helper()
		cl := admin.Dial(addr)
		defer func() { _ = cl.Close() }()
		if err := cl.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, addr, err)
		}
	}
	start := func(slot int, from, to string) {
		do(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", id(from))
		do(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", id(to))
	}
	migrate := func(slot int, from, to string, n int) {
		cl := admin.Dial(from)
		defer func() { _ = cl.Close() }()
		keys, err := cl.ClusterGetKeysInSlot(ctx, slot, n).Result()
		if err != nil {
			t.Fatal(err)
		}
		host, port, _ := strings.Cut(to, ":")
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		do(from, args...)
	}
	// Slot 15495: half its keys moved from shard 1 to shard 0.
	start(15495, shards[1][0], shards[0][0])
	migrate(15495, shards[1][0], shards[0][0], 100)
	// Slot 3300: all keys moved to shard 1, which owns it; shard 0 still migrating.
	start(3300, shards[0][0], shards[1][0])
	migrate(3300, shards[0][0], shards[1][0], 1000)
	do(shards[1][0], "CLUSTER", "SETSLOT", 3300, "NODE", id(shards[1][0]))

	views := func() [][]Node {
		var v [][]Node
		for _, addr := range all {
			nodes, err := admin.Nodes(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			v = append(v, nodes)
		}
		return v
	}
	// Valkey closes 3300 on the giver by itself once gossip tells it the
	// receiver took it; 15495 stays open until someone finishes it.
	if open := OpenMoves(views()); !slices.ContainsFunc(open, func(m Move) bool { return m.Slots[0] == 15495 }) {
		t.Fatalf("open moves before FinishMoves: %+v, want slot 15495 among them", open)
	}
	if err := admin.FinishMoves(ctx, all); err != nil {
		t.Fatal(err)
	}
	// The replicas hear their primaries' SETSLOTs through replication.
	deadline := time.Now().Add(10 * time.Second)
	for open := OpenMoves(views()); len(open) > 0; open = OpenMoves(views()) {
		if time.Now().After(deadline) {
			t.Fatalf("moves still open after FinishMoves: %+v", open)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := admin.WaitAgreed(ctx, all); err != nil {
		t.Fatal(err)
	}
	for _, check := range []struct {
		slot  int
		owner string
	}{{15495, shards[0][0]}, {3300, shards[1][0]}} {
		nodes, err := admin.Nodes(ctx, check.owner)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(myself(nodes).Slots, check.slot) {
			t.Errorf("%s does not serve slot %d after FinishMoves", check.owner, check.slot)
		}
	}
	for i := range 200 {
		for _, tag := range []string{"a", "b"} {
			if v, err := c.Get(ctx, fmt.Sprintf("{%s}:%d", tag, i)).Int(); err != nil || v != i {
				t.Fatalf("{%s}:%d is %d (%v) after FinishMoves", tag, i, v, err)
			}
		}
	}

	// Too little time left to move a slot: nothing is started.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := admin.MoveSlots(short, shards[0][0], shards[1][0], []int{15495}); !errors.Is(err, ErrOutOfTime) {
		t.Fatalf("MoveSlots with 1 s left: %v, want ErrOutOfTime", err)
	}
	if open := OpenMoves(views()); len(open) > 0 {
		t.Fatalf("MoveSlots out of time left moves open: %+v", open)
	}
}

// A server that stops answering for a moment (CLIENT PAUSE stands in for a
// long fsync or a starved process) is asked again until it answers, within
// Wait; one where nothing listens is an error at once.
func TestReadAsksASlowServerAgain(t *testing.T) {
	ctx := context.Background()
	server := testenv.RunClusterNode(t, t.TempDir(), "")
	admin := &Admin{
		Dial: func(addr string) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
		},
		Log:  t.Logf,
		Wait: 20 * time.Second,
	}
	pauser := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = pauser.Close() }()
	start := time.Now()
	if err := pauser.Do(ctx, "CLIENT", "PAUSE", 2000, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.myID(ctx, server.Addr); err != nil {
		t.Fatalf("CLUSTER MYID during CLIENT PAUSE 2000: %v", err)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("CLUSTER MYID answered %s after CLIENT PAUSE 2000, within the pause", took)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close()
	start = time.Now()
	if _, err := admin.Nodes(ctx, closed); err == nil {
		t.Fatalf("CLUSTER NODES on %s, where nothing listens, succeeded", closed)
	} else if took := time.Since(start); took > time.Second {
		t.Errorf("CLUSTER NODES on %s, where nothing listens, took %s to fail: %v", closed, took, err)
	}
}

// A MIGRATE whose receiver stops answering for a moment (CLIENT PAUSE WRITE
// stands in for a long fsync or a starved process) times out on the
// client, and the giver's next GETKEYSINSLOT waits behind it: both are asked
// again, and every key of the slot arrives.
func TestMigrateAsksAgainAfterATimeout(t *testing.T) {
	ctx := context.Background()
	receiver := testenv.RunClusterNode(t, t.TempDir(), "appendonly yes\n").Addr
	giver := testenv.RunClusterNode(t, t.TempDir(), "appendonly yes\n").Addr
	var logs []string
	admin := &Admin{
		Dial: func(addr string) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
		},
		Log: func(format string, args ...any) {
			logs = append(logs, fmt.Sprintf(format, args...))
			t.Logf(format, args...)
		},
	}
	if err := admin.Create(ctx, [][]string{{receiver}, {giver}}); err != nil {
		t.Fatal(err)
	}
	// {a} hashes to slot 15495, which the second shard, the giver, serves.
	const slot, keys = 15495, 250
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{giver, receiver}})
	defer func() { _ = c.Close() }()
	for i := range keys {
		if err := c.Set(ctx, fmt.Sprintf("{a}:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	do := func(addr string, args ...any) {
		t.Helper()
		cl := redis.NewClient(&redis.Options{Addr: addr})
		defer func() { _ = cl.Close() }()
		if err := cl.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, addr, err)
		}
	}
	giverID, err := admin.myID(ctx, giver)
	if err != nil {
		t.Fatal(err)
	}
	receiverID, err := admin.myID(ctx, receiver)
	if err != nil {
		t.Fatal(err)
	}
	do(receiver, "CLUSTER", "SETSLOT", slot, "IMPORTING", giverID)
	do(giver, "CLUSTER", "SETSLOT", slot, "MIGRATING", receiverID)
	do(receiver, "CLIENT", "PAUSE", 1500, "WRITE")
	src := admin.Dial(giver)
	defer func() { _ = src.Close() }()
	host, port, _ := strings.Cut(receiver, ":")
	if err := admin.migrateKeys(ctx, src, giver, receiver, host, port, slot); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "asking again") }) {
		t.Errorf("no step was asked again during a 1.5 s pause with a 300 ms read timeout: %q", logs)
	}
	check := redis.NewClient(&redis.Options{Addr: receiver})
	defer func() { _ = check.Close() }()
	if n, err := check.ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || n != keys {
		t.Fatalf("the receiver holds %d keys of slot %d (%v), want %d", n, slot, err, keys)
	}
	left, err := src.ClusterCountKeysInSlot(ctx, slot).Result()
	if err != nil || left != 0 {
		t.Fatalf("the giver still holds %d keys of slot %d (%v)", left, slot, err)
	}
}
