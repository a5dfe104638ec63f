package controllers

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
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

// serverBudget bounds all the requests one reconcile makes to a server
// (INFO, a mode change's steps, CONFIG GET/SET): a slow or stalled server
// costs a worker this long at most, and the reconcile picks up where it
// stopped the next time.
const serverBudget = 8 * time.Second

// infoMaxAge is how long a server's INFO answers every reconcile of its
// instance: pod status updates and the events of owned objects come in
// bursts, and each would otherwise ask the server again.
const infoMaxAge = 10 * time.Second

// infoErrMaxAge is how long a failed INFO answers the reconciles of its
// instance: shorter than the first retry of an unreachable server
// (unreachableRetry), which must ask again.
const infoErrMaxAge = time.Second

// unreachableRetry is how soon an instance whose Ready server could not be
// reached for `for` is looked at again: 2 s at first, then as long as it has
// been unreachable (about doubling), and the resync interval at most. A
// server the kubelet calls Ready but the operator cannot reach is mostly a
// moment's matter: a new operator pod whose address an enforcing network
// plugin has not admitted yet, a NetworkPolicy the operator just changed.
func unreachableRetry(unreachableFor time.Duration) time.Duration {
	return min(max(unreachableFor, 2*time.Second), resyncInterval)
}

// dialServer returns a client for one server; every request through it is
// bounded by serverRequestTimeout.
func dialServer(addr string, creds serverCredentials) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:            addr,
		Password:        creds.password,
		TLSConfig:       creds.tls,
		DialTimeout:     2 * time.Second,
		ReadTimeout:     2 * time.Second,
		WriteTimeout:    2 * time.Second,
		MaxRetries:      -1,
		PoolSize:        1,
		DisableIdentity: true,
		// The caller's deadline (serverBudget) cuts a request short too.
		ContextTimeoutEnabled: true,
	})
}

// serverProbes remembers, per instance, the server's last INFO and the
// server process the runtime options were last applied to.
type serverProbes struct {
	sync.Mutex
	clock     clock.PassiveClock
	last      map[types.NamespacedName]serverProbe
	appliedTo map[types.NamespacedName]string // the run_id of the process the runtime options were last applied to
}

type serverProbe struct {
	pod      types.UID
	restarts int32 // of the server container: a restarted server is a new process
	at       time.Time
	info     *serverInfo
	err      error
	// failingSince is when the INFO of this pod's server first failed
	// since it last answered (zero while it answers).
	failingSince time.Time
}

// info returns the INFO of the server behind pod, asking it at most once per
// infoMaxAge per pod and server process.
func (p *serverProbes) info(ctx context.Context, key types.NamespacedName, pod *corev1.Pod, ask func(context.Context) (*serverInfo, error)) (*serverInfo, error) {
	restarts := int32(0)
	if cs := serverContainer(pod); cs != nil {
		restarts = cs.RestartCount
	}
	p.Lock()
	last, ok := p.last[key]
	p.Unlock()
	same := ok && last.pod == pod.UID && last.restarts == restarts
	maxAge := infoMaxAge
	if last.err != nil {
		maxAge = infoErrMaxAge
	}
	if same && p.clock.Since(last.at) < maxAge {
		return last.info, last.err
	}
	info, err := ask(ctx)
	p.Lock()
	defer p.Unlock()
	if p.last == nil {
		p.last = map[types.NamespacedName]serverProbe{}
	}
	probe := serverProbe{pod: pod.UID, restarts: restarts, at: p.clock.Now(), info: info, err: err}
	if err != nil {
		probe.failingSince = probe.at
		if same && !last.failingSince.IsZero() {
			probe.failingSince = last.failingSince
		}
	}
	p.last[key] = probe
	return info, err
}

// unreachableFor is how long the INFO of key's server has failed, 0 while
// it answers.
func (p *serverProbes) unreachableFor(key types.NamespacedName) time.Duration {
	p.Lock()
	defer p.Unlock()
	if last, ok := p.last[key]; ok && !last.failingSince.IsZero() {
		return p.clock.Since(last.failingSince)
	}
	return 0
}

// forget drops what is known of the server: the operator just changed it.
func (p *serverProbes) forget(key types.NamespacedName) {
	p.Lock()
	defer p.Unlock()
	delete(p.last, key)
}

// drop forgets the instance: it is gone.
func (p *serverProbes) drop(key types.NamespacedName) {
	p.Lock()
	defer p.Unlock()
	delete(p.last, key)
	delete(p.appliedTo, key)
}

// appliedOn reports whether the runtime options were applied to the server
// process runID (the operator forgets it when it restarts, and applies them
// once more).
func (p *serverProbes) appliedOn(key types.NamespacedName, runID string) bool {
	p.Lock()
	defer p.Unlock()
	return runID != "" && p.appliedTo[key] == runID
}

func (p *serverProbes) setAppliedOn(key types.NamespacedName, runID string) {
	p.Lock()
	defer p.Unlock()
	if p.appliedTo == nil {
		p.appliedTo = map[types.NamespacedName]string{}
	}
	p.appliedTo[key] = runID
}

// readServerInfo asks the server for its server and persistence INFO sections.
func readServerInfo(ctx context.Context, addr string, creds serverCredentials) (*serverInfo, error) {
	client := dialServer(addr, creds)
	defer func() { _ = client.Close() }()
	return infoOf(ctx, client)
}

func infoOf(ctx context.Context, client *redis.Client) (*serverInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	sections, err := client.InfoMap(ctx, "server", "persistence").Result()
	if err != nil {
		return nil, err
	}
	return serverInfoFrom(sections), nil
}

// serverInfoFrom reads the server and persistence sections of INFO, as
// go-redis's InfoMap returns them (section title -> field -> value).
func serverInfoFrom(sections map[string]map[string]string) *serverInfo {
	server, persistence := sections["Server"], sections["Persistence"]
	saves, _ := strconv.ParseInt(persistence["rdb_saves"], 10, 64)
	info := &serverInfo{
		aofEnabled:     persistence["aof_enabled"] == "1",
		engine:         persistence["aof_engine"],
		uringActive:    persistence["aof_uring_active"] == "1",
		fallbackReason: persistence["aof_uring_fallback_reason"],

		runID:            server["run_id"],
		rewriteRunning:   persistence["aof_rewrite_in_progress"] == "1" || persistence["aof_rewrite_scheduled"] == "1",
		lastRewriteOK:    persistence["aof_last_bgrewrite_status"] == "ok",
		bgsaveInProgress: persistence["rdb_bgsave_in_progress"] == "1",
		lastBgsaveOK:     persistence["rdb_last_bgsave_status"] == "ok",
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
