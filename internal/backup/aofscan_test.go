package backup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// timestampedDurableConfig is durableConfig with the #TS annotations a
// point-in-time restore cuts at.
const timestampedDurableConfig = durableConfig + "aof-timestamp-enabled yes\n"

// The INCR file a real server writes in durable mode holds its log, with
// padding annotations, then the zeros it preallocates: ScanAOF ends where
// the log does, whatever the pieces it is read in, and cuts where
// valkey-check-aof --truncate-to-timestamp does.
func TestScanAOF(t *testing.T) {
	dir := t.TempDir()
	server := testenv.RunServer(t, dir, timestampedDurableConfig)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = c.Close() }()
	var seconds []int64
	for i := range 3 {
		seconds = append(seconds, writeGroup(t, c, i))
	}

	incr := lastIncr(t, dir)
	b, err := os.ReadFile(incr)
	if err != nil {
		t.Fatal(err)
	}
	scan, err := ScanAOF(b, -1)
	if err != nil {
		t.Fatal(err)
	}
	if scan.End == 0 || scan.End == len(b) || strings.Trim(string(b[scan.End:]), "\x00") != "" {
		t.Fatalf("the scan ends at %d of %d bytes; want the end of the log, with only zeros after it", scan.End, len(b))
	}
	if !strings.Contains(string(b[:scan.End]), "\r\n#....") {
		t.Logf("no padding annotation in the log (no direct write was made)")
	}
	if !slices.Equal(scan.Timestamps, seconds) {
		t.Errorf("timestamps %v, want the seconds of the writes %v", scan.Timestamps, seconds)
	}

	// Read in two pieces, cut anywhere: the first scan stops at an entry's
	// boundary at or before the cut, the second goes on from there.
	for split := 1; split < scan.End; split += 97 {
		first, err := ScanAOF(b[:split], -1)
		if err != nil {
			t.Fatalf("a scan of the first %d bytes: %v", split, err)
		}
		rest, err := ScanAOF(b[first.End:], -1)
		if err != nil {
			t.Fatalf("a scan from %d: %v", first.End, err)
		}
		if first.End+rest.End != scan.End || !slices.Equal(append(first.Timestamps, rest.Timestamps...), seconds) {
			t.Fatalf("split at %d: ends %d+%d, timestamps %v %v; want %d and %v", split, first.End, rest.End, first.Timestamps, rest.Timestamps, scan.End, seconds)
		}
	}

	if _, err := ScanAOF(append(b[:scan.End:scan.End], "GET x\r\n"...), -1); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", scan.End)) {
		t.Errorf("an inline command after the log: %v, want an error naming offset %d", err, scan.End)
	}

	for _, target := range seconds[:2] {
		cut, err := ScanAOF(b, target)
		if err != nil {
			t.Fatal(err)
		}
		if want := checkAOFCut(t, dir, target); cut.Cut != want {
			t.Errorf("target %d: cut at %d, valkey-check-aof cuts at %d", target, cut.Cut, want)
		}
	}
	// After the last timestamp there is nothing to cut. (valkey-check-aof
	// refuses the preallocated zeros in --truncate-to-timestamp mode.)
	if cut, err := ScanAOF(b, seconds[2]); err != nil || cut.Cut != -1 {
		t.Errorf("target %d, the last second: cut at %d, %v; want none", seconds[2], cut.Cut, err)
	}
}

// writeGroup writes group i's keys (g<i>:0..9, and g<i>:ttl with a TTL),
// all in one second, which it returns; the next group's second is later.
func writeGroup(t *testing.T, c *redis.Client, i int) int64 {
	t.Helper()
	ctx := context.Background()
	second := startOfNextSecond()
	pipe := c.Pipeline()
	for j := range 10 {
		pipe.Set(ctx, fmt.Sprintf("g%d:%d", i, j), fmt.Sprintf("value\x00%d\r\n%d", i, j), 0)
	}
	pipe.Set(ctx, fmt.Sprintf("g%d:ttl", i), "expires", time.Hour)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if now := time.Now().Unix(); now != second {
		t.Fatalf("group %d's writes began in second %d and ended in %d", i, second, now)
	}
	return second
}

// startOfNextSecond sleeps into the next second and returns it.
func startOfNextSecond() int64 {
	now := time.Now()
	next := now.Truncate(time.Second).Add(time.Second)
	time.Sleep(next.Sub(now) + 20*time.Millisecond)
	return next.Unix()
}

// lastIncr is the last INCR file the manifest in dir lists.
func lastIncr(t *testing.T, dir string) string {
	t.Helper()
	manifest, err := readManifest(filepath.Join(dir, appendDir, appendFile+".manifest"))
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, e := range manifest {
		if e.kind == "i" {
			last = e.file
		}
	}
	return filepath.Join(dir, appendDir, last)
}

// checkAOFCut runs valkey-check-aof --truncate-to-timestamp on a copy of
// the AOF in dir and returns the size it leaves the last INCR file.
func checkAOFCut(t *testing.T, dir string, target int64) int {
	t.Helper()
	cp := t.TempDir()
	entries, err := os.ReadDir(filepath.Join(dir, appendDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, appendDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(filepath.Dir(testenv.ServerBin()), "valkey-check-aof")
	out, err := exec.Command(bin, "--truncate-to-timestamp", strconv.FormatInt(target, 10), filepath.Join(cp, appendFile+".manifest")).CombinedOutput()
	if err != nil {
		t.Fatalf("valkey-check-aof --truncate-to-timestamp %d: %v\n%s", target, err, out)
	}
	info, err := os.Stat(filepath.Join(cp, filepath.Base(lastIncr(t, dir))))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.Size())
}
