package backup

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Backups is every backup the store holds under its prefix: each
// backups/<name>/backup.json, which the agent writes last, so a backup under
// way or one that failed is not among them. Nothing but the store is read:
// this is what a recovery in a cluster that never had the RedisBackup
// objects has to go on.
func Backups(ctx context.Context, store *Store) ([]Metadata, error) {
	names, err := store.Children(ctx, "backups/")
	if err != nil {
		return nil, err
	}
	var backups []Metadata
	for _, name := range names {
		name, isDir := strings.CutSuffix(name, "/")
		if !isDir {
			continue
		}
		m, err := readMetadata(ctx, store, name)
		if errors.Is(err, ErrNoBackup) {
			continue
		}
		if err != nil {
			return nil, err
		}
		backups = append(backups, m)
	}
	return backups, nil
}

// ErrNoBackup is FindBackup's error when the store holds no backup of
// that name, or none at all.
var ErrNoBackup = errors.New("no such backup in the store")

// FindBackup is the backup called name in the store, or the newest by its
// point when name is "".
func FindBackup(ctx context.Context, store *Store, name string) (Metadata, error) {
	if name != "" {
		return readMetadata(ctx, store, name)
	}
	backups, err := Backups(ctx, store)
	if err != nil {
		return Metadata{}, err
	}
	if len(backups) == 0 {
		return Metadata{}, fmt.Errorf("%w: %s holds none (no backups/<name>/backup.json)", ErrNoBackup, store.URL("backups/"))
	}
	newest := backups[0]
	for _, m := range backups[1:] {
		if m.Point.After(newest.Point) {
			newest = m
		}
	}
	return newest, nil
}

func readMetadata(ctx context.Context, store *Store, name string) (Metadata, error) {
	_, key := ObjectKeys(name)
	b, err := store.GetBytes(ctx, key)
	if notFound(err) {
		return Metadata{}, fmt.Errorf("%w: %s does not exist", ErrNoBackup, store.URL(key))
	}
	if err != nil {
		return Metadata{}, err
	}
	m, err := DecodeMetadata(b)
	if err != nil {
		return Metadata{}, fmt.Errorf("%s: %w", store.URL(key), err)
	}
	return m, nil
}

// CountBackups is how many backups the store holds under its prefix, as
// Backups finds them (backups/<name>/backup.json), from one listing and
// without reading them: cheap enough to count at every look at the archive.
func CountBackups(ctx context.Context, store *Store) (int, error) {
	objects, err := store.List(ctx, "backups/")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objects {
		name, _, _ := strings.Cut(strings.TrimPrefix(o.Key, "backups/"), "/")
		if _, metadata := ObjectKeys(name); o.Key == metadata {
			n++
		}
	}
	return n, nil
}
