package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A sharded target (Runner.Cluster) is driven through one seed address, the
// instance's Service: valkey-benchmark --cluster and go-redis's cluster
// client read the slot map from it and send each key to its shard's
// primary. A cluster has database 0 only, so the runner writes there, and
// refuses to start on a cluster that holds any key no benchmark wrote.
//
// The figures of a run add up the primaries: CPU, RSS and fsyncs are their
// sums, Replicas the fewest any of them streams to. Each primary's share
// (commands it processed over the test's wall time) gives the per-shard
// spread, ShardOpsMin and ShardOpsMax: an uneven spread means the keys or
// the slots are.

// clusterOptions reach the cluster through r.Addr, as the runner signs in.
func (r Runner) clusterOptions() *redis.ClusterOptions {
	o := r.options()
	return &redis.ClusterOptions{Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		DialTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
}

// keyspace is the client the database's keys are read and written with: the
// server's, or a cluster client that sends each key to its shard.
func (r Runner) keyspace() redis.UniversalClient {
	if r.Cluster {
		return redis.NewClusterClient(r.clusterOptions())
	}
	return r.client()
}

// eachPrimary runs fn on the server, or on every primary of the cluster at
// once, each with its address.
func (r Runner) eachPrimary(ctx context.Context, fn func(ctx context.Context, addr string, c *redis.Client) error) error {
	if !r.Cluster {
		c := r.client()
		defer func() { _ = c.Close() }()
		return fn(ctx, r.Addr, c)
	}
	cc := redis.NewClusterClient(r.clusterOptions())
	defer func() { _ = cc.Close() }()
	// The primaries are the nodes CLUSTER SLOTS names as serving slots.
	return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return fn(ctx, c.Options().Addr, c)
	})
}

// samples reads every primary's INFO, by address.
func (r Runner) samples(ctx context.Context) (map[string]Sample, error) {
	var mu sync.Mutex
	out := map[string]Sample{}
	err := r.eachPrimary(ctx, func(ctx context.Context, addr string, c *redis.Client) error {
		s, err := sampleOf(ctx, c)
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		out[addr] = s
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("no primary answered at %s", r.Addr)
	}
	return out, err
}

// mergeSamples adds up the primaries' samples (in address order, so the
// histograms' bounds line up): CPU, RSS, commands and fsync buckets are
// sums, Replicas the fewest, and Role master only when every one is.
func mergeSamples(samples map[string]Sample) Sample {
	addrs := make([]string, 0, len(samples))
	for a := range samples {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var m Sample
	for i, a := range addrs {
		s := samples[a]
		if i == 0 {
			m.Engine, m.Role, m.Replicas, m.AckReplicas = s.Engine, s.Role, s.Replicas, s.AckReplicas
			m.FsyncBuckets = append([]Bucket(nil), s.FsyncBuckets...)
		} else {
			if s.Role != "master" {
				m.Role = s.Role
			}
			m.Replicas = min(m.Replicas, s.Replicas)
			if len(s.FsyncBuckets) != len(m.FsyncBuckets) {
				m.FsyncBuckets = nil
			}
			for j := range m.FsyncBuckets {
				m.FsyncBuckets[j].Count += s.FsyncBuckets[j].Count
			}
		}
		m.CPUSeconds += s.CPUSeconds
		m.RSSBytes += s.RSSBytes
		m.Commands += s.Commands
	}
	return m
}

// shardSpread is the fewest and most commands per second any primary in
// both before and after processed over elapsed.
func shardSpread(before, after map[string]Sample, elapsed time.Duration) (shards int, lo, hi float64) {
	for addr, a := range after {
		b, ok := before[addr]
		if !ok {
			continue
		}
		ops := math.Round(float64(a.Commands-b.Commands) / elapsed.Seconds())
		if shards == 0 || ops < lo {
			lo = ops
		}
		hi = max(hi, ops)
		shards++
	}
	return shards, lo, hi
}
