package backup

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// TimelineFile is the file in the data directory that names the volume's
// timeline: a pod that restarts on its volume goes on with it, a new volume
// (or a restored one) starts a new one.
const TimelineFile = ".uring-archive-timeline"

// Archiver ships a server's AOF, as it grows, into object storage: the
// continuous archive a point-in-time restore (ArchiveRestore) reads. It
// runs beside the server, on its data directory. See the package comment,
// "Continuous archiving". An Archiver is not for concurrent use.
type Archiver struct {
	// Source is the server, for its role and how far it has written its
	// AOF (INFO); it signs in as FetchRDB does, and needs INFO only.
	Source      Source
	Destination Destination
	// DataDir is the server's dir: appendonlydir/ is read there and
	// TimelineFile kept.
	DataDir string
	// Interval is the time between passes of Run: the archive's recovery
	// point objective. 30 s when zero.
	Interval time.Duration
	// Log reports what the archiver does and why it does not; stderr when
	// nil.
	Log func(format string, args ...any)
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// PruneEvery is how often a pass also lets go of what the archive no
	// longer needs (prune): 10 minutes when zero.
	PruneEvery time.Duration
	// MaxAge bounds how far back the archive reaches, with or without
	// backups in the store (see prune); 0: as far as the oldest backup.
	MaxAge time.Duration

	store    *Store
	pruned   time.Time
	timeline *Timeline
	// files are the INCR files being shipped, held open so that the end
	// of one a rewrite deletes can still be read.
	files   map[int64]*os.File
	idleWhy string
}

const (
	defaultArchiveInterval = 30 * time.Second
	// finalSyncLimit bounds the pass Run makes once its context ends: a
	// pod has terminationGracePeriodSeconds (30 s by default) to stop.
	finalSyncLimit = 15 * time.Second
	// maxSegment bounds a segment, which is held in memory.
	maxSegment = 16 << 20
)

// Run makes a pass (Sync) every Interval until ctx ends, then a last one
// with a fresh deadline of its own, and returns that pass's error. A
// failed pass is logged and retried at the next interval; nothing already
// archived is ever overwritten. The last pass runs while the pod stops,
// when the server may be gone already (its container got SIGTERM too): if
// it was archiving a primary, it then ships what the server wrote without
// asking it, and leaves the archive's end (LastArchivedTime) where it was.
func (a *Archiver) Run(ctx context.Context) error {
	interval := cmp.Or(a.Interval, defaultArchiveInterval)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	defer a.closeFiles()
	for {
		if err := a.Sync(ctx); err != nil && ctx.Err() == nil {
			a.logf("archiving failed, retrying in %s: %v", interval, err)
		}
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSyncLimit)
			defer cancel()
			return a.sync(final, true)
		case <-ticker.C:
		}
	}
}

// Sync makes one pass: if the server is a primary with its AOF on, it
// ships every base the manifest names that is not archived yet, then the
// new complete entries of each INCR file, and rewrites timeline.json.
func (a *Archiver) Sync(ctx context.Context) error { return a.sync(ctx, false) }

func (a *Archiver) sync(ctx context.Context, stopping bool) error {
	why, through, err := a.serverState(ctx)
	switch {
	case err != nil && (!stopping || a.timeline == nil):
		return err
	case err != nil:
		a.logf("the server does not answer (%v): shipping what it wrote before it stopped", err)
	case why != "":
		if why != a.idleWhy {
			a.logf("not archiving: %s", why)
		}
		a.idleWhy = why
		// What is held open pins the space of deleted files; the store
		// has what was archived, and is read again when archiving
		// resumes.
		a.closeFiles()
		a.timeline = nil
		return nil
	}
	if a.idleWhy != "" {
		a.logf("archiving again: the server is a primary with its AOF on")
		a.idleWhy = ""
	}
	if a.store == nil {
		store, err := Open(ctx, a.Destination)
		if err != nil {
			return err
		}
		a.store = store
	}
	if a.timeline == nil {
		t, err := a.loadTimeline(ctx)
		if err != nil {
			return err
		}
		a.timeline = &t
	}
	if err := a.ship(ctx, through); err != nil {
		// An upload that failed may have stored its object all the same
		// (a timeout): the next pass reads what the store holds again
		// rather than upload to the same key.
		a.timeline = nil
		return err
	}
	if !stopping && a.now().Sub(a.pruned) >= cmp.Or(a.PruneEvery, defaultPruneEvery) {
		// Archiving goes on when pruning fails; the next prune tries again.
		if err := a.prune(ctx); err != nil {
			a.logf("pruning the archive failed, retrying in %s: %v", cmp.Or(a.PruneEvery, defaultPruneEvery), err)
		}
		a.pruned = a.now()
	}
	return nil
}

// loadTimeline is the volume's timeline as the store holds it, or a new
// one when the volume has none or its log diverged from it.
func (a *Archiver) loadTimeline(ctx context.Context) (Timeline, error) {
	id, err := a.timelineID()
	if err != nil {
		return Timeline{}, err
	}
	t, err := a.recoverTimeline(ctx, id)
	if err != nil {
		return Timeline{}, err
	}
	why, err := a.diverged(t)
	if err != nil || why == "" {
		return t, err
	}
	a.logf("the volume's AOF is no longer what timeline %s archived (%s): archiving into a new timeline", id, why)
	if err := os.Remove(filepath.Join(a.DataDir, TimelineFile)); err != nil {
		return Timeline{}, err
	}
	id, err = a.timelineID()
	return Timeline{ID: id}, err
}

// ship is the pass's work once the timeline is known.
func (a *Archiver) ship(ctx context.Context, through time.Time) error {
	dir := filepath.Join(a.DataDir, appendDir)
	manifest, err := readManifest(filepath.Join(dir, appendFile+".manifest"))
	if err != nil {
		return err
	}
	if err := a.shipBases(ctx, dir, manifest); err != nil {
		return err
	}
	if err := a.shipIncrs(ctx, dir, manifest, through); err != nil {
		return err
	}
	return a.putTimeline(ctx)
}

// timelineID reads the volume's timeline, or starts one:
// <UTC yyyymmddThhmmssZ>-<6 hex>, which sorts as the timelines began.
func (a *Archiver) timelineID() (string, error) {
	file := filepath.Join(a.DataDir, TimelineFile)
	if b, err := os.ReadFile(file); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", err
	}
	id := a.now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(suffix[:])
	if err := writeFileSynced(file, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("recording the archive's timeline in %s: %w", a.DataDir, err)
	}
	a.logf("archiving into a new timeline %s", id)
	return id, syncDir(a.DataDir)
}

// incrFileName is the name the server gives INCR file seq (appendfilename
// appendonly.aof).
func incrFileName(seq int64) string { return fmt.Sprintf("%s.%d.incr.aof", appendFile, seq) }

// manifestEntry is a line of the AOF manifest: file <name> seq <n> type
// b|i|h.
type manifestEntry struct {
	file string
	seq  int64
	kind string
}

// readManifest parses the manifest the way the server does
// (aofLoadManifestFromFile): key-value pairs, history entries left out.
func readManifest(file string) ([]manifestEntry, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the server has no AOF manifest at %s: is --data-dir its dir?", file)
	}
	if err != nil {
		return nil, err
	}
	var entries []manifestEntry
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		var e manifestEntry
		for i := 0; i+1 < len(fields); i += 2 {
			switch fields[i] {
			case "file":
				e.file = fields[i+1]
			case "seq":
				e.seq, err = strconv.ParseInt(fields[i+1], 10, 64)
			case "type":
				e.kind = fields[i+1]
			}
		}
		if e.file == "" || e.seq <= 0 || err != nil || (e.kind != "b" && e.kind != "i" && e.kind != "h") {
			return nil, fmt.Errorf("%s: line %q is no AOF manifest entry", file, line)
		}
		if e.kind != "h" {
			entries = append(entries, e)
		}
	}
	return entries, nil
}

// shipBases uploads each base in the manifest that is not archived yet,
// whole, before any of its INCR files.
func (a *Archiver) shipBases(ctx context.Context, dir string, manifest []manifestEntry) error {
	var firstIncr int64
	for _, e := range manifest {
		if e.kind == "i" && (firstIncr == 0 || e.seq < firstIncr) {
			firstIncr = e.seq
		}
	}
	if firstIncr == 0 {
		// A server opens its INCR file as it starts, or a rewrite as it
		// begins: the base's time waits for it (ArchivedBase.Time).
		return nil
	}
	began := a.born(filepath.Join(dir, incrFileName(firstIncr)))
	for _, e := range manifest {
		if e.kind != "b" {
			continue
		}
		if b := a.timeline.base(e.seq); b != nil {
			if b.FirstIncr == 0 {
				b.FirstIncr = firstIncr
			}
			continue
		}
		b, err := a.shipBase(ctx, filepath.Join(dir, e.file), e.seq)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a rewrite replaced it since the manifest was read
		}
		if err != nil {
			return err
		}
		b.FirstIncr = firstIncr
		// In whole seconds, as the AOF's time: a recovery to the second
		// the INCR file began in holds the base and that second's writes.
		if began = began.Truncate(time.Second); b.Time.Before(began) {
			b.Time = began
		}
		a.timeline.Bases = append(a.timeline.Bases, b)
		slices.SortFunc(a.timeline.Bases, func(x, y ArchivedBase) int { return cmp.Compare(x.Seq, y.Seq) })
		a.logf("archived base %s (%d bytes, point %s)", b.File, b.Size, b.Time.Format(time.RFC3339))
	}
	return nil
}

func (a *Archiver) shipBase(ctx context.Context, file string, seq int64) (ArchivedBase, error) {
	f, err := os.Open(file)
	if err != nil {
		return ArchivedBase{}, err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return ArchivedBase{}, err
	}
	head := make([]byte, 4096)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return ArchivedBase{}, err
	}
	head = head[:n]
	b := ArchivedBase{Seq: seq, File: filepath.Base(file), Size: info.Size(), RDB: isRDB(head)}
	if b.Time, err = baseTime(head, b.RDB, info.ModTime()); err != nil {
		return ArchivedBase{}, fmt.Errorf("%s: %w", file, err)
	}
	sha := sha256.New()
	if _, err := io.Copy(sha, io.NewSectionReader(f, 0, b.Size)); err != nil {
		return ArchivedBase{}, err
	}
	b.SHA256 = hex.EncodeToString(sha.Sum(nil))
	if err := a.store.PutVerified(ctx, baseKey(a.timeline.ID, seq, b.File), io.NewSectionReader(f, 0, b.Size), b.Size, b.SHA256); err != nil {
		return ArchivedBase{}, err
	}
	return b, nil
}

// born is when file was created (statx's birth time, which ext4 and xfs
// keep), or now where the filesystem does not say: later than the truth,
// which only shortens what the base's chain claims to cover.
func (a *Archiver) born(file string) time.Time {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, file, 0, unix.STATX_BTIME, &st); err == nil && st.Mask&unix.STATX_BTIME != 0 {
		return time.Unix(st.Btime.Sec, int64(st.Btime.Nsec)).UTC()
	}
	return a.now()
}

// isRDB says a base is an RDB: its magic is REDIS (Valkey 8) or VALKEY
// (later versions), where a RESP base starts with a command or a #TS.
func isRDB(head []byte) bool {
	return bytes.HasPrefix(head, []byte("REDIS")) || bytes.HasPrefix(head, []byte("VALKEY"))
}

// baseTime is a base's point (see ArchivedBase.Time).
func baseTime(head []byte, rdb bool, mtime time.Time) (time.Time, error) {
	if rdb {
		if t, ok := rdbCreated(head); ok {
			return t, nil
		}
		return time.Time{}, errors.New("the RDB base has no ctime field among its first aux fields")
	}
	if scan, _ := ScanAOF(head, -1); len(scan.Timestamps) > 0 {
		return time.Unix(scan.Timestamps[0], 0).UTC(), nil
	}
	if mtime.IsZero() {
		return time.Time{}, errors.New("the RESP base has no #TS annotation")
	}
	return mtime.UTC(), nil
}

// headWriter keeps the first 4 KiB written to it.
type headWriter struct{ b []byte }

func (h *headWriter) Write(p []byte) (int, error) {
	if room := 4096 - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// shipIncrs ships the new complete entries of every INCR file not closed
// yet: those the manifest lists, and those archived before that it no
// longer lists (a rewrite made them history), whose end is read through
// the descriptor held since. All but the manifest's last are closed. The
// last one's tail is read after through (see serverState), so everything
// the server executed before through is archived.
func (a *Archiver) shipIncrs(ctx context.Context, dir string, manifest []manifestEntry, through time.Time) error {
	var current manifestEntry
	var currentBase int64
	for _, e := range manifest {
		switch e.kind {
		case "i":
			current = e
		case "b":
			currentBase = e.seq
		}
	}
	for _, e := range manifest {
		if e.kind != "i" {
			continue
		}
		if incr := a.timeline.incr(e.seq); incr != nil {
			incr.Base = currentBase
			continue
		}
		a.timeline.Incrs = append(a.timeline.Incrs, ArchivedIncr{Seq: e.seq, File: e.file, Base: currentBase})
		slices.SortFunc(a.timeline.Incrs, func(x, y ArchivedIncr) int { return cmp.Compare(x.Seq, y.Seq) })
	}
	for i := range a.timeline.Incrs {
		incr := &a.timeline.Incrs[i]
		if incr.Closed {
			continue
		}
		open := incr.Seq == current.seq
		f, err := a.file(dir, incr)
		if errors.Is(err, fs.ErrNotExist) && !open {
			incr.close(true)
			a.logf("INCR file %s was deleted before its end was archived: the archive of it ends at %s", incr.File, incr.ReadAt.Format(time.RFC3339))
			continue
		}
		if err != nil {
			return err
		}
		if err := a.shipNewEntries(ctx, f, incr); err != nil {
			return err
		}
		if open {
			if !through.IsZero() {
				incr.ReadAt, a.timeline.LastArchivedTime = through, through
			}
			continue
		}
		incr.close(false)
		delete(a.files, incr.Seq)
		_ = f.Close()
		a.logf("archived INCR file %s to its end (%d bytes)", incr.File, incr.Size)
	}
	return nil
}

// file is the open descriptor of incr, opened now if it is not yet.
func (a *Archiver) file(dir string, incr *ArchivedIncr) (*os.File, error) {
	if f := a.files[incr.Seq]; f != nil {
		return f, nil
	}
	if a.files == nil {
		a.files = map[int64]*os.File{}
	}
	f, err := os.Open(filepath.Join(dir, incr.File))
	if err != nil {
		return nil, err
	}
	a.files[incr.Seq] = f
	return f, nil
}

// shipNewEntries uploads the complete entries of f after incr.Size as
// segments of at most maxSegment bytes.
//
// The server may be writing while f is read, and a read that overtakes a
// write in progress could see its later bytes but zeros where its earlier
// ones belong. So the bytes of each segment are read again before they are
// shipped, and only what both reads agree on is: the server writes
// sequentially and never rewrites its log, so by the second read every
// byte the first one saw written before it is written.
func (a *Archiver) shipNewEntries(ctx context.Context, f *os.File, incr *ArchivedIncr) error {
	for {
		b, scan, err := readEntries(f, incr.Size)
		if err != nil {
			return fmt.Errorf("%s at %d: %w", incr.File, incr.Size, err)
		}
		if scan.End == 0 {
			return nil
		}
		again := make([]byte, scan.End)
		n, err := f.ReadAt(again, incr.Size)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if agreed := commonPrefix(b[:scan.End], again[:n]); agreed < scan.End {
			if scan, err = ScanAOF(b[:agreed], -1); err != nil || scan.End == 0 {
				return err
			}
		}
		b = b[:scan.End]
		if err := a.store.PutBytes(ctx, segmentKey(a.timeline.ID, incr.Seq, incr.Size), encodeSegment(b, a.Destination.Compression)); err != nil {
			return err
		}
		if err := incr.add(b, scan); err != nil {
			return err
		}
		if len(b) < maxSegment/2 {
			return nil
		}
	}
}

// readEntries reads f from offset until its complete entries end, or
// maxSegment bytes of them.
func readEntries(f *os.File, offset int64) ([]byte, AOFScan, error) {
	const chunk = 1 << 20
	var b []byte
	for {
		buf := make([]byte, chunk)
		n, err := f.ReadAt(buf, offset+int64(len(b)))
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, AOFScan{}, err
		}
		b = append(b, buf[:n]...)
		scan, serr := ScanAOF(b, -1)
		if serr != nil {
			return nil, AOFScan{}, serr
		}
		stopped := scan.End < len(b) && b[scan.End] == 0
		if n < chunk || stopped || scan.End >= maxSegment/2 {
			return b, scan, nil
		}
	}
}

func commonPrefix(x, y []byte) int {
	n := min(len(x), len(y))
	for i := range n {
		if x[i] != y[i] {
			return i
		}
	}
	return n
}

func (a *Archiver) putTimeline(ctx context.Context) error {
	b, err := a.timeline.encode()
	if err != nil {
		return err
	}
	return a.store.PutBytes(ctx, timelineKey(a.timeline.ID), b)
}

func (a *Archiver) closeFiles() {
	for seq, f := range a.files {
		_ = f.Close()
		delete(a.files, seq)
	}
}

func (a *Archiver) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Archiver) logf(format string, args ...any) {
	if a.Log != nil {
		a.Log(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, "uring-backup: "+format+"\n", args...)
}
