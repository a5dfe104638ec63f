package controllers

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverInfo is what the operator reads back from a running server.
type serverInfo struct {
	aofEnabled     bool
	engine         string // the engine that writes the AOF: posix or uring
	uringActive    bool   // aof_uring_active
	fallbackReason string // aof_uring_fallback_reason

	runID            string // run_id: a new one is a new server process
	rewriteRunning   bool   // aof_rewrite_in_progress or aof_rewrite_scheduled
	lastRewriteOK    bool   // aof_last_bgrewrite_status:ok
	bgsaveInProgress bool   // rdb_bgsave_in_progress
	lastBgsaveOK     bool   // rdb_last_bgsave_status:ok
	rdbSaves         int64  // rdb_saves: snapshots started since the server started
}

// serverRequestTimeout bounds one request to a server, dial included.
const serverRequestTimeout = 3 * time.Second

// dialServer returns a client for one server; every request through it is
// bounded by serverRequestTimeout.
func dialServer(addr, password string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:            addr,
		Password:        password,
		DialTimeout:     2 * time.Second,
		ReadTimeout:     2 * time.Second,
		WriteTimeout:    2 * time.Second,
		MaxRetries:      -1,
		PoolSize:        1,
		DisableIdentity: true,
	})
}

// readServerInfo asks the server for its server and persistence INFO sections.
func readServerInfo(ctx context.Context, addr, password string) (*serverInfo, error) {
	client := dialServer(addr, password)
	defer func() { _ = client.Close() }()
	return infoOf(ctx, client)
}

func infoOf(ctx context.Context, client *redis.Client) (*serverInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	text, err := client.Info(ctx, "server", "persistence").Result()
	if err != nil {
		return nil, err
	}
	return parseServerInfo(text), nil
}

func parseServerInfo(text string) *serverInfo {
	fields := map[string]string{}
	scanner := bufio.NewScanner(strings.NewReader(text))
	for scanner.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(scanner.Text()), ":"); ok {
			fields[k] = v
		}
	}
	saves, _ := strconv.ParseInt(fields["rdb_saves"], 10, 64)
	info := &serverInfo{
		aofEnabled:     fields["aof_enabled"] == "1",
		engine:         fields["aof_engine"],
		uringActive:    fields["aof_uring_active"] == "1",
		fallbackReason: fields["aof_uring_fallback_reason"],

		runID:            fields["run_id"],
		rewriteRunning:   fields["aof_rewrite_in_progress"] == "1" || fields["aof_rewrite_scheduled"] == "1",
		lastRewriteOK:    fields["aof_last_bgrewrite_status"] == "ok",
		bgsaveInProgress: fields["rdb_bgsave_in_progress"] == "1",
		lastBgsaveOK:     fields["rdb_last_bgsave_status"] == "ok",
		rdbSaves:         saves,
	}
	// aof_engine is the configured engine; what writes the AOF is posix when
	// the ring could not start, or when the server has no uring engine at all.
	if info.engine == "" || info.engine == "uring" && !info.uringActive {
		info.engine = "posix"
	}
	if !info.aofEnabled {
		info.engine = ""
	}
	return info
}
