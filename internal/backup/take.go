package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"
)

// Take is one backup: from a server, into a store, under a name.
type Take struct {
	Source      Source
	Destination Destination
	// Backup names the backup (the RedisBackup); its objects go under
	// backups/<Backup>/ in the destination's prefix.
	Backup string
	// Instance, Namespace, Mode and SourcePod are recorded in the metadata.
	Instance, Namespace, Mode, SourcePod string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// ObjectKeys are the keys, relative to the destination's prefix, of the
// backup named name: the snapshot, and the metadata written after it.
func ObjectKeys(name string) (snapshot, metadata string) {
	dir := path.Join("backups", name)
	return path.Join(dir, "dump.rdb"), path.Join(dir, "backup.json")
}

// Run streams a snapshot of the source into the store while it checks it
// (FetchRDB), compares what the store received with what the server sent,
// then writes the metadata, which is what marks the backup complete: a
// snapshot without it is an attempt that did not finish, and the next
// attempt overwrites it. A backup whose metadata is already in the store is
// never overwritten.
func (t Take) Run(ctx context.Context) (Metadata, error) {
	now := t.Now
	if now == nil {
		now = time.Now
	}
	started := now()
	store, err := Open(ctx, t.Destination)
	if err != nil {
		return Metadata{}, err
	}
	snapshotKey, metadataKey := ObjectKeys(t.Backup)
	existing, err := store.List(ctx, metadataKey)
	if err != nil {
		return Metadata{}, err
	}
	for _, o := range existing {
		if o.Key == metadataKey {
			return Metadata{}, fmt.Errorf("the store already holds a backup named %s (%s): a backup is never overwritten; delete its objects or give the RedisBackup another name", t.Backup, store.URL(metadataKey))
		}
	}

	// FetchRDB writes into the pipe while Put reads from it; an error on
	// either side ends the other.
	pr, pw := io.Pipe()
	type fetched struct {
		snap Snapshot
		err  error
	}
	done := make(chan fetched, 1)
	go func() {
		snap, err := FetchRDB(ctx, t.Source, pw)
		_ = pw.CloseWithError(err)
		done <- fetched{snap, err}
	}()
	obj, putErr := store.Put(ctx, snapshotKey, pr, -1)
	_ = pr.CloseWithError(errors.New("the upload ended"))
	f := <-done
	switch {
	case f.err != nil:
		return Metadata{}, f.err
	case putErr != nil:
		return Metadata{}, putErr
	case obj.Size != f.snap.Size || obj.SHA256 != f.snap.SHA256:
		return Metadata{}, fmt.Errorf("the store received %d bytes with SHA-256 %s, the server sent %d with %s", obj.Size, obj.SHA256, f.snap.Size, f.snap.SHA256)
	}

	m := Metadata{
		Backup: t.Backup, Instance: t.Instance, Namespace: t.Namespace, Mode: t.Mode,
		SourcePod: t.SourcePod, Role: f.snap.Role, ServerVersion: f.snap.ServerVersion,
		Point: f.snap.TakenAt.UTC(), StartedAt: started.UTC(), CompletedAt: now().UTC(),
		Location: store.URL(snapshotKey), Size: obj.Size, SHA256: obj.SHA256,
		ReplID: f.snap.ReplID, ReplOffset: f.snap.ReplOffset,
	}
	encoded, err := m.Encode()
	if err != nil {
		return Metadata{}, err
	}
	if err := store.PutBytes(ctx, metadataKey, encoded); err != nil {
		return Metadata{}, err
	}
	return m, nil
}

// URL is where key is: s3://<bucket>/<prefix>/<key>.
func (s *Store) URL(key string) string { return "s3://" + s.bucket + "/" + s.objectName(key) }
