package backup

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// writeEveryEncoding writes keys of every type in each encoding Valkey 8.1
// saves them in (strings as text, as integers and LZF-compressed; sets as
// intsets, listpacks and hash tables; lists of listpacks, compressed;
// hashes and sorted sets as listpacks and tables; a stream
// with a group, consumers and pending entries), with and without TTLs, in
// two databases. It returns how many keys it wrote.
func writeEveryEncoding(t *testing.T, c *redis.Client) int {
	t.Helper()
	ctx := context.Background()
	long := strings.Repeat("compressible ", 100)
	pipe := c.Pipeline()
	pipe.Set(ctx, "text", "hello", 0)
	pipe.Set(ctx, "int", "12345", 0)
	pipe.Set(ctx, "negative", "-7", 0)
	pipe.Set(ctx, "lzf", long, time.Hour)
	pipe.SAdd(ctx, "intset", 1, 2, 3)
	pipe.SAdd(ctx, "smallset", "a", "b")
	for i := range 300 {
		pipe.SAdd(ctx, "bigset", fmt.Sprintf("member-%d", i))
		pipe.HSet(ctx, "bighash", fmt.Sprintf("field-%d", i), long)
		pipe.ZAdd(ctx, "bigzset", redis.Z{Score: float64(i) / 3, Member: fmt.Sprintf("m-%d", i)})
		pipe.RPush(ctx, "biglist", fmt.Sprintf("%s %d", long, i))
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "stream", Values: []string{"n", fmt.Sprint(i)}})
	}
	pipe.RPush(ctx, "plainlist", strings.Repeat("x", 20000), "y")
	pipe.HSet(ctx, "smallhash", "a", "1", "b", "2")
	pipe.ZAdd(ctx, "smallzset", redis.Z{Score: 1, Member: "one"}, redis.Z{Score: 2.5, Member: "two"})
	pipe.Expire(ctx, "smallzset", 2*time.Hour)
	pipe.XGroupCreate(ctx, "stream", "readers", "0")
	pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "readers", Consumer: "alice", Streams: []string{"stream", ">"}, Count: 5})
	pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "readers", Consumer: "bob", Streams: []string{"stream", ">"}, Count: 3})
	for i := range 50 {
		pipe.Set(ctx, fmt.Sprintf("plain:%d", i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	other := redis.NewClient(&redis.Options{Addr: c.Options().Addr, DB: 3})
	defer func() { _ = other.Close() }()
	for i := range 20 {
		if err := other.Set(ctx, fmt.Sprintf("db3:%d", i), "v", time.Duration(i+1)*time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Set(ctx, "db3:persistent", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	return 64 + 21
}

// TestKeyScannerCountsAndSamples: the keys the agent reads from a real
// server's snapshot are those the server holds, counted by database with
// their TTLs, and every sampled key's type, expiry, size and digest are
// what the server answers (CheckRestore against the source finds nothing).
// Sampling fewer keys than there are keeps as many, chosen among all.
func TestKeyScannerCountsAndSamples(t *testing.T) {
	ctx := context.Background()
	addr := testenv.StartServer(t, appendonlyConfig+diskless+"list-compress-depth 1\nlist-max-listpack-size 4\n")
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	written := writeEveryEncoding(t, c)

	for _, sampleKeys := range []int{1000, 10} {
		scan := newKeyScanner(sampleKeys)
		if _, err := FetchRDB(ctx, Source{Addr: addr}, io.MultiWriter(io.Discard, scan)); err != nil {
			t.Fatal(err)
		}
		ks, err := scan.result()
		if err != nil {
			t.Fatalf("scanning the snapshot: %v", err)
		}
		want := []DBKeys{{DB: 0, Keys: 64, Expires: 2}, {DB: 3, Keys: 21, Expires: 20}}
		if fmt.Sprint(ks.DBs) != fmt.Sprint(want) || ks.Keys() != int64(written) {
			t.Errorf("sampling %d: counted %v, want %v", sampleKeys, ks.DBs, want)
		}
		if len(ks.Sample) != min(sampleKeys, written) {
			t.Errorf("sampling %d: %d keys sampled", sampleKeys, len(ks.Sample))
		}
		types := map[string]bool{}
		for _, k := range ks.Sample {
			types[k.Type] = true
			if k.Size < 0 {
				t.Errorf("key %s (%s) has no size", k.Key, k.Type)
			}
		}
		if sampleKeys >= written && len(types) != 6 {
			t.Errorf("the whole sample holds the types %v, want the six", types)
		}
		summary, problems, err := CheckRestore(ctx, c, ks, time.Now())
		if err != nil || len(problems) > 0 {
			t.Errorf("sampling %d: the source itself does not match its snapshot: %v %q", sampleKeys, err, problems)
		}
		if !strings.Contains(summary, fmt.Sprintf("the restore holds %d keys (63 without a TTL) of the %d recorded", written, written)) {
			t.Errorf("summary %q", summary)
		}
	}
}

// TestCheckRestoreFindsDifferences: a server that lacks a key, holds one of
// another type, a different TTL, size or value, or other counts than the
// backup recorded, is reported with each difference.
func TestCheckRestoreFindsDifferences(t *testing.T) {
	ctx := context.Background()
	addr := testenv.StartServer(t, appendonlyConfig+diskless)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	writeEveryEncoding(t, c)
	scan := newKeyScanner(1000)
	if _, err := FetchRDB(ctx, Source{Addr: addr}, io.MultiWriter(io.Discard, scan)); err != nil {
		t.Fatal(err)
	}
	ks, err := scan.result()
	if err != nil {
		t.Fatal(err)
	}
	pipe := c.Pipeline()
	pipe.Del(ctx, "plain:1")
	pipe.Del(ctx, "smallhash")
	pipe.Set(ctx, "smallhash", "now a string", 0)
	pipe.Persist(ctx, "lzf")
	pipe.SAdd(ctx, "smallset", "c")
	pipe.Set(ctx, "text", "HELLO", 0)
	pipe.Set(ctx, "extra", "not in the backup", 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	_, problems, err := CheckRestore(ctx, c, ks, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{
		"db 0 holds 63 keys without a TTL, the backup recorded 62",
		`key "plain:1" of db 0 is missing`,
		`key "smallhash" of db 0 is a string, the backup recorded a hash`,
		`key "lzf" of db 0 expires at never, the backup recorded 20`,
		`key "smallset" of db 0 has size 3, the backup recorded 2`,
		`key "text" of db 0 has a value of SHA-256`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the findings lack %q:\n%s", want, got)
		}
	}
}
