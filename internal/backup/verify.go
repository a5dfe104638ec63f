package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CheckRestore compares a server restored from a backup with the Keyspace
// the backup recorded, at now. It returns what matched, in words, and
// what did not, one line per finding; err is for a server that could not
// be asked.
//
// Counts: every key without a TTL was in the snapshot and nothing expires
// it, so each database must hold exactly as many as recorded. A key with a
// TTL may have expired since the backup's point (and a server loading an
// RDB drops those already expired), so a database may hold fewer of those,
// never more. Sample: each sampled key must have its type, expiry (to the
// millisecond), size and, for a string, value digest; one whose expiry has
// passed may be gone.
func CheckRestore(ctx context.Context, c *redis.Client, ks *Keyspace, now time.Time) (summary string, problems []string, err error) {
	restored, err := keyspaceInfo(ctx, c)
	if err != nil {
		return "", nil, err
	}
	problems = compareCounts(ks, restored)
	sampleProblems, checked, err := checkSample(ctx, c, ks.Sample, now)
	if err != nil {
		return "", nil, err
	}
	problems = append(problems, sampleProblems...)
	var keys, persistent int64
	for _, db := range restored {
		keys += db.Keys
		persistent += db.Keys - db.Expires
	}
	summary = fmt.Sprintf("the restore holds %d keys (%d without a TTL) of the %d recorded at the backup's point; %d sampled keys checked",
		keys, persistent, ks.Keys(), checked)
	return summary, problems, nil
}

// keyspaceInfo reads INFO keyspace: "db0:keys=3,expires=1,avg_ttl=0".
func keyspaceInfo(ctx context.Context, c *redis.Client) (map[int]DBKeys, error) {
	text, err := c.Info(ctx, "keyspace").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO keyspace: %w", err)
	}
	dbs := map[int]DBKeys{}
	for _, line := range strings.Split(text, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "db") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(name, "db"))
		if err != nil {
			continue
		}
		db := DBKeys{DB: n}
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "keys":
				db.Keys, _ = strconv.ParseInt(v, 10, 64)
			case "expires":
				db.Expires, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		dbs[n] = db
	}
	return dbs, nil
}

func compareCounts(ks *Keyspace, restored map[int]DBKeys) []string {
	recorded := map[int]DBKeys{}
	all := map[int]bool{}
	for _, db := range ks.DBs {
		recorded[db.DB] = db
		all[db.DB] = true
	}
	for n := range restored {
		all[n] = true
	}
	var dbs []int
	for n := range all {
		dbs = append(dbs, n)
	}
	sort.Ints(dbs)
	var problems []string
	for _, n := range dbs {
		want, got := recorded[n], restored[n]
		if wantP, gotP := want.Keys-want.Expires, got.Keys-got.Expires; wantP != gotP {
			problems = append(problems, fmt.Sprintf("db %d holds %d keys without a TTL, the backup recorded %d", n, gotP, wantP))
		}
		if got.Expires > want.Expires {
			problems = append(problems, fmt.Sprintf("db %d holds %d keys with a TTL, more than the %d the backup recorded", n, got.Expires, want.Expires))
		}
	}
	return problems
}

// checkSample checks each sampled key on one connection, database by
// database, and returns the findings and how many keys were checked.
func checkSample(ctx context.Context, c *redis.Client, sample []SampledKey, now time.Time) ([]string, int, error) {
	conn := c.Conn()
	selected := c.Options().DB
	defer func() {
		// The connection goes back to c's pool: in c's database.
		if selected != c.Options().DB {
			_ = conn.Select(ctx, c.Options().DB).Err()
		}
		_ = conn.Close()
	}()
	var problems []string
	for _, k := range sample {
		if k.DB != selected {
			if err := conn.Select(ctx, k.DB).Err(); err != nil {
				return nil, 0, fmt.Errorf("SELECT %d: %w", k.DB, err)
			}
			selected = k.DB
		}
		problem, err := checkKey(ctx, conn, k, now)
		if err != nil {
			return nil, 0, err
		}
		if problem != "" {
			problems = append(problems, fmt.Sprintf("key %q of db %d %s", k.Key, k.DB, problem))
		}
	}
	return problems, len(sample), nil
}

// checkKey says what is wrong with the restored key k, "" when nothing.
func checkKey(ctx context.Context, conn *redis.Conn, k SampledKey, now time.Time) (string, error) {
	key := string(k.Key)
	pipe := conn.Pipeline()
	typ := pipe.Type(ctx, key)
	expiry := pipe.Do(ctx, "PEXPIRETIME", key)
	var size *redis.IntCmd
	switch k.Type {
	case "string":
		size = pipe.StrLen(ctx, key)
	case "list":
		size = pipe.LLen(ctx, key)
	case "set":
		size = pipe.SCard(ctx, key)
	case "zset":
		size = pipe.ZCard(ctx, key)
	case "hash":
		size = pipe.HLen(ctx, key)
	case "stream":
		size = pipe.XLen(ctx, key)
	}
	var value *redis.StringCmd
	if k.SHA256 != "" {
		value = pipe.Get(ctx, key)
	}
	// A key of another type fails the commands of the recorded one: the
	// type is compared first, and only its error is the server's.
	_, _ = pipe.Exec(ctx)
	if err := typ.Err(); err != nil {
		return "", fmt.Errorf("reading the key %q: %w", key, err)
	}
	expired := k.ExpiresAt != 0 && k.ExpiresAt <= now.UnixMilli()
	switch got := typ.Val(); {
	case got == "none" && expired:
		return "", nil
	case got == "none":
		return "is missing", nil
	case k.Type != "module" && got != k.Type:
		return fmt.Sprintf("is a %s, the backup recorded a %s", got, k.Type), nil
	}
	cmds := []redis.Cmder{expiry}
	if size != nil {
		cmds = append(cmds, size)
	}
	if value != nil {
		cmds = append(cmds, value)
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return "", fmt.Errorf("reading the key %q: %w", key, err)
		}
	}
	wantExpiry := k.ExpiresAt
	if wantExpiry == 0 {
		wantExpiry = -1
	}
	if got, _ := expiry.Int64(); got != wantExpiry {
		return fmt.Sprintf("expires at %s, the backup recorded %s", expiryText(got), expiryText(wantExpiry)), nil
	}
	if size != nil && k.Size >= 0 && size.Val() != k.Size {
		return fmt.Sprintf("has size %d, the backup recorded %d", size.Val(), k.Size), nil
	}
	if value != nil {
		sum := sha256.Sum256([]byte(value.Val()))
		if got := hex.EncodeToString(sum[:]); got != k.SHA256 {
			return fmt.Sprintf("has a value of SHA-256 %s, the backup recorded %s", got[:12], k.SHA256[:min(12, len(k.SHA256))]), nil
		}
	}
	return "", nil
}

func expiryText(ms int64) string {
	if ms < 0 {
		return "never"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
