// Package fsprobe measures a volume's durable-append latency L directly: the
// cost of one appending write followed by fdatasync, the operation an
// `appendfsync always` AOF performs per event-loop pass. With C clients and
// perfect group commit a durable server cannot exceed C/L acknowledged
// writes per second, which is the bound the benchmark reports.
package fsprobe

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/stats"
)

// Result is the measured distribution of write+fdatasync.
type Result struct {
	Dir     string        `json:"dir"`
	Samples int           `json:"samples"`
	Bytes   int           `json:"bytes_per_write"`
	Mean    time.Duration `json:"mean_ns"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Max     time.Duration `json:"max_ns"`
}

// FdatasyncLatency appends n writes of size bytes to a scratch file in dir,
// each followed by fdatasync, and times each pair.
func FdatasyncLatency(dir string, n, size int) (Result, error) {
	path := filepath.Join(dir, ".fsprobe")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Result{}, err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	samples := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := f.Write(buf); err != nil {
			return Result{}, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return Result{}, fmt.Errorf("fdatasync: %w", err)
		}
		samples = append(samples, time.Since(start))
	}
	r := Result{Dir: dir, Samples: n, Bytes: size, Mean: stats.Mean(samples),
		P50: stats.Percentile(samples, 50), P99: stats.Percentile(samples, 99), Max: stats.Percentile(samples, 100)}
	return r, nil
}
