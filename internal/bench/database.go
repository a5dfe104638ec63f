package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// scanCount is the COUNT of each SCAN that finds the benchmark's keys.
const scanCount = 1000

// claimKey marks the database as a benchmark's while one runs: a database
// that holds it and nothing an application wrote may be emptied.
const claimKey = "uringredis:benchmark"

// ClaimDatabase makes sure the runner's database holds no application's keys
// and marks it as the benchmark's. Keys an earlier benchmark left behind (a
// runner killed before it could clean up) are deleted; any other key stops
// the run before it writes anything. A cluster has database 0 only: there
// any key no benchmark wrote stops the run.
func (r Runner) ClaimDatabase(ctx context.Context) error {
	c := r.keyspace()
	defer func() { _ = c.Close() }()
	size, err := c.DBSize(ctx).Result()
	if err != nil {
		return fmt.Errorf("DBSIZE of database %d: %w", r.DB, err)
	}
	if size > 0 {
		claimed, err := c.Exists(ctx, claimKey).Result()
		if err != nil {
			return fmt.Errorf("reading database %d: %w", r.DB, err)
		}
		if claimed > 0 {
			if err := r.eachPrimary(ctx, deleteKeys); err != nil {
				return fmt.Errorf("deleting what an earlier benchmark left in database %d: %w", r.DB, err)
			}
			if size, err = c.DBSize(ctx).Result(); err != nil {
				return fmt.Errorf("DBSIZE of database %d: %w", r.DB, err)
			}
		}
		switch {
		case size > 0 && r.Cluster:
			return fmt.Errorf("the cluster holds %d keys that no benchmark wrote: a cluster has database 0 only, so a benchmark runs on a sharded instance before any application writes to it", size)
		case size > 0:
			return fmt.Errorf("database %d holds %d keys that no benchmark wrote; spec.benchmark.database of the RedisPersistence must name a database no application uses", r.DB, size)
		}
	}
	return c.Set(ctx, claimKey, time.Now().UTC().Format(time.RFC3339), 0).Err()
}

// DeleteKeys removes every key the benchmark wrote (KeyPatterns) from its
// database, which ClaimDatabase proved held no other. It deletes by name,
// not with FLUSHDB, which the benchmark user may not send: a FLUSHDB
// ignores key permissions. It runs on a context of its own, so a runner
// stopped by its deadline or a signal still cleans up.
func (r Runner) DeleteKeys(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	err := r.eachPrimary(ctx, deleteKeys)
	// After a crash check the restarted server can be out of reach for a
	// moment although it answered WaitServing: its Service drops it as the
	// kubelet notices the restart, and a NetworkPolicy enforcer may drop
	// packets while it reprograms the pod (a dial timed out on the kind test
	// bed). Deleting is idempotent: network errors are retried for the minute.
	for err != nil && isNetworkError(err) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
			err = r.eachPrimary(ctx, deleteKeys)
		}
	}
	if err != nil {
		return fmt.Errorf("deleting the benchmark's keys from database %d: %w", r.DB, err)
	}
	return nil
}

// isNetworkError says whether err is the connection's (refused, reset,
// timed out, closed), not the server's reply.
func isNetworkError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// deleteKeys UNLINKs the keys of the server at addr that match KeyPatterns,
// in one SCAN of its keyspace, a page (up to scanCount keys) per pipeline of
// single-key UNLINKs: the keys of a page may hash to different slots, which
// one UNLINK of several keys refuses on a cluster (CROSSSLOT), and a name
// UNLINKed on a primary that does not serve its slot would be MOVED.
func deleteKeys(ctx context.Context, addr string, c *redis.Client) error {
	for cursor := uint64(0); ; {
		keys, next, err := c.Scan(ctx, cursor, "", scanCount).Result()
		if err != nil {
			return fmt.Errorf("SCAN on %s: %w", addr, err)
		}
		keys = slices.DeleteFunc(keys, func(k string) bool { return !benchmarkKey(k) })
		if len(keys) > 0 {
			if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.Unlink(ctx, k)
				}
				return nil
			}); err != nil {
				return fmt.Errorf("UNLINK on %s: %w", addr, err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// benchmarkKey reports whether key matches one of KeyPatterns or
// clusterKeyPatterns: a name, or a prefix followed by *.
func benchmarkKey(key string) bool {
	for _, p := range slices.Concat(KeyPatterns, clusterKeyPatterns) {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(key, prefix) || key == p {
			return true
		}
	}
	return false
}
