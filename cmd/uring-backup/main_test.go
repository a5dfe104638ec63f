package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// The agent's archive command ships a server's AOF until SIGTERM, makes a
// last pass (the server stopping with the pod is gone by then) and exits 0;
// restore with $RESTORE_ARCHIVE puts the latest of it on a new volume,
// where a server finds every key.
func TestArchiveThenRestore(t *testing.T) {
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "uring-backup")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	store := testenv.StartObjectStore(t)
	// The posix engine (the archive tests in internal/backup run the uring
	// engine): the archive ends where an INFO finds its buffer empty. And a
	// RESP base rather than an RDB.
	const config = "appendonly yes\nappendfsync everysec\naof-timestamp-enabled yes\naof-use-rdb-preamble no\n"
	dir := t.TempDir()
	server := testenv.RunServer(t, dir, config)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = c.Close() }()
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+store.AccessKey, "AWS_SECRET_ACCESS_KEY="+store.SecretKey)
	storeFlags := []string{"--endpoint=" + store.Endpoint, "--bucket=" + store.Bucket, "--prefix=team/cache"}

	for i := range 10 {
		if err := c.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A second after the AOF's base, so that the first pass archives a
	// whole second after it.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))

	var agentLog lockedBuffer
	agent := exec.Command(bin, append([]string{"archive", "--source=" + server.Addr, "--data-dir=" + dir, "--interval=1h"}, storeFlags...)...)
	agent.Env, agent.Stdout, agent.Stderr = env, &agentLog, &agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = agent.Process.Kill() }()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(agentLog.String(), "archived base"); {
		if time.Now().After(deadline) || strings.Contains(agentLog.String(), "failed") {
			t.Fatalf("the archiver's first pass did not archive the base:\n%s", agentLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(agentLog.String(), "archived base appendonly.aof.1.base.aof") {
		t.Errorf("the archiver's log does not name the RESP base:\n%s", agentLog.String())
	}
	// The next keys are archived by the last pass, made on SIGTERM after
	// the server, stopping with the pod, is gone.
	for i := 10; i < 20; i++ {
		if err := c.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	server.Stop(t)
	if err := agent.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := agent.Wait(); err != nil {
		t.Fatalf("the archiver after SIGTERM: %v\n%s", err, agentLog.String())
	}
	for _, want := range []string{"archiving into a new timeline", "the server does not answer"} {
		if !strings.Contains(agentLog.String(), want) {
			t.Errorf("the archiver's log does not say %q:\n%s", want, agentLog.String())
		}
	}

	restore := func(dir string, extraEnv ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"restore", "--data-dir=" + dir, "--ordinal-zero-only"}, storeFlags...)...)
		cmd.Env = append(append(env, "HOSTNAME=cache-0", "RESTORE_ARCHIVE=s3://"+store.Bucket+"/team/cache"), extraEnv...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := restore(t.TempDir(), "RESTORE_TARGET_TIME=yesterday"); err == nil || !strings.Contains(out, "RFC 3339") {
		t.Errorf("a target that is no time: %v, %s; want a refusal naming the format", err, out)
	}
	restored := t.TempDir()
	if out, err := restore(restored); err != nil || !strings.Contains(out, "restored the archive") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	s := testenv.RunServer(t, restored, config)
	rc := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer func() { _ = rc.Close() }()
	if n := rc.DBSize(ctx).Val(); n != 20 {
		t.Errorf("the restored server has %d keys, want 20", n)
	}
}

// lockedBuffer is a buffer the agent writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// list prints the backups a store holds under a prefix, newest first, from
// their backup.json alone; a backup without one (under way, or failed) is
// not among them, nor is another prefix's.
func TestListPrintsTheStoresBackups(t *testing.T) {
	ctx := context.Background()
	objects := testenv.StartObjectStore(t)
	t.Setenv("AWS_ACCESS_KEY_ID", objects.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", objects.SecretKey)
	put := func(prefix, key string, data []byte) {
		t.Helper()
		store, err := backup.Open(ctx, backup.Destination{Endpoint: objects.Endpoint, Bucket: objects.Bucket, Region: objects.Region,
			Prefix: prefix, AccessKey: objects.AccessKey, SecretKey: objects.SecretKey})
		if err != nil {
			t.Fatal(err)
		}
		// As the agent writes a backup.json, digest and all.
		if err := store.PutBytes(ctx, key, data); err != nil {
			t.Fatal(err)
		}
	}
	point := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	for i, name := range []string{"cache-older", "cache-newest", "cache-middle"} {
		m := backup.Metadata{Backup: name, Instance: "cache", Namespace: "shop", Mode: "uring", Point: point.Add(time.Duration([]int{0, 2, 1}[i]) * time.Hour),
			Location: "s3://" + objects.Bucket + "/shop/cache/backups/" + name + "/dump.rdb.zst", Size: int64(100 + i), SHA256: strings.Repeat("ab", 32)}
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		_, key := backup.ObjectKeys(name)
		put("shop/cache", key, b)
	}
	put("shop/cache", "backups/cache-unfinished/dump.rdb.zst", []byte("a snapshot whose metadata never came"))
	other, _ := (backup.Metadata{Backup: "other-1", Point: point, Location: "s3://x/y", Size: 1, SHA256: "cd"}).Encode()
	_, otherKey := backup.ObjectKeys("other-1")
	put("shop/other", otherKey, other)

	flags := []string{"--endpoint=" + objects.Endpoint, "--bucket=" + objects.Bucket, "--prefix=shop/cache"}
	var out bytes.Buffer
	if err := list(ctx, flags, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("list printed:\n%s\nwant a header and 3 backups", out.String())
	}
	for i, want := range []string{"cache-newest  2026-11-27T08:00:00Z  shop/cache  uring", "cache-middle  2026-11-27T07:00:00Z", "cache-older   2026-11-27T06:00:00Z"} {
		if !strings.HasPrefix(lines[i+1], want) {
			t.Errorf("line %d is %q, want it to begin %q", i+2, lines[i+1], want)
		}
	}
	out.Reset()
	if err := list(ctx, append(flags, "--json"), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"backup": "cache-newest"`) || strings.Contains(out.String(), "other-1") || strings.Contains(out.String(), "unfinished") {
		t.Errorf("list --json printed:\n%s", out.String())
	}
	out.Reset()
	if err := list(ctx, []string{"--endpoint=" + objects.Endpoint, "--bucket=" + objects.Bucket, "--prefix=shop/none"}, &out); err != nil ||
		!strings.Contains(out.String(), "no backup under s3://"+objects.Bucket+"/shop/none/backups/") {
		t.Errorf("list of an empty prefix: %q, %v", out.String(), err)
	}
}
