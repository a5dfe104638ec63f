// Package correctness is the AOFUring thesis' correctness test: under
// concurrent load with BGREWRITEAOF fired at random moments, (1) distinct
// keys, (2) INCR of one key, (3) overwrites of one key; then the server is
// restarted from its AOF and every value is checked.
//
// Durable modes are SIGKILLed before the restart: everything they
// acknowledged must already be in the AOF. Other modes shut down cleanly.
package correctness

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/resp"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
)

// Test names.
const (
	DistinctKeys = "distinct-keys"
	IncrOneKey   = "incr-one-key"
	OverwriteKey = "overwrite-one-key"
)

// Tests in run order.
var Tests = []string{DistinctKeys, IncrOneKey, OverwriteKey}

// Config of one sub-test.
type Config struct {
	Bin      server.Binaries
	WorkDir  string
	LogDir   string // server configs and logs, kept after the run
	Mode     server.Mode
	Test     string
	Clients  int
	Requests int
	Rand     *rand.Rand
}

// Outcome of one sub-test.
type Outcome struct {
	Mode             string  `json:"mode"`
	Test             string  `json:"test"`
	Requests         int     `json:"requests"`
	Seconds          float64 `json:"seconds"`
	OpsPerSec        float64 `json:"ops_per_second"`
	RewritesStarted  int     `json:"rewrites_started"`
	RewritesFinished int     `json:"rewrites_finished"`
	Restart          string  `json:"restart"`
	Checked          int     `json:"values_checked"`
}

const (
	incrKey      = "c:counter"
	overwriteKey = "o:key"
)

func distinctKey(i int) string { return "d:" + strconv.Itoa(i) }

func distinctValue(i int) string { return "v" + strconv.Itoa(i) + ":" + strings.Repeat("d", 16) }

// Run executes one sub-test.
func Run(cfg Config) (Outcome, error) {
	o := Outcome{Mode: cfg.Mode.Name, Test: cfg.Test, Requests: cfg.Requests}
	name := "correctness-" + cfg.Mode.Name + "-" + cfg.Test
	dataDir := filepath.Join(cfg.WorkDir, name+".data")
	os.RemoveAll(dataDir)
	defer os.RemoveAll(dataDir)
	opts := server.Options{Bin: cfg.Bin, Mode: cfg.Mode, Name: name, DataDir: dataDir, StateDir: filepath.Join(cfg.LogDir, name)}
	srv, err := server.Start(opts)
	if err != nil {
		return o, err
	}
	defer func() { srv.Kill() }()
	if err := srv.CheckEngine(); err != nil {
		return o, err
	}
	before, err := srv.Info("persistence")
	if err != nil {
		return o, err
	}

	var check func(c *resp.Conn) (int, error)
	start := time.Now()
	stopRewrites := make(chan struct{})
	rewrites := make(chan int, 1)
	go func() { rewrites <- rewriteAtRandom(cfg, srv, stopRewrites) }()
	switch cfg.Test {
	case DistinctKeys:
		check, err = loadDistinct(cfg, srv)
	case IncrOneKey:
		check, err = loadIncr(cfg, srv)
	case OverwriteKey:
		check, err = loadOverwrite(cfg, srv)
	default:
		err = fmt.Errorf("unknown test %q", cfg.Test)
	}
	close(stopRewrites)
	o.RewritesStarted = <-rewrites
	o.Seconds = time.Since(start).Seconds()
	o.OpsPerSec = float64(cfg.Requests) / o.Seconds
	if err != nil {
		return o, err
	}
	after, err := srv.Info("persistence")
	if err != nil {
		return o, err
	}
	o.RewritesFinished = atoiOr(after["aof_rewrites"], 0) - atoiOr(before["aof_rewrites"], 0)
	if o.RewritesStarted == 0 {
		return o, fmt.Errorf("no BGREWRITEAOF started during the load: the test did not exercise rewrites")
	}
	// What the live server answers must hold before the restart too.
	if n, err := withConn(srv, check); err != nil {
		return o, fmt.Errorf("before restart (%d checked): %w", n, err)
	}

	if cfg.Mode.Durable() {
		o.Restart = "SIGKILL"
		srv.Kill()
	} else {
		o.Restart = "clean shutdown"
		if err := srv.Stop(time.Minute); err != nil {
			return o, err
		}
	}
	opts.Name = name + "-restart"
	if srv, err = server.Start(opts); err != nil {
		return o, fmt.Errorf("restart: %w", err)
	}
	o.Checked, err = withConn(srv, check)
	if err != nil {
		return o, fmt.Errorf("after restart: %w", err)
	}
	return o, nil
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

func withConn(srv *server.Server, f func(*resp.Conn) (int, error)) (int, error) {
	c, err := srv.Dial()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	return f(c)
}

// rewriteAtRandom fires BGREWRITEAOF 10..60 ms into the load, then every 100..800 ms until stopped and
// returns how many it started.
func rewriteAtRandom(cfg Config, srv *server.Server, stop <-chan struct{}) int {
	c, err := srv.Dial()
	if err != nil {
		return 0
	}
	defer c.Close()
	started := 0
	for {
		// The first one early (the load may take only half a second on a
		// fast volume, and each sub-test must see a rewrite), the next ones
		// at random points.
		wait := 100*time.Millisecond + time.Duration(cfg.Rand.Int63n(int64(700*time.Millisecond)))
		if started == 0 {
			wait = 10*time.Millisecond + time.Duration(cfg.Rand.Int63n(int64(50*time.Millisecond)))
		}
		select {
		case <-stop:
			return started
		case <-time.After(wait):
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if v, err := c.Do("BGREWRITEAOF"); err == nil {
			if s, _ := v.(string); strings.Contains(s, "started") || strings.Contains(s, "scheduled") {
				started++
			}
		}
	}
}

// parallel runs fn(worker, conn) on cfg.Clients connections.
func parallel(cfg Config, srv *server.Server, fn func(w int, c *resp.Conn) error) error {
	errs := make([]error, cfg.Clients)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Clients; w++ {
		c, err := srv.Dial()
		if err != nil {
			return err
		}
		c.SetDeadline(time.Now().Add(15 * time.Minute))
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			defer c.Close()
			errs[w] = fn(w, c)
		}(w)
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			return fmt.Errorf("client %d: %w", w, err)
		}
	}
	return nil
}

func loadDistinct(cfg Config, srv *server.Server) (func(*resp.Conn) (int, error), error) {
	err := parallel(cfg, srv, func(w int, c *resp.Conn) error {
		for i := w; i < cfg.Requests; i += cfg.Clients {
			if v, err := c.Do("SET", distinctKey(i), distinctValue(i)); err != nil || v != "OK" {
				return fmt.Errorf("SET %s: %v %v", distinctKey(i), v, err)
			}
		}
		return nil
	})
	check := func(c *resp.Conn) (int, error) {
		const batch = 1000
		for lo := 0; lo < cfg.Requests; lo += batch {
			hi := min(lo+batch, cfg.Requests)
			keys := make([]string, 0, hi-lo)
			for i := lo; i < hi; i++ {
				keys = append(keys, distinctKey(i))
			}
			vals, present, err := c.MGet(keys)
			if err != nil {
				return lo, err
			}
			for j := range keys {
				if !present[j] {
					return lo + j, fmt.Errorf("%s missing", keys[j])
				}
				if vals[j] != distinctValue(lo+j) {
					return lo + j, fmt.Errorf("%s = %q, want %q", keys[j], vals[j], distinctValue(lo+j))
				}
			}
		}
		n, err := c.Int("DBSIZE")
		if err != nil {
			return cfg.Requests, err
		}
		if n != int64(cfg.Requests) {
			return cfg.Requests, fmt.Errorf("DBSIZE %d, want %d", n, cfg.Requests)
		}
		return cfg.Requests, nil
	}
	return check, err
}

// loadIncr also checks that INCR's replies are exactly 1..Requests, each once:
// no increment was applied twice or lost while the server was live.
func loadIncr(cfg Config, srv *server.Server) (func(*resp.Conn) (int, error), error) {
	seen := make([]atomic.Bool, cfg.Requests+1)
	err := parallel(cfg, srv, func(w int, c *resp.Conn) error {
		for i := w; i < cfg.Requests; i += cfg.Clients {
			n, err := c.Int("INCR", incrKey)
			if err != nil {
				return err
			}
			if n < 1 || n > int64(cfg.Requests) || seen[n].Swap(true) {
				return fmt.Errorf("INCR replied %d: out of range or seen twice", n)
			}
		}
		return nil
	})
	check := func(c *resp.Conn) (int, error) {
		v, ok, err := c.String("GET", incrKey)
		if err != nil {
			return 0, err
		}
		if !ok || v != strconv.Itoa(cfg.Requests) {
			return 1, fmt.Errorf("%s = %q (present %v), want %d", incrKey, v, ok, cfg.Requests)
		}
		return 1, nil
	}
	return check, err
}

// loadOverwrite: the final value must be the last write of one of the
// clients, and the same value must come back after the restart.
func loadOverwrite(cfg Config, srv *server.Server) (func(*resp.Conn) (int, error), error) {
	last := make([]string, cfg.Clients)
	err := parallel(cfg, srv, func(w int, c *resp.Conn) error {
		for i := w; i < cfg.Requests; i += cfg.Clients {
			val := strconv.Itoa(w) + ":" + strconv.Itoa(i)
			if v, err := c.Do("SET", overwriteKey, val); err != nil || v != "OK" {
				return fmt.Errorf("SET: %v %v", v, err)
			}
			last[w] = val
		}
		return nil
	})
	var final string
	check := func(c *resp.Conn) (int, error) {
		v, ok, err := c.String("GET", overwriteKey)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 1, fmt.Errorf("%s missing", overwriteKey)
		}
		if final == "" {
			for _, l := range last {
				if v == l {
					final = v
				}
			}
			if final == "" {
				return 1, fmt.Errorf("%s = %q, which is no client's last write", overwriteKey, v)
			}
		}
		if v != final {
			return 1, fmt.Errorf("%s = %q, want %q (the value before the restart)", overwriteKey, v, final)
		}
		return 1, nil
	}
	return check, err
}
