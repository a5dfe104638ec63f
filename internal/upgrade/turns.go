// Package upgrade decides the turns of the upgrades that come from the
// operator rather than from an instance's spec: which waiting instance may
// roll its pod next, and which upgrade in flight the others wait for.
//
// It holds no turns of its own. The controller reads them from the API into
// a Fleet before every decision (an upgrade in flight is a StatefulSet marked
// with the time it started, a waiting instance says so in its status; see
// controllers/redispersistence_upgrade.go), so an operator restart loses none,
// and serializes the decisions so that each reads the marks of the one before.
package upgrade

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// ProgressDeadline is how long an upgrade may take before it is reported
// stalled: twice what the startup probe gives a server to load its data,
// with room for pulling the image. A stalled upgrade keeps its turn: one
// whose pod never becomes Ready is most often a bad image or a template the
// operator got wrong, and the next instance would fail the same way. The
// fleet waits until the pod is Ready on the new template or a person
// releases the turn (Instance.Released), having looked at why.
const ProgressDeadline = 10 * time.Minute

// Instance is what a turn decision knows of one instance.
type Instance struct {
	Key types.NamespacedName
	// Started is when its upgrade in flight started; zero while it rolls none.
	Started time.Time
	// Released is true when a person let the other upgrades go on without
	// the one in flight: it then holds no turn, stalled or not.
	Released bool
	// Waiting is true while it is Ready and its upgrade waits for a turn.
	Waiting bool
}

// Fleet is every instance one operator upgrades, as one decision reads them,
// and the rules their turns follow.
type Fleet struct {
	Instances []Instance
	// MaxConcurrent is how many upgrades may be in flight at once (at least 1).
	MaxConcurrent int
	Clock         clock.PassiveClock
}

// Turn is the decision for one instance.
type Turn struct {
	// Start is true when the instance may roll now; At is then the time its
	// turn starts.
	Start bool
	At    time.Time
	// Rolling is how many other instances hold a turn, Ahead how many Ready
	// ones wait before it in namespace/name order.
	Rolling, Ahead int
	// Stalled are the instances among Rolling whose upgrade passed
	// ProgressDeadline, in namespace/name order: what the fleet waits for
	// until someone acts.
	Stalled []types.NamespacedName
}

// Turn decides whether self, a Ready instance whose upgrade comes, may roll
// now: only once it announced that it waits (so that the first turns, too,
// go in namespace/name order once every instance has announced its own),
// while fewer than MaxConcurrent other upgrades hold a turn and no Ready
// instance waits ahead of it.
func (f Fleet) Turn(self types.NamespacedName, announced bool) Turn {
	now := f.Clock.Now()
	turn := Turn{At: now}
	for _, in := range f.Instances {
		switch {
		case in.Key == self:
		case in.HoldsTurn():
			turn.Rolling++
			if Stalled(in.Started, now) {
				turn.Stalled = append(turn.Stalled, in.Key)
			}
		case in.Waiting && compareKeys(in.Key, self) < 0:
			turn.Ahead++
		}
	}
	turn.Start = announced && turn.Rolling+turn.Ahead < f.MaxConcurrent
	slices.SortFunc(turn.Stalled, compareKeys)
	return turn
}

// Next are the waiting instances a turn that ended makes way for: the first
// in namespace/name order, as many as may roll at once, not every instance
// that waits. The instance whose turn ended is not one of them, even if its
// status, not yet written, still says it waits.
func (f Fleet) Next(ended types.NamespacedName) []types.NamespacedName {
	var waiting []types.NamespacedName
	for _, in := range f.Instances {
		if in.Waiting && in.Key != ended {
			waiting = append(waiting, in.Key)
		}
	}
	slices.SortFunc(waiting, compareKeys)
	return waiting[:min(len(waiting), f.MaxConcurrent)]
}

// HoldsTurn is true while the instance rolls an upgrade nobody released:
// until its pod is Ready on the new template, however long that takes.
func (in Instance) HoldsTurn() bool {
	return !in.Started.IsZero() && !in.Released
}

// Stalled is true for an upgrade that started at started (zero: none did)
// and is still in flight at now, ProgressDeadline or more later.
func Stalled(started, now time.Time) bool {
	return !started.IsZero() && now.Sub(started) >= ProgressDeadline
}

func compareKeys(a, b types.NamespacedName) int {
	return strings.Compare(a.String(), b.String())
}
