package backup

import (
	"context"
	"fmt"
	"path"
	"slices"
	"time"
)

// defaultPruneEvery is how often an Archiver looks for what the archive
// no longer needs: a listing of the backups and a read of each one's
// metadata, then of the timelines.
const defaultPruneEvery = 10 * time.Minute

// Horizon is the oldest point the archive still has to restore to: the
// point of the oldest backup the store holds (every backup.json under
// backups/, scheduled or not). Before it, the backups are what an instance
// is recovered from; retention deletes the scheduled backups it lets go,
// and so moves the horizon. ok is false when the store holds no backup:
// then the archive is the only copy, and only Archiver.MaxAge lets
// anything in it go.
func Horizon(ctx context.Context, store *Store) (horizon time.Time, ok bool, err error) {
	backups, err := Backups(ctx, store)
	if err != nil {
		return time.Time{}, false, err
	}
	for _, m := range backups {
		if !ok || m.Point.Before(horizon) {
			horizon, ok = m.Point, true
		}
	}
	return horizon, ok, nil
}

// Prunable is what timeline t can let go of and still restore every second
// from horizon on as before: the bases older than its newest base at or
// before horizon, and the INCR files before that base's first. That base's
// chain holds every INCR file a chain of an older base would reach past
// horizon, so it covers whatever they did from there.
func (t Timeline) Prunable(horizon time.Time) (bases []ArchivedBase, incrs []ArchivedIncr) {
	var keep *ArchivedBase
	for i, b := range t.Bases {
		if b.FirstIncr != 0 && !b.Time.After(horizon) && (keep == nil || b.Seq > keep.Seq) {
			keep = &t.Bases[i]
		}
	}
	if keep == nil {
		return nil, nil
	}
	for _, b := range t.Bases {
		if b.Seq < keep.Seq {
			bases = append(bases, b)
		}
	}
	for _, incr := range t.Incrs {
		if incr.Seq < keep.FirstIncr {
			incrs = append(incrs, incr)
		}
	}
	return bases, incrs
}

// horizon is the oldest point the archive keeps a recovery to, and why:
// the oldest backup's point (Horizon), or now - MaxAge when that is later
// or the store holds no backup. ok is false when neither bounds it.
func (a *Archiver) horizon(ctx context.Context) (horizon time.Time, why string, ok bool, err error) {
	horizon, ok, err = Horizon(ctx, a.store)
	if err != nil {
		return time.Time{}, "", false, err
	}
	why = "the oldest backup's point is " + horizon.Format(time.RFC3339)
	if a.MaxAge > 0 {
		if bound := a.now().Add(-a.MaxAge).UTC(); !ok || bound.After(horizon) {
			horizon, ok = bound, true
			why = fmt.Sprintf("the archive keeps %s, back to %s", a.MaxAge, bound.Format(time.RFC3339))
		}
	}
	return horizon, why, ok, nil
}

// prune lets go of what no recovery to the horizon or after needs: the
// other timelines archived whole before it (volumes that are gone, or
// that a failover made replicas), and the head of this one (Prunable).
// It deletes the objects before the record that lists them, so that a
// prune cut short leaves a record of objects some of which are gone, which
// the next prune deletes again, and never objects no record lists, which
// an archiver would adopt again (recoverTimeline). A restore reads only a
// chain that reaches its target, and no pruned chain reaches the horizon.
func (a *Archiver) prune(ctx context.Context) error {
	horizon, why, ok, err := a.horizon(ctx)
	if err != nil || !ok {
		return err
	}
	archive, err := ReadArchive(ctx, a.store)
	if err != nil {
		return err
	}
	for _, t := range archive.Timelines {
		if t.ID == a.timeline.ID || !t.LastArchivedTime.Before(horizon) {
			continue
		}
		objects, err := a.store.List(ctx, path.Join(archiveDir, t.ID)+"/")
		if err != nil {
			return err
		}
		var keys []string
		for _, o := range objects {
			if o.Key != timelineKey(t.ID) {
				keys = append(keys, o.Key)
			}
		}
		if err := a.store.Delete(ctx, keys...); err != nil {
			return err
		}
		if err := a.store.Delete(ctx, timelineKey(t.ID)); err != nil {
			return err
		}
		a.logf("pruned timeline %s: it was archived up to %s, and %s", t.ID, t.LastArchivedTime.Format(time.RFC3339), why)
	}

	bases, incrs := a.timeline.Prunable(horizon)
	if len(bases) == 0 && len(incrs) == 0 {
		return nil
	}
	var keys []string
	for _, b := range bases {
		keys = append(keys, baseKey(a.timeline.ID, b.Seq, b.File))
	}
	for _, incr := range incrs {
		segments, err := a.store.List(ctx, incrDir(a.timeline.ID, incr.Seq)+"/")
		if err != nil {
			return err
		}
		for _, s := range segments {
			keys = append(keys, s.Key)
		}
	}
	if err := a.store.Delete(ctx, keys...); err != nil {
		return err
	}
	a.timeline.Bases = slices.DeleteFunc(a.timeline.Bases, func(b ArchivedBase) bool {
		return slices.ContainsFunc(bases, func(p ArchivedBase) bool { return p.Seq == b.Seq })
	})
	a.timeline.Incrs = slices.DeleteFunc(a.timeline.Incrs, func(i ArchivedIncr) bool {
		return slices.ContainsFunc(incrs, func(p ArchivedIncr) bool { return p.Seq == i.Seq })
	})
	a.logf("pruned %d bases and %d INCR files of timeline %s: %s", len(bases), len(incrs), a.timeline.ID, why)
	return a.putTimeline(ctx)
}
