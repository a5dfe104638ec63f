package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestRunAgainstACluster runs the runner as the benchmark user under the
// cluster's ACLRules against a real 3-shard cluster of durable servers,
// through one seed, in plain TCP and over TLS only (the bus too, client
// certificates required): valkey-benchmark --cluster spreads the keys over
// every primary, each primary's share is measured, the claim refuses a
// cluster that holds an application's key, and the cleanup leaves no key
// behind. Nothing is refused but valkey-benchmark's CONFIG GET.
func TestRunAgainstACluster(t *testing.T) {
	t.Run("plain", func(t *testing.T) { runAgainstACluster(t, false) })
	t.Run("tls", func(t *testing.T) { runAgainstACluster(t, true) })
}

func runAgainstACluster(t *testing.T, overTLS bool) {
	ctx := context.Background()
	config := "requirepass admin-pw\nappendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n" +
		"user " + User + " on >bench-pw " + ACLRules(false, true) + "\n"
	var (
		serverTLS *TLS
		adminTLS  *tls.Config
	)
	if overTLS {
		ca := testenv.NewCA(t)
		cert, key := ca.Issue(t, time.Hour, "localhost")
		dir := t.TempDir()
		testenv.WriteTLSFiles(t, dir, cert, key, ca.PEM)
		config += fmt.Sprintf("tls-port 6379\ntls-cert-file %[1]s/tls.crt\ntls-key-file %[1]s/tls.key\ntls-ca-cert-file %[1]s/ca.crt\n"+
			"tls-auth-clients yes\ntls-cluster yes\n", dir)
		var err error
		if serverTLS, err = LoadTLS(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err != nil {
			t.Fatal(err)
		}
		adminTLS = serverTLS.clientConfig()
	}
	var shards [][]string
	for range 3 {
		shards = append(shards, []string{testenv.RunClusterNode(t, t.TempDir(), config).Addr})
	}
	dial := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, Password: "admin-pw", TLSConfig: adminTLS, MaxRetries: -1})
	}
	if err := (&cluster.Admin{Dial: dial, Password: "admin-pw", Log: t.Logf}).Create(ctx, shards); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: shards[0], Password: "admin-pw", TLSConfig: adminTLS})
	defer func() { _ = admin.Close() }()

	r := Runner{Tool: toolBin(t), Addr: shards[1][0], User: User, Password: "bench-pw", Cluster: true, TLS: serverTLS}
	if err := r.WaitServing(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// An application's key: a cluster has one database, so no benchmark runs.
	if err := admin.Set(ctx, "orders:1", "o", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.ClaimDatabase(ctx); err == nil || !strings.Contains(err.Error(), "database 0 only") {
		t.Fatalf("claiming a cluster that holds an application's key: %v", err)
	}
	if err := admin.Del(ctx, "orders:1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.ACLLogReset(ctx).Err() }); err != nil {
		t.Fatal(err)
	}

	if err := r.ClaimDatabase(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx, Workload{Target: "t", Mode: "uring-durable", Commands: []string{"set", "lpush", "hset", "incr"},
		Requests: 6000, Clients: 12, Pipeline: 1, ValueSize: 32, Keyspace: 3000, MixedReads: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Shards != 3 || res.Engine != "uring" {
		t.Errorf("result over %d shards, engine %q; want 3, uring", res.Shards, res.Engine)
	}
	for _, c := range res.Commands {
		if c.OpsPerSecond <= 0 || c.P99Micros < c.P50Micros || c.CPUMicrosPerKop <= 0 || c.FsyncCount <= 0 {
			t.Errorf("%s: implausible figures %+v", c.Command, c)
		}
		// Every primary took a share of the keys' commands.
		if c.ShardOpsMin <= 0 || c.ShardOpsMax < c.ShardOpsMin {
			t.Errorf("%s: per-shard commands/s %.0f..%.0f", c.Command, c.ShardOpsMin, c.ShardOpsMax)
		}
	}
	if _, err := Encode(res); err != nil {
		t.Error(err)
	}
	size, err := admin.DBSize(ctx).Result()
	if err != nil || size == 0 {
		t.Fatalf("DBSIZE after the run: %d, %v", size, err)
	}
	if err := r.DeleteKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if size, err := admin.DBSize(ctx).Result(); err != nil || size != 0 {
		t.Errorf("DBSIZE after the cleanup: %d, %v", size, err)
	}
	followsAnAskRedirect(t, admin, dial, shards, r)
	var refused []string
	for _, shard := range shards {
		c := dial(shard[0])
		refused = append(refused, testenv.ACLRefusals(t, c)...)
		_ = c.Close()
	}
	refused = slices.Compact(slices.Sorted(slices.Values(refused)))
	if !slices.Equal(refused, []string{User + " config|get"}) {
		t.Errorf("ACL LOG %q, want only valkey-benchmark's CONFIG GET refused", refused)
	}
}

// followsAnAskRedirect: while a slot moves (MIGRATING on its owner,
// IMPORTING on another primary), a key of it that the owner no longer
// holds is answered with -ASK, and a cluster client signed in as the
// benchmark user follows it with ASKING to the importing node, as the
// steady writer does while shards are added or removed.
func followsAnAskRedirect(t *testing.T, admin *redis.ClusterClient, dial func(string) *redis.Client, shards [][]string, r Runner) {
	t.Helper()
	ctx := context.Background()
	const key = "key:ask"
	slot, err := admin.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	owner, err := admin.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var importer *redis.Client
	for _, shard := range shards {
		if c := dial(shard[0]); c.Options().Addr != owner.Options().Addr && importer == nil {
			importer = c
		} else {
			_ = c.Close()
		}
	}
	defer func() { _ = importer.Close() }()
	ownerID, err := owner.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	importerID, err := importer.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	slotArg := strconv.FormatInt(slot, 10)
	if err := importer.Do(ctx, "CLUSTER", "SETSLOT", slotArg, "IMPORTING", ownerID).Err(); err != nil {
		t.Fatal(err)
	}
	if err := owner.Do(ctx, "CLUSTER", "SETSLOT", slotArg, "MIGRATING", importerID).Err(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range []*redis.Client{owner, importer} {
			if err := c.Do(ctx, "CLUSTER", "SETSLOT", slotArg, "STABLE").Err(); err != nil {
				t.Error(err)
			}
		}
	}()
	user := redis.NewClusterClient(r.clusterOptions())
	defer func() { _ = user.Close() }()
	if err := user.Set(ctx, key, "moved", 0).Err(); err != nil {
		t.Errorf("a SET of a key in a moving slot, as the benchmark user: %v", err)
	}
	// ASKING opens the importing slot to the next command only.
	pipe := importer.Pipeline()
	pipe.Do(ctx, "ASKING")
	got := pipe.Get(ctx, key)
	pipe.Do(ctx, "ASKING")
	del := pipe.Del(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil || got.Val() != "moved" || del.Val() != 1 {
		t.Errorf("the importing node holds %q (%v): want the key the redirect took there", got.Val(), err)
	}
}
