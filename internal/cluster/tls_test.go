package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

// A cluster whose nodes speak TLS only (port 0), on the bus too
// (tls-cluster yes) and requiring client certificates: it forms with a
// replica per shard, and MoveSlots moves slots with their keys (MIGRATE
// between nodes over TLS, signed in with AUTH2), as a sharded instance
// with spec.tls runs. Restarted all at once on new ports, the nodes are
// introduced again over the TLS bus, replicas included.
func TestClusterOverTLS(t *testing.T) {
	ctx := context.Background()
	ca := testenv.NewCA(t)
	cert, key := ca.Issue(t, time.Hour, "localhost")
	files := t.TempDir()
	testenv.WriteTLSFiles(t, files, cert, key, ca.PEM)
	config := strings.ReplaceAll("port 0\ntls-port 6379\ntls-cert-file DIR/tls.crt\ntls-key-file DIR/tls.key\ntls-ca-cert-file DIR/ca.crt\n"+
		"tls-auth-clients yes\ntls-replication yes\ntls-cluster yes\nrequirepass pw\nprimaryauth pw\n"+durable, "DIR", files)
	tlsConfig, err := tlsclient.Config(ca.PEM, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	var shards [][]string
	var all []string
	var servers []*testenv.Server
	for range 2 {
		var shard []string
		for range 2 {
			s := testenv.RunClusterNode(t, t.TempDir(), config)
			shard, servers = append(shard, s.Addr), append(servers, s)
		}
		shards, all = append(shards, shard), append(all, shard...)
	}
	admin := &Admin{
		Dial: func(addr string) *redis.Client {
			return redis.NewClient(&redis.Options{Addr: addr, Password: "pw", TLSConfig: tlsConfig, MaxRetries: -1})
		},
		Password: "pw",
		Log:      t.Logf,
	}
	if err := admin.Create(ctx, shards); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: all, Password: "pw", TLSConfig: tlsConfig})
	defer func() { _ = c.Close() }()
	// {a} hashes to slot 15495, shard 1's.
	for i := range 300 {
		if err := c.Set(ctx, fmt.Sprintf("{a}:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.MoveSlots(ctx, shards[1][0], shards[0][0], []int{15494, 15495, 15496}); err != nil {
		t.Fatal(err)
	}
	nodes, err := admin.Nodes(ctx, shards[0][0])
	if err != nil {
		t.Fatal(err)
	}
	if slots := myself(nodes).Slots; len(slots) != 8192+3 {
		t.Errorf("shard 0 serves %d slots after the move, want 8195", len(slots))
	}
	primary := admin.Dial(shards[0][0])
	defer func() { _ = primary.Close() }()
	if n, err := primary.ClusterCountKeysInSlot(ctx, 15495).Result(); err != nil || n != 300 {
		t.Errorf("shard 0 holds %d keys of slot 15495 (%v), want 300", n, err)
	}
	for i := range 300 {
		if v, err := c.Get(ctx, fmt.Sprintf("{a}:%d", i)).Int(); err != nil || v != i {
			t.Fatalf("{a}:%d = %d, %v", i, v, err)
		}
	}
	// The replica of shard 0 has the moved keys too, over TLS.
	if err := admin.WaitHealthy(ctx, all); err != nil {
		t.Fatal(err)
	}
	replica := admin.Dial(shards[0][1])
	defer func() { _ = replica.Close() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n, err := replica.DBSize(ctx).Result()
		if err == nil && n == 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard 0's replica holds %d keys (%v), want 300", n, err)
		}
	}

	all = restartOnNewPorts(t, admin, servers, config)
	moved := redis.NewClusterClient(&redis.ClusterOptions{Addrs: all, Password: "pw", TLSConfig: tlsConfig})
	defer func() { _ = moved.Close() }()
	for i := range 300 {
		if v, err := moved.Get(ctx, fmt.Sprintf("{a}:%d", i)).Int(); err != nil || v != i {
			t.Fatalf("after the restart, {a}:%d = %d, %v", i, v, err)
		}
	}
}
