package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SteadyWrite measures write availability, as an application sees it,
// while someone operates on the instance (a scale, a rolling change, an
// upgrade): writers SET distinct keys at a steady pace through r.Addr (the
// instance's Service, or its cluster through a cluster client), and every
// stretch with no acknowledged write longer than an outage threshold is
// reported as an Outage, with the writes that failed in it. At the end
// every acknowledged key is read back: a write acknowledged and then lost
// (a failover to a replica that lacked it) counts in SteadyResult.Lost.
//
// A failed write is not retried under its key: the next write takes the
// next key, so that each key is either acknowledged once or never.

// SteadyOptions pace the writers.
type SteadyOptions struct {
	// Rate is the writes per second of all writers together.
	Rate int
	// Writers is how many connections write, each at Rate/Writers.
	Writers int
	// Outage is the shortest stretch without an acknowledged write that
	// is reported (default 100 ms).
	Outage time.Duration
	// ReadBackWait bounds the wait for the instance to serve before the
	// acknowledged keys are read back (default 2 minutes).
	ReadBackWait time.Duration
}

// Outage is a stretch with no acknowledged write: from the last write
// acknowledged before it to the first after it.
type Outage struct {
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Failed int64     `json:"failed"`
	// Error is the first error a write got in it, if any failed.
	Error string `json:"error,omitempty"`
}

// Duration is how long no write was acknowledged.
func (o Outage) Duration() time.Duration { return o.End.Sub(o.Start) }

// SteadyResult is what the writers saw from start to stop.
type SteadyResult struct {
	Start        time.Time `json:"start"`
	End          time.Time `json:"end"`
	Acknowledged int64     `json:"acknowledged"`
	Failed       int64     `json:"failed"`
	// Lost is how many acknowledged keys the instance did not hold when
	// read back.
	Lost    int64    `json:"lost"`
	Outages []Outage `json:"outages"`
	// FailedBySecond counts every failed write by the second it failed
	// in, in time order: on a cluster one shard that refuses writes while
	// the others take them fails writes without any outage.
	FailedBySecond []FailedSecond `json:"failedBySecond,omitempty"`
}

// FailedSecond is how many writes failed in the second that starts at Second.
type FailedSecond struct {
	Second time.Time `json:"second"`
	Failed int64     `json:"failed"`
}

// steadyKey is writer w's seq-th key of the run: under valkey-benchmark's
// key:*, which the benchmark user may write and DeleteKeys removes.
func steadyKey(run string, w, seq int) string { return fmt.Sprintf("key:steady:%s:%d:%d", run, w, seq) }

// SteadyWrite writes until ctx ends, calls outage (from any writer's
// goroutine, one at a time) for each outage as it ends, then reads back the
// acknowledged keys.
func (r Runner) SteadyWrite(ctx context.Context, o SteadyOptions, outage func(Outage)) (SteadyResult, error) {
	if o.Rate <= 0 || o.Writers <= 0 || o.Writers > o.Rate {
		return SteadyResult{}, fmt.Errorf("steady writes need a rate (%d) of at least one write per second per writer (%d)", o.Rate, o.Writers)
	}
	if o.Outage <= 0 {
		o.Outage = 100 * time.Millisecond
	}
	if o.ReadBackWait <= 0 {
		o.ReadBackWait = 2 * time.Minute
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	t := &availability{threshold: o.Outage, report: outage}
	res := SteadyResult{Start: time.Now()}
	t.lastAck = res.Start
	acked := make([][]int, o.Writers)
	interval := time.Second * time.Duration(o.Writers) / time.Duration(o.Rate)
	var wg sync.WaitGroup
	for w := range o.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := r.steadyClient()
			defer func() { _ = conn.Close() }()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for seq := 0; ; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				err := conn.Set(ctx, steadyKey(run, w, seq), seq, 0).Err()
				if ctx.Err() != nil {
					// Cut by the stop, not by the instance: neither acknowledged nor failed.
					return
				}
				if err != nil {
					t.failed(time.Now(), err)
					// A new client dials at the next write: go-redis's pool,
					// after failed dials, dials again only once a second.
					_ = conn.Close()
					conn = r.steadyClient()
					continue
				}
				t.acked(time.Now())
				acked[w] = append(acked[w], seq)
			}
		}()
	}
	wg.Wait()
	res.End = time.Now()
	res.Acknowledged, res.Failed, res.Outages, res.FailedBySecond = t.totals(res.End)

	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ReadBackWait)
	defer cancel()
	if err := r.WaitServing(readCtx, o.ReadBackWait); err != nil {
		return res, fmt.Errorf("reading the acknowledged keys back: %w", err)
	}
	lost, err := r.countMissing(readCtx, run, acked)
	res.Lost = lost
	return res, err
}

// steadyClient is one writer's connection: no retries (a retried write
// could be acknowledged twice, or hide a failure) and short timeouts, so
// that an outage shows as failures rather than one write hanging through it.
func (r Runner) steadyClient() redis.UniversalClient {
	if r.Cluster {
		o := r.clusterOptions()
		o.MaxRetries, o.MaxRedirects, o.DialTimeout, o.ReadTimeout, o.WriteTimeout = -1, 3, time.Second, time.Second, time.Second
		o.PoolSize = 1
		return redis.NewClusterClient(o)
	}
	o := r.options()
	o.DB, o.PoolSize, o.MaxRetries, o.DialTimeout, o.ReadTimeout, o.WriteTimeout = r.DB, 1, -1, time.Second, time.Second, time.Second
	return redis.NewClient(o)
}

// countMissing reads acked's keys back in batches and counts those the
// instance does not hold.
func (r Runner) countMissing(ctx context.Context, run string, acked [][]int) (int64, error) {
	conn := r.keyspace()
	defer func() { _ = conn.Close() }()
	var missing int64
	for w, seqs := range acked {
		for start := 0; start < len(seqs); start += 1000 {
			batch := seqs[start:min(start+1000, len(seqs))]
			pipe := conn.Pipeline()
			cmds := make([]*redis.IntCmd, len(batch))
			for i, seq := range batch {
				cmds[i] = pipe.Exists(ctx, steadyKey(run, w, seq))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return missing, fmt.Errorf("reading the acknowledged keys back: %w", err)
			}
			for _, cmd := range cmds {
				if cmd.Val() == 0 {
					missing++
				}
			}
		}
	}
	return missing, nil
}

// availability follows the acknowledgements of all writers: the time of the
// last, and the failures since.
type availability struct {
	threshold time.Duration
	report    func(Outage)

	mu           sync.Mutex
	lastAck      time.Time
	failedSince  int64
	firstError   string
	acknowledged int64
	failedTotal  int64
	outages      []Outage
	bySecond     []FailedSecond
}

func (a *availability) failed(now time.Time, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failedTotal++
	second := now.Truncate(time.Second)
	if n := len(a.bySecond); n > 0 && a.bySecond[n-1].Second.Equal(second) {
		a.bySecond[n-1].Failed++
	} else {
		a.bySecond = append(a.bySecond, FailedSecond{Second: second, Failed: 1})
	}
	a.failedSince++
	if a.firstError == "" {
		a.firstError = err.Error()
	}
}

func (a *availability) acked(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acknowledged++
	if now.Sub(a.lastAck) >= a.threshold {
		a.endOutage(now)
	}
	a.lastAck, a.failedSince, a.firstError = now, 0, ""
}

// endOutage records the stretch from lastAck to now; a.mu held.
func (a *availability) endOutage(now time.Time) {
	o := Outage{Start: a.lastAck, End: now, Failed: a.failedSince, Error: a.firstError}
	a.outages = append(a.outages, o)
	if a.report != nil {
		a.report(o)
	}
}

// totals closes an outage still open at end and returns the counts.
func (a *availability) totals(end time.Time) (acknowledged, failed int64, outages []Outage, bySecond []FailedSecond) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if end.Sub(a.lastAck) >= a.threshold && a.failedSince > 0 {
		a.endOutage(end)
	}
	return a.acknowledged, a.failedTotal, append([]Outage{}, a.outages...), append([]FailedSecond{}, a.bySecond...)
}
