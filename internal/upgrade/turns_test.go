package upgrade

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func started(ago time.Duration) time.Time { return now.Add(-ago) }

// Turn counts the upgrades in flight, for a bounded time, and the Ready
// instances waiting ahead in namespace/name order.
func TestTurn(t *testing.T) {
	self := key("apps", "m")
	for _, c := range []struct {
		desc           string
		fleet          []Instance
		max            int
		want           bool
		rolling, ahead int
	}{
		{"alone", []Instance{{Key: self}}, 1, true, 0, 0},
		{"one rolling", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(time.Minute)}}, 1, false, 1, 0},
		{"one rolling of two", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(time.Minute)}}, 2, true, 1, 0},
		{"one stalled", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(ProgressDeadline)}}, 1, true, 0, 0},
		{"one waiting ahead", []Instance{{Key: self}, {Key: key("apps", "a"), Waiting: true}}, 1, false, 0, 1},
		{"one waiting ahead in another namespace", []Instance{{Key: self}, {Key: key("api", "z"), Waiting: true}}, 1, false, 0, 1},
		{"one waiting behind", []Instance{{Key: self}, {Key: key("apps", "z"), Waiting: true}}, 1, true, 0, 0},
		{"one waiting ahead, two turns", []Instance{{Key: self}, {Key: key("apps", "a"), Waiting: true}}, 2, true, 0, 1},
		{"its own upgrade", []Instance{{Key: self, Started: started(time.Minute), Waiting: true}}, 1, true, 0, 0},
		{"one rolling, one stalled, two waiting ahead, one behind", []Instance{{Key: self},
			{Key: key("apps", "z"), Started: started(time.Minute)},
			{Key: key("apps", "y"), Started: started(time.Hour)},
			{Key: key("apps", "a"), Waiting: true}, {Key: key("apps", "b"), Waiting: true}, {Key: key("apps", "x"), Waiting: true}}, 4, true, 1, 2},
	} {
		fleet := Fleet{Instances: c.fleet, MaxConcurrent: c.max, Clock: clocktesting.NewFakePassiveClock(now)}
		if turn := fleet.Turn(self, false); turn.Start {
			t.Errorf("%s: an upgrade not announced yet took a turn", c.desc)
		}
		turn := fleet.Turn(self, true)
		if turn.Start != c.want || turn.Rolling != c.rolling || turn.Ahead != c.ahead {
			t.Errorf("%s: %+v, want start %v, %d rolling, %d ahead", c.desc, turn, c.want, c.rolling, c.ahead)
		}
		if !turn.At.Equal(now) {
			t.Errorf("%s: the turn starts at %v, not now", c.desc, turn.At)
		}
	}
}

// Next wakes the first waiting instances in namespace/name order, as many as
// may roll, never the one whose turn ended.
func TestNext(t *testing.T) {
	fleet := []Instance{
		{Key: key("b", "x"), Waiting: true},
		{Key: key("a", "y"), Waiting: true},
		{Key: key("a", "z")},
		{Key: key("a", "x"), Waiting: true},
	}
	for _, c := range []struct {
		desc  string
		ended types.NamespacedName
		max   int
		want  []types.NamespacedName
	}{
		{"one turn", key("c", "c"), 1, []types.NamespacedName{key("a", "x")}},
		{"two turns", key("c", "c"), 2, []types.NamespacedName{key("a", "x"), key("a", "y")}},
		{"more turns than waiting", key("c", "c"), 5, []types.NamespacedName{key("a", "x"), key("a", "y"), key("b", "x")}},
		{"the ended one's status still says it waits", key("a", "x"), 1, []types.NamespacedName{key("a", "y")}},
	} {
		got := Fleet{Instances: fleet, MaxConcurrent: c.max}.Next(c.ended)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.desc, got, c.want)
		}
	}
	if got := (Fleet{Instances: []Instance{{Key: key("a", "x")}}, MaxConcurrent: 1}).Next(key("b", "b")); len(got) != 0 {
		t.Errorf("nobody waits: %v woken", got)
	}
}

// An upgrade holds its turn from when it started, for ProgressDeadline.
func TestHoldsTurn(t *testing.T) {
	for _, c := range []struct {
		desc    string
		started time.Time
		want    bool
	}{
		{"none started", time.Time{}, false},
		{"just started", started(0), true},
		{"a second before the deadline", started(ProgressDeadline - time.Second), true},
		{"at the deadline", started(ProgressDeadline), false},
		{"long stalled", started(time.Hour), false},
	} {
		if got := HoldsTurn(c.started, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.desc, got, c.want)
		}
	}
}
