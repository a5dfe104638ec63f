// Package fsprobe measures a volume's durable-write latency L directly: the
// cost of one write followed by fdatasync, the operation an `appendfsync
// always` AOF performs per event-loop pass, on either layout of the log:
// appending (every fdatasync also commits the file's size) or overwriting
// space zero-written beforehand (aof-preallocate). With C clients and perfect
// group commit a durable server cannot exceed C/L acknowledged writes per
// second, which is the bound the benchmark reports.
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

// FdatasyncLatency writes n times size bytes to a scratch file in dir, each
// write followed by fdatasync, and times each pair: appending, or with
// overwrite over a file zero-written and fdatasync'ed first (untimed).
func FdatasyncLatency(dir string, n, size int, overwrite bool) (Result, error) {
	path := filepath.Join(dir, ".fsprobe")
	flags := os.O_CREATE | os.O_TRUNC | os.O_WRONLY
	if !overwrite {
		flags |= os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return Result{}, err
	}
	defer os.Remove(path)
	defer f.Close()
	if overwrite {
		if _, err := f.Write(make([]byte, n*size)); err != nil {
			return Result{}, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return Result{}, fmt.Errorf("fdatasync: %w", err)
		}
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	samples := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		var err error
		if overwrite {
			_, err = f.WriteAt(buf, int64(i*size))
		} else {
			_, err = f.Write(buf)
		}
		if err != nil {
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
