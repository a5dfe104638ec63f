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
