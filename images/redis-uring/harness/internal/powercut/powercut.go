// Package powercut cuts the power under a loaded server and checks which
// acknowledged writes survive.
//
// One trial: a fresh volume (Config.Volume: ext4 on a loop device by
// default; package volume); server with its AOF on it; Clients goroutines,
// each on its own connection, write distinct keys one at a time and record
// the instant every acknowledgement arrives; after a random load time the
// volume loses power (on ext4, EXT4_IOC_SHUTDOWN(NOLOGFLUSH)) and the server
// is SIGKILLed; the volume is mounted again (journal replay), the server
// restarted on the same directory, and every key read back. An acknowledged
// key that is missing is a lost write; a key present with a value we never wrote, or present in only
// some of the dbs its write puts it in, is corruption.
//
// Writers cycle through write kinds by key index (workload.go): plain SET, a
// script's SET (also with AOF-only propagation and into db 1), SET in
// MULTI/EXEC, MULTI/EXEC moving or copying the key into db 1, and writes
// with a time to live (SET EX, and EXPIRE in MULTI/EXEC: the key must come
// back with its expiry). The acknowledgement is the reply that completes the
// write (EVAL's, EXEC's).
//
// Meanwhile Observers goroutines GET the key each writer is writing right
// now (sent, not yet acknowledged), from the db its kind puts it in, and one
// subscriber receives the keyspace notifications of every key in db 0 and 1.
// A value a reader saw, and a key a notification named, has been observed: a
// durable mode must not let anyone observe a write that the cut can erase,
// so every observed key must survive too.
//
// Every other trial also fires BGREWRITEAOF during the load, so cuts land
// during rewrites, INCR-file rotations and manifest updates as well.
//
// Failover trials (Config.Replica): a replica on its own ext4 volume follows
// the server, which becomes the primary and runs with aof-uring-ack-replicas
// Config.AckReplicas. The cut takes both: the primary's node and disk are
// lost for good, and the replica loses power at the same moment (frozen,
// its volume shut down, killed). The replica's volume is remounted and the
// replica restarted from it without REPLICAOF, i.e. promoted: that is the
// server the keys are read back from. With one replica acknowledgement
// required, every acknowledged or observed write must be there (the replica
// had fdatasync'ed it); with none, the loss is what asynchronous replication
// plus the replica's own disk lose.
package powercut

import (
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/resp"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/stats"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/volume"
)

// Config of a series of trials.
type Config struct {
	Bin       server.Binaries
	WorkDir   string
	LogDir    string // server configs and logs, kept after the run
	Mode      server.Mode
	Clients   int
	Observers int
	LoadMin   time.Duration // the cut comes after a uniform random
	LoadMax   time.Duration // load time in [LoadMin, LoadMax]
	ValueSize int
	FSSizeMiB int
	Rand      *rand.Rand
	// Volume is the disk under the server (and its replica), FuseDisk the
	// fusedisk binary the fuse and gp3 volumes need.
	Volume   volume.Kind
	FuseDisk string
	// Replica makes the trial a failover (see the package comment), with
	// aof-uring-ack-replicas AckReplicas on the primary.
	Replica     bool
	AckReplicas int
}

// Trial is the outcome of one power cut.
type Trial struct {
	Mode        string  `json:"mode"`
	LoadSeconds float64 `json:"load_seconds"`
	Acked       int     `json:"acked"`
	AckedPerSec float64 `json:"acked_per_second"`
	// AckedAfterCut counts acknowledgements read after the server was frozen
	// and the filesystem shut down (sent before the freeze, read late).
	AckedAfterCut int `json:"acked_after_cut"`
	Lost          int `json:"lost"`
	Survived      int `json:"survived"`
	Corrupt       int `json:"corrupt"`
	InFlightFound int `json:"in_flight_found"`
	// Observed counts writes a reader saw while they were in flight (or
	// just acknowledged); ObservedLost those of them missing after restart.
	Observed     int `json:"observed"`
	ObservedLost int `json:"observed_lost"`
	// Notified counts writes named by a keyspace notification received
	// before the connection died; NotifiedLost those missing after restart.
	Notified     int `json:"notified"`
	NotifiedLost int `json:"notified_lost"`
	// Kinds splits the counts by write kind.
	Kinds map[string]KindCounts `json:"kinds"`
	// LostWrites describes the first lost writes (acknowledged or observed).
	LostWrites []LostWrite `json:"lost_writes,omitempty"`
	// Rewrites is how many BGREWRITEAOF the trial started during the load.
	Rewrites int `json:"rewrites"`
	// DirectWrites is INFO aof_uring_direct_writes just before the cut: the
	// batches the server wrote as O_DIRECT writes with RWF_DSYNC.
	DirectWrites int64 `json:"direct_writes"`
	// DirectDeclined is INFO aof_uring_direct_declined_reason then: why the
	// last batch was not a direct write ("none" after one).
	DirectDeclined string `json:"direct_declined_reason,omitempty"`
	// LossWindowMs: cut minus the acknowledgement time of the oldest lost
	// write — how far back in time the cut reached. 0 when nothing was lost.
	LossWindowMs float64 `json:"loss_window_ms"`
	// LastSurvivorMs: cut minus the acknowledgement time of the newest write
	// that survived (negative when its reply was read after the cut began).
	// Meaningless when Survived is 0.
	LastSurvivorMs float64 `json:"last_survivor_before_cut_ms"`
	// Refusal is an error reply a client got (the disk was gone); expected.
	Refusal string `json:"refusal,omitempty"`
	Error   string `json:"error,omitempty"`
}

// LostWrite is one write missing after the restart that was acknowledged or
// observed: what a server bug report needs.
type LostWrite struct {
	Key  string `json:"key"`
	Kind string `json:"kind"`
	DBs  string `json:"dbs"` // where the key should be: "0", "1", "0,1"
	// AckBeforeCutMs: cut minus the acknowledgement time (negative: read
	// after the cut began); absent for the unacknowledged in-flight write.
	AckBeforeCutMs *float64 `json:"ack_before_cut_ms,omitempty"`
	Observed       bool     `json:"observed"`
	Notified       bool     `json:"notified"`
}

// maxLostWrites bounds Trial.LostWrites (modes that lose thousands).
const maxLostWrites = 20

type worker struct {
	acks     []time.Duration // acks[i] = ack time of key i, since load start
	inFlight bool            // one write sent whose acknowledgement never came
	err      error
	sending  atomic.Int64 // index of the key being written now
	observed map[int]bool // keys of this writer that a reader saw before their ack
	notified map[int]bool // keys of this writer named by a notification
}

func key(w, i int) string { return "pc:" + strconv.Itoa(w) + ":" + strconv.Itoa(i) }

func value(w, i, size int) string {
	v := strconv.Itoa(w) + ":" + strconv.Itoa(i) + ":"
	if len(v) < size {
		v += strings.Repeat("x", size-len(v))
	}
	return v
}

// Run performs one trial.
func Run(cfg Config, n int) Trial {
	t := Trial{Mode: cfg.Mode.Name}
	if err := run(cfg, n, &t); err != nil {
		t.Error = err.Error()
	}
	return t
}

func run(cfg Config, n int, t *Trial) error {
	name := fmt.Sprintf("powercut-%s-%s-%d", cfg.Volume, cfg.Mode.Name, n)
	fs, err := cfg.volume(name)
	if err != nil {
		return err
	}
	defer func() { _ = fs.Close() }()
	opts := server.Options{
		Bin: cfg.Bin, Mode: cfg.Mode, Name: name,
		DataDir:  filepath.Join(fs.Dir(), "data"),
		StateDir: filepath.Join(cfg.LogDir, name),
	}
	if cfg.Replica {
		opts.Extra = append(opts.Extra, "aof-uring-ack-replicas "+strconv.Itoa(cfg.AckReplicas))
	}
	srv, err := server.Start(opts)
	if err != nil {
		return err
	}
	defer srv.Kill()
	if err := srv.CheckEngine(); err != nil {
		return err
	}
	// Failover: the replica, on its own volume; it is what survives.
	var replica *server.Server
	var replicaFS volume.Volume
	var replicaOpts server.Options
	if cfg.Replica {
		if replicaFS, err = cfg.volume(name + "-replica"); err != nil {
			return err
		}
		defer func() { _ = replicaFS.Close() }()
		replicaOpts = server.Options{
			Bin: cfg.Bin, Mode: cfg.Mode, Name: name + "-replica",
			DataDir:  filepath.Join(replicaFS.Dir(), "data"),
			StateDir: filepath.Join(cfg.LogDir, name),
		}
		if replica, err = server.StartReplica(replicaOpts, srv); err != nil {
			return err
		}
		defer replica.Kill()
	}

	workers := make([]*worker, cfg.Clients)
	conns := make([]*resp.Conn, cfg.Clients)
	for i := range conns {
		if conns[i], err = srv.Dial(); err != nil {
			return err
		}
		defer func() { _ = conns[i].Close() }()
	}
	var wg sync.WaitGroup
	sub, err := subscribe(srv, &wg)
	if err != nil {
		return err
	}
	start := time.Now()
	for w := range workers {
		workers[w] = &worker{acks: make([]time.Duration, 0, 4096), observed: map[int]bool{}, notified: map[int]bool{}}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			st, c := workers[w], conns[w]
			for i := 0; ; i++ {
				st.sending.Store(int64(i))
				st.inFlight = true
				if err := cfg.kindOf(i).write(c, key(w, i), value(w, i, cfg.ValueSize)); err != nil {
					st.err = err
					return
				}
				st.acks = append(st.acks, time.Since(start))
				st.inFlight = false
			}
		}(w)
	}

	observed := observe(cfg, srv, workers, &wg)
	if n%2 == 0 {
		rewriteDuringLoad(cfg, srv, &wg, &t.Rewrites)
	}

	load := cfg.LoadMin + time.Duration(cfg.Rand.Int63n(int64(cfg.LoadMax-cfg.LoadMin)+1))
	time.Sleep(load)
	select {
	case <-srv.Exited():
		srv.Kill()
		wg.Wait()
		exit := srv.ExitErr()
		if exit == nil {
			exit = errors.New("exit status 0")
		}
		return fmt.Errorf("server died during the load, before the cut: %w\n%s", exit, srv.LogTail(10))
	default:
	}
	// The cut. Power loss stops the CPU and the disk in the same instant;
	// here the server is frozen first, then the filesystem shut down. The
	// order matters: while EXT4_IOC_SHUTDOWN aborts the journal, an
	// fdatasync racing with it can return success for a transaction that
	// never reaches the disk (seen as posix `always` losing writes
	// acknowledged during the ioctl's few milliseconds), which no real power
	// cut can produce. Frozen, the server cannot act on such a result.
	if info, err := srv.Info("persistence"); err == nil {
		t.DirectWrites, _ = strconv.ParseInt(info["aof_uring_direct_writes"], 10, 64)
		t.DirectDeclined = info["aof_uring_direct_declined_reason"]
	}
	cut := time.Since(start)
	var freezeErr error
	if replica != nil {
		// The replica first: frozen second, it would go on receiving and
		// syncing what the frozen primary had sent, which a power cut of
		// both at once does not allow.
		freezeErr = replica.Freeze(10 * time.Second)
	}
	freezeErr = errors.Join(freezeErr, srv.Freeze(10*time.Second))
	cutErr := errors.Join(freezeErr, fs.PowerCut())
	if replica != nil {
		cutErr = errors.Join(cutErr, replicaFS.PowerCut())
	}
	cutDone := time.Since(start)
	srv.Kill()
	if replica != nil {
		replica.Kill()
	}
	wg.Wait()
	for _, o := range *observed {
		workers[o[0]].observed[o[1]] = true
	}
	if cutErr != nil {
		return cutErr
	}
	if err := sub.assign(workers, start.Add(cut)); err != nil {
		return err
	}
	t.LoadSeconds = cut.Seconds()
	for _, st := range workers {
		t.Acked += len(st.acks)
		for _, a := range st.acks {
			if a > cutDone {
				t.AckedAfterCut++
			}
		}
		if st.err != nil && resp.IsServerError(st.err) {
			t.Refusal = st.err.Error()
		}
	}
	t.AckedPerSec = float64(t.Acked) / cut.Seconds()

	back, backOpts := fs, opts
	if replica != nil {
		// The primary's node is gone; the replica comes back from its disk
		// as the new primary.
		back, backOpts = replicaFS, replicaOpts
	}
	if err := back.Reboot(); err != nil {
		return err
	}
	backOpts.Name += "-restart"
	srv2, err := server.Start(backOpts)
	if err != nil {
		return fmt.Errorf("restart after power cut: %w", err)
	}
	defer srv2.Kill()
	return verify(cfg, srv2, workers, cut, t)
}

func (cfg Config) volume(name string) (volume.Volume, error) {
	kind := cfg.Volume
	if kind == "" {
		kind = volume.Loop
	}
	return volume.Create(volume.Options{Kind: kind, WorkDir: cfg.WorkDir, Name: name, SizeMiB: cfg.FSSizeMiB, FuseDisk: cfg.FuseDisk})
}

// withoutTTL reports, for keys[j] (key index lo+j) present in db 0, whether
// its kind gave it a time to live that the restored key lacks.
func withoutTTL(c *resp.Conn, cfg Config, keys []string, lo int, in0 []bool) ([]bool, error) {
	noTTL := make([]bool, len(keys))
	var asked []int
	c.Send("SELECT", "0")
	for j := range keys {
		if in0[j] && cfg.kindOf(lo+j).ttl {
			c.Send("PTTL", keys[j])
			asked = append(asked, j)
		}
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	if _, err := c.Receive(); err != nil {
		return nil, err
	}
	for _, j := range asked {
		v, err := c.Receive()
		if err != nil {
			return nil, err
		}
		// -1: no expiry; -2: gone (it was read a moment ago).
		if ms, ok := v.(int64); !ok || ms < 0 {
			noTTL[j] = true
		}
	}
	return noTTL, nil
}

func verify(cfg Config, srv *server.Server, workers []*worker, cut time.Duration, t *Trial) error {
	c, err := srv.Dial()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	const batch = 1000
	oldestLost, newestSurvivor := time.Duration(-1), time.Duration(-1)
	t.Kinds = map[string]KindCounts{}
	for w, st := range workers {
		total := len(st.acks)
		if st.inFlight {
			total++
		}
		for lo := 0; lo < total; lo += batch {
			hi := min(lo+batch, total)
			keys := make([]string, 0, hi-lo)
			for i := lo; i < hi; i++ {
				keys = append(keys, key(w, i))
			}
			var vals [2][]string
			var in [2][]bool
			for db := range vals {
				if _, err := c.Do("SELECT", strconv.Itoa(db)); err != nil {
					return err
				}
				if vals[db], in[db], err = c.MGet(keys); err != nil {
					return err
				}
			}
			noTTL, err := withoutTTL(c, cfg, keys, lo, in[0])
			if err != nil {
				return err
			}
			for j, i := 0, lo; i < hi; i, j = i+1, j+1 {
				k, want := cfg.kindOf(i), value(w, i, cfg.ValueSize)
				if (in[0][j] && vals[0][j] != want) || (in[1][j] && vals[1][j] != want) || noTTL[j] {
					t.Corrupt++
					continue
				}
				present, torn := k.restored(in[0][j], in[1][j])
				if torn {
					t.Corrupt++
					continue
				}
				kc := t.Kinds[k.name]
				acked := i < len(st.acks)
				if acked {
					kc.Acked++
				}
				if st.observed[i] {
					t.Observed++
					kc.Observed++
					if !present {
						t.ObservedLost++
					}
				}
				if st.notified[i] {
					t.Notified++
					kc.Notified++
					if !present {
						t.NotifiedLost++
					}
				}
				switch {
				case !acked && present: // the unacknowledged in-flight write
					t.InFlightFound++
				case acked && present:
					t.Survived++
					newestSurvivor = max(newestSurvivor, st.acks[i])
				case acked:
					t.Lost++
					kc.Lost++
					if oldestLost < 0 || st.acks[i] < oldestLost {
						oldestLost = st.acks[i]
					}
				}
				if !present && (acked || st.observed[i] || st.notified[i]) && len(t.LostWrites) < maxLostWrites {
					lw := LostWrite{Key: key(w, i), Kind: k.name, DBs: k.dbs(), Observed: st.observed[i], Notified: st.notified[i]}
					if acked {
						ms := float64(cut-st.acks[i]) / float64(time.Millisecond)
						lw.AckBeforeCutMs = &ms
					}
					t.LostWrites = append(t.LostWrites, lw)
				}
				t.Kinds[k.name] = kc
			}
		}
	}
	if oldestLost >= 0 {
		t.LossWindowMs = float64(cut-oldestLost) / float64(time.Millisecond)
	}
	if newestSurvivor >= 0 {
		t.LastSurvivorMs = float64(cut-newestSurvivor) / float64(time.Millisecond)
	}
	if t.Corrupt > 0 {
		return errors.New("keys hold values that were never written, or only part of a write")
	}
	return nil
}

// rewriteDuringLoad fires BGREWRITEAOF every 100..500 ms until the server
// goes away, counting the rewrites it started.
func rewriteDuringLoad(cfg Config, srv *server.Server, wg *sync.WaitGroup, started *int) {
	c, err := srv.Dial()
	if err != nil {
		return
	}
	rnd := rand.New(rand.NewSource(cfg.Rand.Int63()))
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { _ = c.Close() }()
		for {
			time.Sleep(100*time.Millisecond + time.Duration(rnd.Int63n(int64(400*time.Millisecond))))
			v, err := c.Do("BGREWRITEAOF")
			if err != nil && !resp.IsServerError(err) {
				return // the server is gone
			}
			if s, _ := v.(string); strings.Contains(s, "started") || strings.Contains(s, "scheduled") {
				*started++
			}
		}
	}()
}

// observe starts cfg.Observers readers that GET the key each writer is
// sending at that moment, from the db its kind puts it in; it returns where
// the (worker, index) pairs they saw will be, complete once wg is done.
func observe(cfg Config, srv *server.Server, workers []*worker, wg *sync.WaitGroup) *[][2]int {
	var mu sync.Mutex
	seen := &[][2]int{}
	for r := 0; r < cfg.Observers; r++ {
		c0, c1, err := dialDBs(srv)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			defer func() { _ = c0.Close() }()
			defer func() { _ = c1.Close() }()
			rnd := rand.New(rand.NewSource(seed))
			for {
				w := rnd.Intn(len(workers))
				i := int(workers[w].sending.Load())
				c := c0
				if cfg.kindOf(i).observedDB() == 1 {
					c = c1
				}
				v, ok, err := c.String("GET", key(w, i))
				if err != nil {
					return // the server is gone
				}
				if ok && v == value(w, i, cfg.ValueSize) {
					mu.Lock()
					*seen = append(*seen, [2]int{w, i})
					mu.Unlock()
				}
			}
		}(cfg.Rand.Int63())
	}
	return seen
}

// dialDBs opens one connection on db 0 and one on db 1.
func dialDBs(srv *server.Server) (c0, c1 *resp.Conn, err error) {
	if c0, err = srv.Dial(); err != nil {
		return nil, nil, err
	}
	if c1, err = srv.Dial(); err == nil {
		_, err = c1.Do("SELECT", "1")
	}
	if err != nil {
		_ = c0.Close()
		if c1 != nil {
			_ = c1.Close()
		}
		return nil, nil, err
	}
	return c0, c1, nil
}

// Summary aggregates trials of one mode.
type Summary struct {
	Mode         string `json:"mode"`
	Durable      bool   `json:"durable"`
	Trials       int    `json:"trials"`
	Errors       int    `json:"errors"`
	Acked        int    `json:"acked"`
	Lost         int    `json:"lost"`
	Observed     int    `json:"observed"`
	ObservedLost int    `json:"observed_lost"`
	Notified     int    `json:"notified"`
	NotifiedLost int    `json:"notified_lost"`
	// Kinds sums the trials' per-kind counts.
	Kinds           map[string]KindCounts `json:"kinds"`
	TrialsRewriting int                   `json:"trials_with_rewrites"`
	TrialsWithLoss  int                   `json:"trials_with_loss"`
	MaxLost         int                   `json:"max_lost_in_a_trial"`
	MaxLossWindowMs float64               `json:"max_loss_window_ms"`
	// LossWindowP50Ms and LossWindowP99Ms are percentiles over all trials
	// (nearest rank; a trial that lost nothing counts as 0 ms): the loss
	// window a user should expect from one crash, and the bad case.
	LossWindowP50Ms float64 `json:"loss_window_p50_ms"`
	LossWindowP99Ms float64 `json:"loss_window_p99_ms"`
	MeanAckedPerSec float64 `json:"mean_acked_per_second"`
	DirectWrites    int64   `json:"direct_writes"`
	// DirectDeclined lists the distinct declined reasons the trials ended with.
	DirectDeclined []string `json:"direct_declined_reasons,omitempty"`
	Trial          []Trial  `json:"trial"`
}

// Summarize folds trials into a Summary.
func Summarize(mode server.Mode, trials []Trial) Summary {
	s := Summary{Mode: mode.Name, Durable: mode.Durable(), Trials: len(trials), Trial: trials, Kinds: map[string]KindCounts{}}
	windows := make([]time.Duration, 0, len(trials))
	for _, t := range trials {
		windows = append(windows, time.Duration(t.LossWindowMs*float64(time.Millisecond)))
		if t.Error != "" {
			s.Errors++
		}
		s.Acked += t.Acked
		s.Lost += t.Lost
		s.Observed += t.Observed
		s.ObservedLost += t.ObservedLost
		s.Notified += t.Notified
		s.NotifiedLost += t.NotifiedLost
		for name, kc := range t.Kinds {
			sum := s.Kinds[name]
			sum.add(kc)
			s.Kinds[name] = sum
		}
		if t.Rewrites > 0 {
			s.TrialsRewriting++
		}
		s.DirectWrites += t.DirectWrites
		if t.DirectDeclined != "" && !slices.Contains(s.DirectDeclined, t.DirectDeclined) {
			s.DirectDeclined = append(s.DirectDeclined, t.DirectDeclined)
		}
		if t.Lost > 0 {
			s.TrialsWithLoss++
		}
		s.MaxLost = max(s.MaxLost, t.Lost)
		s.MaxLossWindowMs = max(s.MaxLossWindowMs, t.LossWindowMs)
		s.MeanAckedPerSec += t.AckedPerSec / float64(len(trials))
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	s.LossWindowP50Ms = ms(stats.Percentile(windows, 50))
	s.LossWindowP99Ms = ms(stats.Percentile(windows, 99))
	return s
}
