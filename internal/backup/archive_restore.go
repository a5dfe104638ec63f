package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

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
	// Target is the point in time: every write of its second and before
	// it is restored, none after (the AOF's #TS annotations count whole
	// seconds). Zero restores everything archived.
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
	target := "latest"
	if !r.Target.IsZero() {
		target = r.Target.UTC().Format(time.RFC3339)
	}
	marker := "archive " + r.Location + " at " + target
	if done, err := restoredBefore(r.DataDir, marker, "the "+marker); done || err != nil {
		return false, err
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
	return true, markRestored(r.DataDir, marker)
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

// writeIncr writes incr's segments into file: those the store lists
// under its key up to the size the timeline recorded (a pass whose
// timeline.json was lost may have shipped more), each checked against the
// digest its upload recorded, contiguous, and all of them together against
// the timeline's digest. With cut, it then cuts the file at the first #TS
// annotation after target.
func writeIncr(ctx context.Context, store *Store, timeline string, incr ArchivedIncr, file string, cut bool, target int64) error {
	objects, err := store.List(ctx, incrDir(timeline, incr.Seq)+"/")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	sha := sha256.New()
	var size int64
	for _, o := range objects {
		offset, err := strconv.ParseInt(path.Base(o.Key), 10, 64)
		if err != nil || offset >= incr.Size {
			continue
		}
		if offset != size {
			return fmt.Errorf("INCR file %s: a segment starts at %d where %d bytes were expected: the archive is corrupt (an object was removed or replaced)", incr.File, offset, size)
		}
		stored, err := store.GetBytes(ctx, o.Key)
		if err != nil {
			return err
		}
		b, err := decodeSegment(stored)
		if err != nil {
			return fmt.Errorf("%s: %w", store.URL(o.Key), err)
		}
		if _, err := io.MultiWriter(f, sha).Write(b); err != nil {
			return err
		}
		size += int64(len(b))
	}
	if got := hex.EncodeToString(sha.Sum(nil)); size != incr.Size || got != incr.SHA256 {
		return fmt.Errorf("INCR file %s: its segments hold %d bytes with SHA-256 %s, the timeline recorded %d with %s: the archive is corrupt (an object was removed or replaced)",
			incr.File, size, got, incr.Size, incr.SHA256)
	}
	if cut {
		offset, err := cutOffset(f, target)
		if err != nil {
			return fmt.Errorf("INCR file %s: %w", incr.File, err)
		}
		if offset >= 0 {
			if err := f.Truncate(offset); err != nil {
				return err
			}
		}
	}
	return f.Sync()
}

// cutOffset is the offset in f of the first #TS annotation after target,
// -1 if there is none. f holds complete entries, read a chunk at a time.
func cutOffset(f *os.File, target int64) (int64, error) {
	const chunk = 1 << 20
	var (
		pending []byte // entries not scanned yet, from offset on
		offset  int64
		eof     bool
	)
	for !eof {
		buf := make([]byte, chunk)
		n, err := f.ReadAt(buf, offset+int64(len(pending)))
		if errors.Is(err, io.EOF) {
			eof = true
		} else if err != nil {
			return 0, err
		}
		pending = append(pending, buf[:n]...)
		scan, err := ScanAOF(pending, target)
		if err != nil {
			return 0, err
		}
		if scan.Cut >= 0 {
			return offset + int64(scan.Cut), nil
		}
		offset += int64(scan.End)
		pending = pending[scan.End:]
	}
	if len(pending) > 0 {
		return 0, fmt.Errorf("it ends inside an entry, %d bytes before its end", len(pending))
	}
	return -1, nil
}

// String names the plan's timeline, target and files.
func (p RecoveryPlan) String() string {
	files := []string{p.Base.File}
	for _, incr := range p.Incrs {
		files = append(files, incr.File)
	}
	return fmt.Sprintf("timeline %s at %s: %s", p.Timeline, p.Target.Format(time.RFC3339), strings.Join(files, ", "))
}
