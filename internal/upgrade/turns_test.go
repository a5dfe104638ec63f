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

// Turn counts the upgrades in flight that nobody released, stalled ones
// too, and the Ready instances waiting ahead in namespace/name order.
func TestTurn(t *testing.T) {
	self := key("apps", "m")
	for _, c := range []struct {
		desc           string
		fleet          []Instance
		max            int
		want           bool
		rolling, ahead int
		stalled        []types.NamespacedName
	}{
		{"alone", []Instance{{Key: self}}, 1, true, 0, 0, nil},
		{"one rolling", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(time.Minute)}}, 1, false, 1, 0, nil},
		{"one rolling of two", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(time.Minute)}}, 2, true, 1, 0, nil},
		{"one stalled", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(ProgressDeadline)}}, 1, false, 1, 0, []types.NamespacedName{key("apps", "z")}},
		{"one stalled a day", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(24 * time.Hour)}}, 1, false, 1, 0, []types.NamespacedName{key("apps", "z")}},
		{"one stalled and released", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(ProgressDeadline), Released: true}}, 1, true, 0, 0, nil},
		{"one rolling released before its deadline", []Instance{{Key: self}, {Key: key("apps", "z"), Started: started(time.Minute), Released: true}}, 1, true, 0, 0, nil},
		{"one waiting ahead", []Instance{{Key: self}, {Key: key("apps", "a"), Waiting: true}}, 1, false, 0, 1, nil},
		{"one waiting ahead in another namespace", []Instance{{Key: self}, {Key: key("api", "z"), Waiting: true}}, 1, false, 0, 1, nil},
		{"one waiting behind", []Instance{{Key: self}, {Key: key("apps", "z"), Waiting: true}}, 1, true, 0, 0, nil},
		{"one waiting ahead, two turns", []Instance{{Key: self}, {Key: key("apps", "a"), Waiting: true}}, 2, true, 0, 1, nil},
		{"its own upgrade", []Instance{{Key: self, Started: started(time.Minute), Waiting: true}}, 1, true, 0, 0, nil},
		{"two rolling, two stalled, one released, two waiting ahead, one behind", []Instance{{Key: self},
			{Key: key("apps", "z"), Started: started(time.Minute)},
			{Key: key("apps", "y"), Started: started(time.Hour)},
			{Key: key("apps", "c"), Started: started(time.Hour)},
			{Key: key("apps", "d"), Started: started(time.Hour), Released: true},
			{Key: key("apps", "a"), Waiting: true}, {Key: key("apps", "b"), Waiting: true}, {Key: key("apps", "x"), Waiting: true}}, 6, true, 3, 2,
			[]types.NamespacedName{key("apps", "c"), key("apps", "y")}},
	} {
		fleet := Fleet{Instances: c.fleet, MaxConcurrent: c.max, Clock: clocktesting.NewFakePassiveClock(now)}
		if turn := fleet.Turn(self, false); turn.Start {
			t.Errorf("%s: an upgrade not announced yet took a turn", c.desc)
		}
		turn := fleet.Turn(self, true)
		if turn.Start != c.want || turn.Rolling != c.rolling || turn.Ahead != c.ahead || !slices.Equal(turn.Stalled, c.stalled) {
			t.Errorf("%s: %+v, want start %v, %d rolling, %d ahead, stalled %v", c.desc, turn, c.want, c.rolling, c.ahead, c.stalled)
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

// An upgrade holds its turn from when it started until its pod is Ready
// (Started is then zero) or someone releases it, past ProgressDeadline too;
// it is stalled from ProgressDeadline on.
func TestHoldsTurnAndStalled(t *testing.T) {
	for _, c := range []struct {
		desc          string
		in            Instance
		holds, stalls bool
	}{
		{"none started", Instance{}, false, false},
		{"just started", Instance{Started: started(0)}, true, false},
		{"a second before the deadline", Instance{Started: started(ProgressDeadline - time.Second)}, true, false},
		{"at the deadline", Instance{Started: started(ProgressDeadline)}, true, true},
		{"long stalled", Instance{Started: started(time.Hour)}, true, true},
		{"long stalled, released", Instance{Started: started(time.Hour), Released: true}, false, true},
	} {
		if got := c.in.HoldsTurn(); got != c.holds {
			t.Errorf("%s: holds its turn %v, want %v", c.desc, got, c.holds)
		}
		if got := Stalled(c.in.Started, now); got != c.stalls {
			t.Errorf("%s: stalled %v, want %v", c.desc, got, c.stalls)
		}
	}
}
