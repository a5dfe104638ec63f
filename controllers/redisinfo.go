package controllers

import (
	"bufio"
	"context"
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
}

// readServerInfo asks the server for its persistence INFO section.
func readServerInfo(ctx context.Context, addr, password string) (*serverInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	client := redis.NewClient(&redis.Options{
		Addr:            addr,
		Password:        password,
		DialTimeout:     2 * time.Second,
		ReadTimeout:     2 * time.Second,
		MaxRetries:      -1,
		PoolSize:        1,
		DisableIdentity: true,
	})
	defer func() { _ = client.Close() }()
	text, err := client.Info(ctx, "persistence").Result()
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
	info := &serverInfo{
		aofEnabled:     fields["aof_enabled"] == "1",
		engine:         fields["aof_engine"],
		uringActive:    fields["aof_uring_active"] == "1",
		fallbackReason: fields["aof_uring_fallback_reason"],
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
