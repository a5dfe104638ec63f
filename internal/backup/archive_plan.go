package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Archive is every timeline an instance's archive holds.
type Archive struct {
	// Timelines are in the order they began.
	Timelines []Timeline
}

// ReadArchive reads the timeline.json of every timeline under archive/ in
// the store's prefix, each verified against the digest its upload
// recorded.
func ReadArchive(ctx context.Context, store *Store) (Archive, error) {
	ids, err := store.Children(ctx, archiveDir+"/")
	if err != nil {
		return Archive{}, err
	}
	var a Archive
	for _, id := range ids {
		id, ok := strings.CutSuffix(id, "/")
		if !ok {
			continue
		}
		key := timelineKey(id)
		b, err := store.GetBytes(ctx, key)
		if notFound(err) {
			continue // its first pass has not finished
		}
		if err != nil {
			return Archive{}, err
		}
		t, err := decodeTimeline(b)
		if err != nil {
			return Archive{}, fmt.Errorf("%s: %w", store.URL(key), err)
		}
		if t.ID != id {
			return Archive{}, fmt.Errorf("%s names timeline %q", store.URL(key), t.ID)
		}
		a.Timelines = append(a.Timelines, t)
	}
	slices.SortFunc(a.Timelines, func(x, y Timeline) int { return strings.Compare(x.ID, y.ID) })
	return a, nil
}

// chain is a base and the INCR files that follow it in its timeline, as
// far as they are archived without a hole; covered is the last second
// whose writes it holds all of.
type chain struct {
	timeline string
	base     ArchivedBase
	incrs    []ArchivedIncr
	covered  time.Time
}

// chains are the archive's usable chains. A base is followed by its first
// INCR file and every later one: the INCR files are one log, which a
// rewrite splits, so an older base with all the INCR files since restores
// as well as the newest one (as the server loads a base and the INCR files
// a failed rewrite left). A chain ends at the first INCR file missing or
// whose tail was lost; its coverage ends when its last INCR file's tail was
// read, less the second then under way, since a cut keeps whole seconds.
func (a Archive) chains() []chain {
	var chains []chain
	for _, t := range a.Timelines {
		for _, b := range t.Bases {
			if b.FirstIncr == 0 {
				continue
			}
			c := chain{timeline: t.ID, base: b}
			next := b.FirstIncr
			for _, incr := range t.Incrs {
				if incr.Seq < next {
					continue
				}
				if incr.Seq != next {
					break
				}
				c.incrs = append(c.incrs, incr)
				if !incr.Closed || incr.LostTail {
					break
				}
				next++
			}
			if len(c.incrs) == 0 {
				continue
			}
			readAt := c.incrs[len(c.incrs)-1].ReadAt
			c.covered = readAt.Truncate(time.Second).Add(-time.Second).UTC()
			if readAt.IsZero() || c.covered.Before(b.Time) {
				continue
			}
			chains = append(chains, c)
		}
	}
	return chains
}

// Recoverable is the range of times a restore can reach, whole seconds:
// from the earliest base's point to the last second archived whole.
// There may be holes between (a chain whose INCR file was lost); Plan
// names them.
func (a Archive) Recoverable() (first, last time.Time, ok bool) {
	for _, c := range a.chains() {
		if !ok || c.base.Time.Before(first) {
			first = c.base.Time
		}
		if !ok || c.covered.After(last) {
			last = c.covered
		}
		ok = true
	}
	return first, last, ok
}

// RecoveryPlan is what a restore to a point in time writes: a base, the
// INCR files after it, the last one cut.
type RecoveryPlan struct {
	Timeline string
	Base     ArchivedBase
	// Incrs are in seq order; the restore keeps the last one up to the
	// cut, or whole when Latest.
	Incrs []ArchivedIncr
	// Target is the second restored to: every write of that second and
	// before it is kept, none after. With Latest it is the last second
	// archived whole, but every write archived is kept.
	Target time.Time
	Latest bool
}

// Plan chooses how to restore to target (zero: the latest archived): the
// latest base at or before target among the chains whose coverage reaches
// it, and its INCR files up to the one where the first #TS annotation after
// target's second is (the cut valkey-check-aof --truncate-to-timestamp
// makes), or all of them for the latest. A target outside every chain's
// coverage is an error naming the times that can be reached.
func (a Archive) Plan(target time.Time) (RecoveryPlan, error) {
	chains := a.chains()
	first, last, ok := a.Recoverable()
	if !ok {
		return RecoveryPlan{}, errors.New("the archive holds no base with the INCR files after it: nothing can be restored from it yet (the archiver ships them every interval)")
	}
	latest := target.IsZero()
	if latest {
		target = last
	}
	target = target.Truncate(time.Second).UTC()
	var best *chain
	for i, c := range chains {
		if c.base.Time.After(target) || c.covered.Before(target) {
			continue
		}
		if latest && !c.covered.Equal(last) {
			continue
		}
		if best == nil || !c.base.Time.Before(best.base.Time) {
			best = &chains[i]
		}
	}
	if best == nil {
		return RecoveryPlan{}, fmt.Errorf("no archived point reaches %s: the archive can restore from %s to %s%s",
			target.Format(time.RFC3339), first.Format(time.RFC3339), last.Format(time.RFC3339), holes(chains))
	}
	p := RecoveryPlan{Timeline: best.timeline, Base: best.base, Target: target, Latest: latest}
	for _, incr := range best.incrs {
		p.Incrs = append(p.Incrs, incr)
		if !latest && incr.LastTS > target.Unix() {
			break
		}
	}
	return p, nil
}

// holes names the ranges the chains cover together, when they leave a
// hole between first and last.
func holes(chains []chain) string {
	type span struct{ from, to time.Time }
	var spans []span
	for _, c := range chains {
		spans = append(spans, span{c.base.Time, c.covered})
	}
	slices.SortFunc(spans, func(x, y span) int { return x.from.Compare(y.from) })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && !s.from.After(merged[n-1].to.Add(time.Second)) {
			if s.to.After(merged[n-1].to) {
				merged[n-1].to = s.to
			}
			continue
		}
		merged = append(merged, s)
	}
	if len(merged) < 2 {
		return ""
	}
	var ranges []string
	for _, s := range merged {
		ranges = append(ranges, s.from.Format(time.RFC3339)+".."+s.to.Format(time.RFC3339))
	}
	return " (in the ranges " + strings.Join(ranges, ", ") + ")"
}
