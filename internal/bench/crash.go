package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Killer crashes the server the way kill -9 would: no shutdown path runs, so
// nothing still in the server's buffers or io_uring ring reaches the file.
type Killer func(ctx context.Context) error

// DebugSegfault is the Killer of a server that allows DEBUG to clients
// (enable-debug-command yes, which a RedisPersistence's
// spec.benchmark.crashCheck turns on): the server faults on a real SIGSEGV,
// which, like kill -9, runs no shutdown path and flushes nothing. Deleting
// the pod would not do: even with a grace period of 0 the kubelet sends
// SIGTERM first, and the server shuts down cleanly, syncing its AOF.
func (r Runner) DebugSegfault(ctx context.Context) error {
	o := r.options()
	o.MaxRetries, o.DialTimeout = -1, 5*time.Second
	c := redis.NewClient(o)
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("reaching the server to kill it: %w", err)
	}
	err := c.Do(ctx, "DEBUG", "SEGFAULT").Err()
	var reply redis.Error
	if errors.As(err, &reply) {
		return fmt.Errorf("DEBUG SEGFAULT: %w (the RedisPersistence must allow it with spec.benchmark.crashCheck: true)", err)
	}
	// The server dies before it replies: the connection drops.
	return nil
}

// CrashCheck writes distinct keys from clients connections for write, kills
// the server while they write, waits until it serves again (restartWait at
// most) and counts the acknowledged keys it lost.
func (r Runner) CrashCheck(ctx context.Context, clients int, write, restartWait time.Duration, kill Killer) (CrashResult, error) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	key := func(c, seq int) string { return fmt.Sprintf("crash:%s:%d:%d", run, c, seq) }
	acked := make([]int, clients) // client c's keys 0..acked[c]-1 were acknowledged
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// No retries: a retried write could be acknowledged by the restarted
			// server and would blur what the crashed one acknowledged.
			o := r.options()
			o.DB, o.PoolSize, o.MaxRetries, o.DialTimeout = r.DB, 1, -1, time.Second
			conn := redis.NewClient(o)
			defer func() { _ = conn.Close() }()
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := conn.Set(ctx, key(c, seq), seq, 0).Err(); err != nil {
					return
				}
				acked[c] = seq + 1
			}
		}()
	}
	select {
	case <-time.After(write):
	case <-ctx.Done():
	}
	killErr := kill(ctx)
	close(stop)
	wg.Wait()
	if killErr != nil {
		return CrashResult{}, fmt.Errorf("killing the server: %w", killErr)
	}
	if err := r.WaitServing(ctx, restartWait); err != nil {
		return CrashResult{}, fmt.Errorf("after the kill: %w", err)
	}

	conn := r.client()
	defer func() { _ = conn.Close() }()
	var res CrashResult
	for c, n := range acked {
		res.Acknowledged += int64(n)
		for start := 0; start < n; start += 1000 {
			var cmds []*redis.IntCmd
			exists := func() error {
				pipe := conn.Pipeline()
				cmds = cmds[:0]
				for seq := start; seq < n && seq < start+1000; seq++ {
					cmds = append(cmds, pipe.Exists(ctx, key(c, seq)))
				}
				_, err := pipe.Exec(ctx)
				return err
			}
			// The restarted server answered WaitServing, but its Service can
			// still drop it for a moment afterwards (seen in `make demo`: the
			// endpoint turned not-ready as the kubelet noticed the restart, and
			// the read-back got "connection refused"). Retry for as long as a
			// restart may take.
			err := exists()
			for deadline := time.Now().Add(restartWait); err != nil && time.Now().Before(deadline); err = exists() {
				select {
				case <-ctx.Done():
					return res, ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
				if werr := r.WaitServing(ctx, time.Until(deadline)); werr != nil {
					err = werr
					break
				}
			}
			if err != nil {
				return res, fmt.Errorf("reading the acknowledged keys back: %w", err)
			}
			for _, cmd := range cmds {
				if cmd.Val() == 0 {
					res.Lost++
				}
			}
		}
	}
	if res.Acknowledged == 0 {
		return res, fmt.Errorf("no write was acknowledged in %s before the kill", write)
	}
	return res, nil
}

// WaitServing polls until the server answers, has loaded its data and takes
// writes: a primary whose writes wait for k replicas (aof-uring-ack-replicas)
// refuses them with NOREPLICAS until k replicas stream from it, which after
// a restart takes a resynchronisation. The runner waits so before it starts
// too: its target's Service can be without a ready endpoint for a moment
// after the target turned Ready (connection refused).
func (r Runner) WaitServing(ctx context.Context, limit time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		o := r.options()
		o.MaxRetries, o.DialTimeout = -1, time.Second
		conn := redis.NewClient(o)
		defer func() { _ = conn.Close() }()
		info, err := conn.InfoMap(ctx, "persistence", "replication").Result()
		last = err
		if err != nil {
			return false, nil
		}
		role, replicas, ackReplicas := replicationFromInfo(info)
		switch {
		case info["Persistence"]["loading"] != "0":
			last = errors.New("still loading")
		case role == "master" && replicas < ackReplicas:
			last = fmt.Errorf("%d of the %d replicas its writes wait for stream from it", replicas, ackReplicas)
		case r.Cluster:
			last = clusterOK(ctx, conn)
		}
		return last == nil, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("the server did not serve within %s: %w", limit, last)
}

// clusterOK is nil when the node conn reaches sees its cluster serving
// every slot (cluster_state:ok).
func clusterOK(ctx context.Context, conn *redis.Client) error {
	info, err := conn.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER INFO: %w", err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("the cluster does not serve every slot (cluster_state is not ok)")
	}
	return nil
}
