package backup

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// recoverTimeline is what the store holds of timeline id: its
// timeline.json, and the objects a pass uploaded after it last rewrote
// timeline.json (a pass that ended early), which are adopted rather than
// uploaded again.
func (a *Archiver) recoverTimeline(ctx context.Context, id string) (Timeline, error) {
	t := Timeline{ID: id}
	b, err := a.store.GetBytes(ctx, timelineKey(id))
	switch {
	case err == nil:
		if t, err = decodeTimeline(b); err != nil {
			return Timeline{}, fmt.Errorf("%s: %w", a.store.URL(timelineKey(id)), err)
		}
	case notFound(err):
	default:
		return Timeline{}, err
	}
	// The bases are few (one per rewrite); of the segments only those of
	// the INCR files not closed can be missing from timeline.json.
	root := path.Join(archiveDir, id) + "/"
	objects, err := a.store.List(ctx, root+"base/")
	if err != nil {
		return Timeline{}, err
	}
	incrs, err := a.store.Children(ctx, root+"incr/")
	if err != nil {
		return Timeline{}, err
	}
	for _, dir := range incrs {
		seq, err := strconv.ParseInt(strings.TrimSuffix(dir, "/"), 10, 64)
		if err != nil || (t.incr(seq) != nil && t.incr(seq).Closed) {
			continue
		}
		segments, err := a.store.List(ctx, incrDir(id, seq)+"/")
		if err != nil {
			return Timeline{}, err
		}
		objects = append(objects, segments...)
	}
	for _, o := range objects {
		parts := strings.Split(strings.TrimPrefix(o.Key, root), "/")
		if len(parts) != 3 {
			continue
		}
		seq, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			continue
		}
		switch parts[0] {
		case "base":
			if t.base(seq) == nil {
				if err := a.adoptBase(ctx, &t, seq, parts[2], o.Key); err != nil {
					return Timeline{}, err
				}
			}
		case "incr":
			offset, err := strconv.ParseInt(parts[2], 10, 64)
			if err != nil {
				continue
			}
			if err := a.adoptSegment(ctx, &t, seq, offset, o.Key); err != nil {
				return Timeline{}, err
			}
		}
	}
	if len(t.Bases)+len(t.Incrs) > 0 {
		a.logf("continuing timeline %s: %d bases and %d INCR files archived", id, len(t.Bases), len(t.Incrs))
	}
	return t, nil
}

// notFound says err is the store's answer for a key it does not hold.
func notFound(err error) bool {
	var response minio.ErrorResponse
	return errors.As(err, &response) && response.Code == "NoSuchKey"
}

// diverged says why the AOF in the data directory does not go on from
// what t archived of it, "" when it does: the last segment archived of an
// INCR file not closed is no longer what the file holds there. A server
// that lost its last writes in a crash (a power cut takes what was not
// fdatasync'ed, which the archiver may have read) writes other entries in
// their place; the archive of them goes into a timeline of its own.
func (a *Archiver) diverged(t Timeline) (string, error) {
	for _, incr := range t.Incrs {
		if incr.Closed || incr.LastSegment == nil {
			continue
		}
		f, err := os.Open(filepath.Join(a.DataDir, appendDir, incr.File))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		last := *incr.LastSegment
		sha := sha256.New()
		n, err := io.Copy(sha, io.NewSectionReader(f, last.Offset, last.Size))
		_ = f.Close()
		if err != nil {
			return "", err
		}
		if n != last.Size || hex.EncodeToString(sha.Sum(nil)) != last.SHA256 {
			return fmt.Sprintf("%s holds other bytes than were archived at %d..%d", incr.File, last.Offset, last.Offset+last.Size), nil
		}
	}
	return "", nil
}

// adoptBase records a base found in the store but not in timeline.json,
// read back (verified against the digest its upload recorded).
func (a *Archiver) adoptBase(ctx context.Context, t *Timeline, seq int64, file, key string) error {
	var head headWriter
	sha := sha256.New()
	size, err := a.store.Get(ctx, key, io.MultiWriter(&head, sha), "")
	if err != nil {
		return err
	}
	b := ArchivedBase{Seq: seq, File: file, SHA256: hex.EncodeToString(sha.Sum(nil)), Size: size, RDB: isRDB(head.b)}
	b.Time, err = baseTime(head.b, b.RDB, time.Time{})
	if err != nil {
		return fmt.Errorf("%s: %w", a.store.URL(key), err)
	}
	t.Bases = append(t.Bases, b)
	slices.SortFunc(t.Bases, func(x, y ArchivedBase) int { return cmp.Compare(x.Seq, y.Seq) })
	return nil
}

// adoptSegment records a segment found in the store but not in
// timeline.json, if it is the next one of its INCR file.
func (a *Archiver) adoptSegment(ctx context.Context, t *Timeline, seq, offset int64, key string) error {
	incr := t.incr(seq)
	if incr != nil && offset < incr.Size {
		return nil // recorded
	}
	if incr == nil {
		t.Incrs = append(t.Incrs, ArchivedIncr{Seq: seq, File: incrFileName(seq)})
		slices.SortFunc(t.Incrs, func(x, y ArchivedIncr) int { return cmp.Compare(x.Seq, y.Seq) })
		incr = t.incr(seq)
	}
	if offset != incr.Size {
		return fmt.Errorf("%s starts at %d, but INCR %d is archived up to %d: the timeline has a hole; archive into a new timeline (delete %s in the data directory)",
			a.store.URL(key), offset, seq, incr.Size, TimelineFile)
	}
	stored, err := a.store.GetBytes(ctx, key)
	if err != nil {
		return err
	}
	b, err := decodeSegment(stored)
	if err != nil {
		return fmt.Errorf("%s: %w", a.store.URL(key), err)
	}
	scan, err := ScanAOF(b, -1)
	if err == nil && scan.End != len(b) {
		err = fmt.Errorf("it ends inside an entry, at %d of %d bytes", scan.End, len(b))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", a.store.URL(key), err)
	}
	return incr.add(b, scan)
}
