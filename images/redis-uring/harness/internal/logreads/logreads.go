// Package logreads checks that appending to the AOF reads nothing from the
// device. The log is written in pieces smaller than a page; ext4 reads a
// block before a partial write into it unless the page cache holds it, so
// the zeros preallocated ahead of the log's tail must be in the cache when
// the log reaches them (aof_prealloc.c, "Cached zeros"). Without that every
// 4 KiB of log cost a synchronous read on the event loop.
package logreads

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/bench"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/loopfs"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
)

// Config of one check.
type Config struct {
	Bin       server.Binaries
	WorkDir   string
	LogDir    string
	Mode      server.Mode
	Requests  int // SETs of ValueSize bytes by 10 clients, one at a time each
	ValueSize int
}

// Outcome is what the device saw.
type Outcome struct {
	Mode     string `json:"mode"`
	LogBytes int64  `json:"log_bytes"`
	Pages    int64  `json:"log_pages"`
	Reads    int64  `json:"device_reads"`
}

// Run writes the log on a fresh ext4 loop volume and counts the reads its
// device served meanwhile.
func Run(cfg Config) (Outcome, error) {
	o := Outcome{Mode: cfg.Mode.Name}
	name := "logreads-" + cfg.Mode.Name
	fs, err := loopfs.Create(cfg.WorkDir, name, 256)
	if err != nil {
		return o, err
	}
	defer fs.Close()
	srv, err := server.Start(server.Options{Bin: cfg.Bin, Mode: cfg.Mode, Name: name,
		DataDir: filepath.Join(fs.Mount, "data"), StateDir: filepath.Join(cfg.LogDir, name)})
	if err != nil {
		return o, err
	}
	defer srv.Kill()
	if err := srv.CheckEngine(); err != nil {
		return o, err
	}
	before, err := aofSize(srv)
	if err != nil {
		return o, err
	}
	readsBefore, err := deviceReads(fs.Device)
	if err != nil {
		return o, err
	}
	if _, cmdline, err := bench.RunTool(cfg.Bin.Benchmark, bench.ToolArgs{Addr: srv.Addr, Clients: 10,
		Requests: cfg.Requests, Keyspace: 1000000, DataSize: cfg.ValueSize, Pipeline: 1, Test: "set",
		TLS: server.ServeTLS}); err != nil {
		return o, fmt.Errorf("%s: %w", cmdline, err)
	}
	readsAfter, err := deviceReads(fs.Device)
	if err != nil {
		return o, err
	}
	after, err := aofSize(srv)
	if err != nil {
		return o, err
	}
	o.LogBytes = after - before
	o.Pages = o.LogBytes / 4096
	o.Reads = readsAfter - readsBefore
	return o, nil
}

func aofSize(srv *server.Server) (int64, error) {
	info, err := srv.Info("persistence")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(info["aof_current_size"], 10, 64)
}

// deviceReads is the block device's completed reads (/sys/block/<dev>/stat).
func deviceReads(device string) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(device), "stat"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("empty stat of %s", device)
	}
	return strconv.ParseInt(f[0], 10, 64)
}
