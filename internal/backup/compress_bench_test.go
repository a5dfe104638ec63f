package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// BenchmarkCompression is what spec.backup.compression: zstd costs and
// saves, on what a real server writes for 100 000 JSON-like values of
// about 150 bytes (an application's cache): the RDB a backup streams, and
// the INCR file the archive ships. It reports the ratio and, as MB/s, how
// fast one core compresses.
//
//	go test -run '^$' -bench Compression ./internal/backup
func BenchmarkCompression(b *testing.B) {
	dir := b.TempDir()
	server := testenv.RunServer(b, dir, timestampedDurableConfig)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	for i := 0; i < 100_000; i += 1000 {
		pipe := c.Pipeline()
		for j := i; j < i+1000; j++ {
			pipe.Set(ctx, fmt.Sprintf("user:%d", j), fmt.Sprintf(`{"id":%d,"name":"user-%d","email":"user%d@example.com","score":%d.%03d,"tags":["t%d","t%d"],"active":%t}`,
				j, j, j, j*7919%100000, j%1000, j%17, j%31, j%3 == 0), 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var rdb bytes.Buffer
	if _, err := FetchRDB(ctx, Source{Addr: server.Addr}, &rdb); err != nil {
		b.Fatal(err)
	}
	incr, err := os.ReadFile(filepath.Join(dir, appendDir, incrFileName(1)))
	if err != nil {
		b.Fatal(err)
	}
	scan, err := ScanAOF(incr, -1)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{{"rdb", rdb.Bytes()}, {"aof-segment", incr[:scan.End]}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			var out []byte
			for b.Loop() {
				out = encodeSegment(tc.data, CompressionZstd)
			}
			b.ReportMetric(float64(len(tc.data))/float64(len(out)), "ratio")
			b.ReportMetric(float64(len(tc.data)), "bytes")
		})
	}
}
