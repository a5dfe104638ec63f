package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
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
	objects, err := store.List(ctx, archiveDir+"/")
	if err != nil {
		return Archive{}, err
	}
	var a Archive
	for _, o := range objects {
		parts := strings.Split(o.Key, "/")
		if len(parts) != 3 || parts[2] != "timeline.json" {
			continue
		}
		b, err := store.GetBytes(ctx, o.Key)
		if err != nil {
			return Archive{}, err
		}
		t, err := decodeTimeline(b)
		if err != nil {
			return Archive{}, fmt.Errorf("%s: %w", store.URL(o.Key), err)
		}
		if t.ID != parts[1] {
			return Archive{}, fmt.Errorf("%s names timeline %q", store.URL(o.Key), t.ID)
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

// ArchiveRestore puts an archived instance's data as of a point in time
// where a server loads it: an empty data directory, as a multi-part AOF of
// the base and INCR files the Plan chose.
type ArchiveRestore struct {
	// Destination reaches the store; its Bucket and Prefix are ignored:
	// Location names them.
	Destination Destination
	// Location is the archived instance, s3://<bucket>/<prefix>: its
	// timelines are under <prefix>/archive/.
	Location string
	// Target is the point in time; zero restores the latest archived.
	Target time.Time
	// DataDir is the server's dir.
	DataDir string
}

// Run restores the archive unless the marker says this archive and target
// are already restored here (restored is false then), like Restore.Run: it
// refuses a data directory with an AOF or RDB of its own, checks every
// object it downloads against the SHA-256 the timeline recorded (and the
// RDB base's own checksum) and the segments of each INCR file for holes,
// and builds the AOF directory aside: only a complete, synced one is moved
// where the server looks, then the marker is written.
func (r ArchiveRestore) Run(ctx context.Context) (restored bool, err error) {
	marker := filepath.Join(r.DataDir, RestoredMarker)
	target := "latest"
	if !r.Target.IsZero() {
		target = r.Target.UTC().Format(time.RFC3339)
	}
	want := "archive " + r.Location + " at " + target + "\n"
	if b, err := os.ReadFile(marker); err == nil {
		if string(b) == want {
			return false, nil
		}
		return false, fmt.Errorf("%w: it was restored from %s, not from the archive %s at %s", ErrVolumeHoldsData, strings.TrimSpace(string(b)), r.Location, target)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if found := dataFiles(r.DataDir); len(found) > 0 {
		return false, fmt.Errorf("%w (%s): a restore never overwrites it; restore into a new RedisPersistence, or delete this one's volume claim first", ErrVolumeHoldsData, strings.Join(found, ", "))
	}
	bucket, prefix, err := parseArchiveLocation(r.Location)
	if err != nil {
		return false, err
	}
	d := r.Destination
	d.Bucket, d.Prefix = bucket, prefix
	store, err := Open(ctx, d)
	if err != nil {
		return false, err
	}
	archive, err := ReadArchive(ctx, store)
	if err != nil {
		return false, err
	}
	plan, err := archive.Plan(r.Target)
	if err != nil {
		return false, fmt.Errorf("the archive %s: %w", r.Location, err)
	}

	staging := filepath.Join(r.DataDir, ".restore-"+appendDir+".partial")
	if err := os.RemoveAll(staging); err != nil {
		return false, err
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return false, err
	}
	if err := writePlan(ctx, store, plan, staging); err != nil {
		return false, fmt.Errorf("restoring the archive %s at %s: %w", r.Location, target, err)
	}
	if err := syncDir(staging); err != nil {
		return false, err
	}
	if err := os.Rename(staging, filepath.Join(r.DataDir, appendDir)); err != nil {
		return false, err
	}
	if err := syncDir(r.DataDir); err != nil {
		return false, err
	}
	if err := writeFileSynced(marker, []byte(want)); err != nil {
		return false, err
	}
	return true, syncDir(r.DataDir)
}

// parseArchiveLocation splits s3://<bucket>[/<prefix>].
func parseArchiveLocation(location string) (bucket, prefix string, err error) {
	u, err := url.Parse(location)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return "", "", fmt.Errorf("the archive's location %q is no s3://<bucket>/<prefix>", location)
	}
	return u.Host, strings.Trim(u.Path, "/"), nil
}

// writePlan writes the plan's base, INCR files and manifest into dir.
func writePlan(ctx context.Context, store *Store, plan RecoveryPlan, dir string) error {
	manifest := fmt.Sprintf("file %s seq %d type b\n", plan.Base.File, plan.Base.Seq)
	base := filepath.Join(dir, plan.Base.File)
	if err := download(ctx, store, baseKey(plan.Timeline, plan.Base.Seq, plan.Base.File), base, plan.Base.SHA256); err != nil {
		return err
	}
	if plan.Base.RDB {
		if err := verifyFile(base); err != nil {
			return fmt.Errorf("base %s: %w", plan.Base.File, err)
		}
	}
	for i, incr := range plan.Incrs {
		cut := !plan.Latest && i == len(plan.Incrs)-1
		if err := writeIncr(ctx, store, plan.Timeline, incr, filepath.Join(dir, incr.File), cut, plan.Target.Unix()); err != nil {
			return err
		}
		manifest += fmt.Sprintf("file %s seq %d type i\n", incr.File, incr.Seq)
	}
	return writeFileSynced(filepath.Join(dir, appendFile+".manifest"), []byte(manifest))
}

func download(ctx context.Context, store *Store, key, file, sha string) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := store.Get(ctx, key, f, sha); err != nil {
		_ = f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// writeIncr writes incr's segments into file, checking that they are
// contiguous and that each is the one recorded. With cut, it stops at the
// first #TS annotation after target.
func writeIncr(ctx context.Context, store *Store, timeline string, incr ArchivedIncr, file string, cut bool, target int64) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var size int64
	for _, seg := range incr.Segments {
		if seg.Offset != size {
			return fmt.Errorf("INCR file %s: its segment at %d follows %d bytes: the archive has a hole", incr.File, seg.Offset, size)
		}
		key := segmentKey(timeline, incr.Seq, seg.Offset)
		var b bytes.Buffer
		n, err := store.Get(ctx, key, &b, seg.SHA256)
		if err != nil {
			return err
		}
		if n != seg.Size {
			return fmt.Errorf("%s holds %d bytes, the timeline recorded %d", store.URL(key), n, seg.Size)
		}
		data := b.Bytes()
		stop := false
		if cut && seg.LastTS > target {
			scan, err := ScanAOF(data, target)
			if err != nil {
				return fmt.Errorf("%s: %w", store.URL(key), err)
			}
			if scan.Cut >= 0 {
				data, stop = data[:scan.Cut], true
			}
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		size += seg.Size
		if stop {
			break
		}
	}
	if !cut && size != incr.Size {
		return fmt.Errorf("INCR file %s: its segments hold %d bytes, the timeline recorded %d", incr.File, size, incr.Size)
	}
	return f.Sync()
}

// String names the plan's timeline, target and files.
func (p RecoveryPlan) String() string {
	files := []string{p.Base.File}
	for _, incr := range p.Incrs {
		files = append(files, incr.File)
	}
	return fmt.Sprintf("timeline %s at %s: %s", p.Timeline, p.Target.Format(time.RFC3339), strings.Join(files, ", "))
}
