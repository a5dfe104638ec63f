package powercut

import (
	"strings"
	"testing"
	"time"
)

func TestSubscriberAssign(t *testing.T) {
	cut := time.Now()
	after := cut.Add(time.Second)
	newWorkers := func() []*worker {
		// Writer 0: keys 0, 1 acknowledged, key 2 in flight; writer 1: key 0
		// acknowledged, nothing in flight.
		return []*worker{
			{acks: make([]time.Duration, 2), inFlight: true, notified: map[int]bool{}},
			{acks: make([]time.Duration, 1), notified: map[int]bool{}},
		}
	}
	tests := []struct {
		desc    string
		sub     subscriber
		wantErr string
		want    [][2]int
	}{
		{desc: "acknowledged and in-flight keys", sub: subscriber{seen: map[[2]int]bool{{0, 1}: true, {0, 2}: true, {1, 0}: true}, ended: after},
			want: [][2]int{{0, 1}, {0, 2}, {1, 0}}},
		{desc: "disconnected before the cut", sub: subscriber{seen: map[[2]int]bool{}, ended: cut.Add(-time.Millisecond)},
			wantErr: "disconnected before the cut"},
		{desc: "not a notification", sub: subscriber{seen: map[[2]int]bool{}, bad: []string{"[message x y]"}, ended: after},
			wantErr: "unexpected messages"},
		{desc: "key past the in-flight one", sub: subscriber{seen: map[[2]int]bool{{0, 3}: true}, ended: after},
			wantErr: "pc:0:3"},
		{desc: "next key of a writer with nothing in flight", sub: subscriber{seen: map[[2]int]bool{{1, 1}: true}, ended: after},
			wantErr: "pc:1:1"},
		{desc: "unknown writer", sub: subscriber{seen: map[[2]int]bool{{2, 0}: true}, ended: after},
			wantErr: "pc:2:0"},
	}
	for _, tt := range tests {
		workers := newWorkers()
		err := tt.sub.assign(workers, cut)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want %q", tt.desc, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.desc, err)
			continue
		}
		n := 0
		for _, w := range workers {
			n += len(w.notified)
		}
		if n != len(tt.want) {
			t.Errorf("%s: %d keys marked, want %d", tt.desc, n, len(tt.want))
		}
		for _, wi := range tt.want {
			if !workers[wi[0]].notified[wi[1]] {
				t.Errorf("%s: %s not marked notified", tt.desc, key(wi[0], wi[1]))
			}
		}
	}
}
