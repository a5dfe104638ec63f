package bench

import (
	"context"
	"fmt"
	"time"
)

// claimKey marks the database as a benchmark's while one runs: a database
// that holds it and nothing an application wrote may be emptied.
const claimKey = "uringredis:benchmark"

// ClaimDatabase makes sure the runner's database holds no application's keys
// and marks it as the benchmark's. Keys an earlier benchmark left behind (a
// runner killed before it could clean up) are flushed; any other key stops
// the run before it writes anything.
func (r Runner) ClaimDatabase(ctx context.Context) error {
	c := r.client()
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
		if claimed == 0 {
			return fmt.Errorf("database %d holds %d keys that no benchmark wrote; spec.benchmark.database of the RedisPersistence must name a database no application uses", r.DB, size)
		}
		if err := c.FlushDB(ctx).Err(); err != nil {
			return fmt.Errorf("flushing what an earlier benchmark left in database %d: %w", r.DB, err)
		}
	}
	return c.Set(ctx, claimKey, time.Now().UTC().Format(time.RFC3339), 0).Err()
}

// EmptyDatabase removes every key the benchmark wrote: the whole database,
// which ClaimDatabase proved was the benchmark's. It runs on a context of its
// own, so a runner stopped by its deadline or a signal still cleans up.
func (r Runner) EmptyDatabase(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	c := r.client()
	defer func() { _ = c.Close() }()
	if err := c.FlushDBAsync(ctx).Err(); err != nil {
		return fmt.Errorf("emptying database %d: %w", r.DB, err)
	}
	return nil
}
