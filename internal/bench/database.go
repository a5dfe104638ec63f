package bench

import (
	"context"
	"fmt"
	"strings"
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
		if claimed > 0 {
			if err := deleteKeys(ctx, c); err != nil {
				return fmt.Errorf("deleting what an earlier benchmark left in database %d: %w", r.DB, err)
			}
			if size, err = c.DBSize(ctx).Result(); err != nil {
				return fmt.Errorf("DBSIZE of database %d: %w", r.DB, err)
			}
		}
		if size > 0 {
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
	c := r.client()
	defer func() { _ = c.Close() }()
	if err := deleteKeys(ctx, c); err != nil {
		return fmt.Errorf("deleting the benchmark's keys from database %d: %w", r.DB, err)
	}
	return nil
}

// deleteKeys UNLINKs the keys matching KeyPatterns, a SCAN page (up to
// scanCount keys) per command.
func deleteKeys(ctx context.Context, c *redis.Client) error {
	for _, pattern := range KeyPatterns {
		if !strings.ContainsAny(pattern, "*?[") {
			if err := c.Unlink(ctx, pattern).Err(); err != nil {
				return err
			}
			continue
		}
		for cursor := uint64(0); ; {
			keys, next, err := c.Scan(ctx, cursor, pattern, scanCount).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if err := c.Unlink(ctx, keys...).Err(); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return nil
}
