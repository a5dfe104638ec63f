package bench

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestSteadyWriteThroughARestart: writers pace their SETs; a server killed
// and started again half a second later shows as one outage that holds the
// failed writes, and an append-only file synced at every write loses none
// of the acknowledged ones.
func TestSteadyWriteThroughARestart(t *testing.T) {
	s := startRestartable(t, "appendonly yes\nappendfsync always\n")
	r := Runner{Addr: s.addr}
	if err := r.WaitServing(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []Outage
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan SteadyResult)
	errs := make(chan error, 1)
	go func() {
		res, err := r.SteadyWrite(ctx, SteadyOptions{Rate: 400, Writers: 2}, func(o Outage) {
			mu.Lock()
			reported = append(reported, o)
			mu.Unlock()
		})
		errs <- err
		done <- res
	}()
	time.Sleep(time.Second)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	time.Sleep(500 * time.Millisecond)
	s.start()
	time.Sleep(2 * time.Second)
	stop()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	res := <-done
	t.Logf("%d acknowledged, %d failed, %d lost, outages %+v", res.Acknowledged, res.Failed, res.Lost, res.Outages)
	elapsed := res.End.Sub(res.Start).Seconds()
	// The pace is a ceiling: a ticker drops the ticks a slow write misses.
	if limit := int64(400*elapsed) + 2; res.Acknowledged+res.Failed > limit {
		t.Errorf("%d writes in %.1f s at 400/s", res.Acknowledged+res.Failed, elapsed)
	}
	if res.Acknowledged < 200 || res.Failed == 0 || res.Lost != 0 {
		t.Errorf("%d acknowledged, %d failed, %d lost: want writes on both sides of the restart, failures in it, none lost", res.Acknowledged, res.Failed, res.Lost)
	}
	var longest Outage
	for _, o := range res.Outages {
		if o.Duration() > longest.Duration() {
			longest = o
		}
	}
	if longest.Duration() < 500*time.Millisecond || longest.Failed == 0 || longest.Error == "" {
		t.Errorf("longest outage %+v: want the restart's half second at least, with its failed writes and their error", longest)
	}
	// Every failure is counted in the second it happened, those seconds
	// within the run and in order.
	var bySecond int64
	for i, f := range res.FailedBySecond {
		bySecond += f.Failed
		if f.Second.Before(res.Start.Truncate(time.Second)) || f.Second.After(res.End) || i > 0 && !f.Second.After(res.FailedBySecond[i-1].Second) {
			t.Errorf("failures by second %+v: %s is out of the run or of order", res.FailedBySecond, f.Second)
		}
	}
	if bySecond != res.Failed {
		t.Errorf("failures by second add up to %d, want the %d that failed", bySecond, res.Failed)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != len(res.Outages) {
		t.Errorf("%d outages reported as they ended, %d in the result", len(reported), len(res.Outages))
	}
}

// TestSteadyWriteCountsLoss proves the read-back sees loss: a server that
// keeps nothing on disk loses every write acknowledged before its restart.
func TestSteadyWriteCountsLoss(t *testing.T) {
	s := startRestartable(t, "appendonly no\n")
	r := Runner{Addr: s.addr}
	if err := r.WaitServing(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = s.kill9(ctx)
		time.Sleep(2 * time.Second)
		stop()
	}()
	res, err := r.SteadyWrite(ctx, SteadyOptions{Rate: 200, Writers: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Lost == 0 || res.Lost >= res.Acknowledged {
		t.Errorf("%d of %d acknowledged writes lost: want those before the restart, not those after", res.Lost, res.Acknowledged)
	}
}

func TestSteadyWriteRefusesNoRate(t *testing.T) {
	if _, err := (Runner{Addr: "127.0.0.1:1"}).SteadyWrite(context.Background(), SteadyOptions{Rate: 1, Writers: 2}, nil); err == nil {
		t.Error("two writers at one write per second in all: no error")
	}
}
