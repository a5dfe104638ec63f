package bench

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/resp"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/stats"
)

// Test names of the workloads with a side load; every other name is a
// valkey-benchmark test, optionally with -c/-p/-n suffixes (see ParseWorkload).
const (
	// Mixed is the SET load with concurrent GETs of untouched keys.
	Mixed = "mixed"
	// ReadHeavy is a GET load of many clients while a few clients SET.
	ReadHeavy = "read-heavy"
)

// Side loads: the harness's own clients, one command at a time each,
// running for as long as valkey-benchmark runs.
const (
	SideGet = "GET" // preloaded keys that nothing writes
	SideSet = "SET" // keys that nothing reads
)

// Workload is one test of the benchmark: a valkey-benchmark load, measured by
// the tool, and optionally a side load measured by the harness.
type Workload struct {
	Name     string `json:"name"`
	Test     string `json:"tool_test"` // valkey-benchmark -t
	Clients  int    `json:"clients"`
	Pipeline int    `json:"pipeline"`
	Requests int    `json:"requests"`
	Keyspace int    `json:"keyspace"`
	// ValueSize is valkey-benchmark's -d and the size of the values a GET
	// test preloads; 0 means the run's -data-size (and short preloaded values).
	ValueSize   int    `json:"value_size,omitempty"`
	Side        string `json:"side,omitempty"`
	SideClients int    `json:"side_clients,omitempty"`
}

// ParseWorkload builds the workload a test name stands for, from the run's
// options:
//
//	mixed              SET at -clients, plus -get-clients GETting untouched keys
//	read-heavy         GET of preloaded keys at -clients, plus -read-heavy-set-clients SETting
//	<test>             valkey-benchmark -t <test> at -clients and -pipeline
//	<test>-c8-p16-n500 the same with -c 8 -P 16 -n 500 (each suffix optional)
//	<test>-d1024-r1000 values of 1024 bytes (-d; a GET test preloads its keys
//	                   with values that size) over 1000 keys (-r)
//
// Without -n a run has -requests requests, scaled so that every run takes
// about as long as a 50-client one in a mode bound by fsync latency (whose
// throughput grows with the clients): fewer clients run proportionally fewer
// requests (at least 1/20), and pipelined runs four times as many.
func ParseWorkload(name string, o Options) (Workload, error) {
	switch name {
	case Mixed:
		return Workload{Name: name, Test: "set", Clients: o.Clients, Pipeline: 1, Requests: o.Requests,
			Keyspace: o.Keyspace, Side: SideGet, SideClients: o.GetClients}, nil
	case ReadHeavy:
		return Workload{Name: name, Test: "get", Clients: o.Clients, Pipeline: 1, Requests: o.Requests,
			Keyspace: o.ReadOnlyKeys, Side: SideSet, SideClients: o.ReadHeavySetClients}, nil
	}
	w := Workload{Name: name, Clients: o.Clients, Pipeline: o.Pipeline, Keyspace: o.Keyspace}
	parts := strings.Split(name, "-")
	w.Test = parts[0]
	bad := func(p string) error {
		return fmt.Errorf("test %q: bad suffix %q (want -c<clients>, -p<pipeline>, -n<requests>, -d<value bytes>, -r<keys>)", name, p)
	}
	for _, p := range parts[1:] {
		if len(p) < 2 {
			return w, bad(p)
		}
		v, err := strconv.Atoi(p[1:])
		if err != nil || v < 1 {
			return w, bad(p)
		}
		switch p[0] {
		case 'c':
			w.Clients = v
		case 'p':
			w.Pipeline = v
		case 'n':
			w.Requests = v
		case 'd':
			w.ValueSize = v
		case 'r':
			w.Keyspace = v
		default:
			return w, bad(p)
		}
	}
	if w.Test == "" {
		return w, fmt.Errorf("test %q: no valkey-benchmark test before the suffixes", name)
	}
	if w.Requests == 0 {
		w.Requests = o.Requests
		if w.Clients < o.Clients {
			w.Requests = max(o.Requests*w.Clients/o.Clients, o.Requests/20)
		}
		if w.Pipeline > 1 {
			w.Requests *= 4
		}
	}
	return w, nil
}

// ParseWorkloads parses a list of test names.
func ParseWorkloads(names []string, o Options) ([]Workload, error) {
	var ws []Workload
	for _, n := range names {
		w, err := ParseWorkload(strings.TrimSpace(n), o)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// plain reports whether w is a bare valkey-benchmark test: the run's default
// clients and pipeline, no side load.
func (w Workload) plain() bool { return w.Name == w.Test }

// writes reports whether the tool's requests are writes.
func (w Workload) writes() bool { return w.Test != "get" }

// runOps counts the requests a run made of the server: the tool's and the
// side load's (they cost server CPU and AOF writes too).
func runOps(w Workload, r Run) float64 {
	ops := float64(w.Requests)
	if r.Side != nil {
		ops += float64(r.Side.Count)
	}
	return ops
}

// SideStats are the figures of one run's side load.
type SideStats struct {
	Op      string  `json:"op"`
	Clients int     `json:"clients"`
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
	RPS     float64 `json:"ops_per_second"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	Errors  int     `json:"errors"`
}

// roKey names the keys the mixed run's side GETs read.
func roKey(i int) string { return "ro:" + strconv.Itoa(i) }

// toolKey names a key as valkey-benchmark's -r does (key:__rand_int__).
func toolKey(i int) string { return fmt.Sprintf("key:%012d", i) }

func roValue(i int) string { return "ro-value-" + strconv.Itoa(i) }

// preload writes n keys named by key(i) with value(i).
func preload(srv *server.Server, n int, key, value func(int) string) error {
	c, err := srv.Dial()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	const batch = 100
	for lo := 0; lo < n; lo += batch {
		args := []string{"MSET"}
		for i := lo; i < min(lo+batch, n); i++ {
			args = append(args, key(i), value(i))
		}
		c.Send(args...)
	}
	if err := c.Flush(); err != nil {
		return err
	}
	for lo := 0; lo < n; lo += batch {
		if _, err := c.Receive(); err != nil {
			return err
		}
	}
	return nil
}

type sideLoad struct {
	op      string
	clients int
	start   time.Time
	stopCh  chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	lat     []time.Duration
	errs    int
}

// startSide runs `clients` connections, each sending one command at a time
// until stop: GETs of the roKey keys (checking the value), or SETs of keys
// of its own, cycling over `keys` of them.
func startSide(srv *server.Server, op string, clients, keys, dataSize int) *sideLoad {
	s := &sideLoad{op: op, clients: clients, start: time.Now(), stopCh: make(chan struct{})}
	value := strings.Repeat("x", dataSize)
	for w := 0; w < clients; w++ {
		s.wg.Add(1)
		go func(w int, seed int64) {
			defer s.wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			c, err := srv.Dial()
			if err != nil {
				s.mu.Lock()
				s.errs++
				s.mu.Unlock()
				return
			}
			defer func() { _ = c.Close() }()
			var lat []time.Duration
			errs := 0
			defer func() {
				s.mu.Lock()
				s.lat = append(s.lat, lat...)
				s.errs += errs
				s.mu.Unlock()
			}()
			prefix := "side:" + strconv.Itoa(w) + ":"
			for i := 0; ; i++ {
				select {
				case <-s.stopCh:
					return
				default:
				}
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				start := time.Now()
				var ok bool
				if op == SideGet {
					k := rnd.Intn(keys)
					var v string
					v, ok, err = c.String("GET", roKey(k))
					ok = ok && v == roValue(k)
				} else {
					var v string
					v, _, err = c.String("SET", prefix+strconv.Itoa(i%keys), value)
					ok = v == "OK"
				}
				if err != nil || !ok {
					errs++
					if err != nil && !resp.IsServerError(err) {
						return // connection gone
					}
					continue
				}
				lat = append(lat, time.Since(start))
			}
		}(w, int64(w)+time.Now().UnixNano())
	}
	return s
}

func (s *sideLoad) stop() SideStats {
	close(s.stopCh)
	s.wg.Wait()
	secs := time.Since(s.start).Seconds()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return SideStats{Op: s.op, Clients: s.clients, Count: len(s.lat), Seconds: secs, RPS: float64(len(s.lat)) / secs,
		Errors: s.errs, P50Ms: ms(stats.Percentile(s.lat, 50)), P99Ms: ms(stats.Percentile(s.lat, 99)),
		P999Ms: ms(stats.Percentile(s.lat, 99.9))}
}
