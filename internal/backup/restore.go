package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// RestoredMarker is the file a restore leaves in the data directory: the
// backup's name and SHA-256. A server restarting on a restored volume finds
// it, and the restore does nothing.
const RestoredMarker = ".uring-restored"

// Restore puts a backup's snapshot where a server loads it: an empty data
// directory, as the base of a new AOF (appendonlydir/appendonly.aof.1.base.rdb
// and a manifest naming it, which the server loads with appendonly yes and
// follows with a new INCR file) or as dump.rdb for a server without an AOF.
type Restore struct {
	// Destination reaches the store; its Bucket and Prefix are ignored:
	// Location names the object.
	Destination Destination
	// Location is the snapshot, s3://<bucket>/<key>, and SHA256 its digest.
	Location, SHA256 string
	// Backup names the backup, for the marker and the messages.
	Backup string
	// DataDir is the server's dir; AOF says whether the server loads an AOF.
	DataDir string
	AOF     bool
}

// appendDir and appendFile are the server's appenddirname and
// appendfilename (internal/specs/config.go writes them).
const (
	appendDir  = "appendonlydir"
	appendFile = "appendonly.aof"
)

// ErrVolumeHoldsData is a restore refused because the volume has data of
// its own.
var ErrVolumeHoldsData = errors.New("the volume already holds data")

// Run restores the snapshot unless the marker says this backup is already
// restored here (restored is false then). It refuses a data directory with
// any AOF or RDB of its own, and checks the snapshot (its SHA-256 and the
// RDB's own checksum) before it moves it where the server looks: a failed or
// interrupted restore leaves only a partial file the next attempt replaces.
func (r Restore) Run(ctx context.Context) (restored bool, err error) {
	marker := r.Backup + " " + r.SHA256
	if done, err := restoredBefore(r.DataDir, marker, "backup "+r.Backup); done || err != nil {
		return false, err
	}
	bucket, key, err := parseLocation(r.Location)
	if err != nil {
		return false, err
	}
	// The store opens at the snapshot's folder, which a key allowed to
	// list only the backed-up instance's prefix may list.
	d := r.Destination
	d.Bucket = bucket
	d.Prefix, key = path.Split(key)
	store, err := Open(ctx, d)
	if err != nil {
		return false, err
	}

	partial := filepath.Join(r.DataDir, ".restore.rdb.partial")
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return false, err
	}
	if err := getSnapshot(ctx, store, key, f, r.SHA256); err != nil {
		_ = f.Close()
		return false, err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return false, err
	}
	if err := verifyFile(partial); err != nil {
		return false, fmt.Errorf("backup %s (%s): %w", r.Backup, r.Location, err)
	}

	if r.AOF {
		dir := filepath.Join(r.DataDir, appendDir)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return false, err
		}
		base := appendFile + ".1.base.rdb"
		if err := os.Rename(partial, filepath.Join(dir, base)); err != nil {
			return false, err
		}
		manifest := "file " + base + " seq 1 type b\n"
		if err := writeFileSynced(filepath.Join(dir, appendFile+".manifest"), []byte(manifest)); err != nil {
			return false, err
		}
		if err := syncDir(dir); err != nil {
			return false, err
		}
	} else if err := os.Rename(partial, filepath.Join(r.DataDir, "dump.rdb")); err != nil {
		return false, err
	}
	return true, markRestored(r.DataDir, marker)
}

// restoredBefore reads the RestoredMarker in dir: done when it records
// marker, this restore; ErrVolumeHoldsData when it records another one
// (what names this one), or the volume holds data of its own.
func restoredBefore(dir, marker, what string) (done bool, err error) {
	if b, err := os.ReadFile(filepath.Join(dir, RestoredMarker)); err == nil {
		if string(b) == marker+"\n" {
			return true, nil
		}
		return false, fmt.Errorf("%w: it was restored from %s, not from %s", ErrVolumeHoldsData, strings.TrimSpace(string(b)), what)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if found := dataFiles(dir); len(found) > 0 {
		return false, fmt.Errorf("%w (%s): a restore never overwrites it; restore into a new RedisPersistence, or delete this one's volume claim first", ErrVolumeHoldsData, strings.Join(found, ", "))
	}
	return false, nil
}

// markRestored writes the RestoredMarker, last: what a restore wrote
// before it is in place and synced.
func markRestored(dir, marker string) error {
	if err := writeFileSynced(filepath.Join(dir, RestoredMarker), []byte(marker+"\n")); err != nil {
		return err
	}
	return syncDir(dir)
}

// dataFiles are the files in dir a server would load, or that show it ran.
func dataFiles(dir string) []string {
	var found []string
	if _, err := os.Stat(filepath.Join(dir, "dump.rdb")); err == nil {
		found = append(found, "dump.rdb")
	}
	if entries, err := os.ReadDir(filepath.Join(dir, appendDir)); err == nil && len(entries) > 0 {
		found = append(found, appendDir+"/")
	}
	return found
}

// parseLocation splits s3://<bucket>/<key>.
func parseLocation(location string) (bucket, key string, err error) {
	u, err := url.Parse(location)
	if err != nil || u.Scheme != "s3" || u.Host == "" || len(u.Path) < 2 {
		return "", "", fmt.Errorf("the backup's location %q is no s3://<bucket>/<key>", location)
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), nil
}

func verifyFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, _, err = VerifyRDB(f)
	return err
}

func writeFileSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err := errors.Join(err, f.Sync(), f.Close()); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
