package powercut

import (
	"testing"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
)

// The loss-window percentiles count a trial that lost nothing as 0 ms, so a
// mode that loses in few trials has a small median and a p99 near its worst.
func TestSummarizeLossWindowPercentiles(t *testing.T) {
	var trials []Trial
	for i := 0; i < 97; i++ {
		trials = append(trials, Trial{Acked: 100})
	}
	trials = append(trials,
		Trial{Acked: 100, Lost: 3, LossWindowMs: 4.5},
		Trial{Acked: 100, Lost: 9, LossWindowMs: 12},
		Trial{Acked: 100, Lost: 20, LossWindowMs: 58})
	s := Summarize(server.UringFast, trials)
	if s.LossWindowP50Ms != 0 {
		t.Errorf("p50 = %v ms, want 0 (97 of 100 trials lost nothing)", s.LossWindowP50Ms)
	}
	if s.LossWindowP99Ms != 12 {
		t.Errorf("p99 = %v ms, want 12 (the 99th of 100 by nearest rank)", s.LossWindowP99Ms)
	}
	if s.MaxLossWindowMs != 58 || s.TrialsWithLoss != 3 || s.Lost != 32 {
		t.Errorf("max %v ms, %d trials with loss, %d lost; want 58, 3, 32", s.MaxLossWindowMs, s.TrialsWithLoss, s.Lost)
	}
}
