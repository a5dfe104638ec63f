package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	// SampleKeys is how many keys of the RDB are sampled into the
	// metadata's Keyspace (at most MaxSampleKeys); the keys are counted
	// whatever it is.
	SampleKeys int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// ObjectKeys are the keys, relative to the destination's prefix, of the
// backup named name: the snapshot (with .zst after it when compressed), and
// the metadata written after it.
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

	// FetchRDB writes into the pipe, through the compressor if there is
	// one, while Put reads from it; an error on either side ends the other.
	// sent counts and hashes what goes into the pipe, to compare with what
	// the store received.
	if t.Destination.Compression == CompressionZstd {
		snapshotKey += zstdSuffix
	}
	pr, pw := io.Pipe()
	sent := &digestWriter{w: pw, sha: sha256.New()}
	type fetched struct {
		snap Snapshot
		err  error
	}
	done := make(chan fetched, 1)
	keys := newKeyScanner(t.SampleKeys)
	go func() {
		var w io.Writer = sent
		var enc io.WriteCloser
		if t.Destination.Compression == CompressionZstd {
			enc = compressingWriter(sent)
			w = enc
		}
		snap, err := FetchRDB(ctx, t.Source, io.MultiWriter(w, keys))
		if enc != nil {
			err = errors.Join(err, enc.Close())
		}
		_ = pw.CloseWithError(err)
		done <- fetched{snap, err}
	}()
	obj, putErr := store.Put(ctx, snapshotKey, pr, -1)
	_ = pr.CloseWithError(errors.New("the upload ended"))
	f := <-done
	keyspace, keyspaceErr := keys.result()
	switch {
	case f.err != nil:
		return Metadata{}, f.err
	case putErr != nil:
		return Metadata{}, putErr
	case obj.Size != sent.n || obj.SHA256 != hex.EncodeToString(sent.sha.Sum(nil)):
		return Metadata{}, fmt.Errorf("the store received %d bytes with SHA-256 %s, the agent sent %d with %x", obj.Size, obj.SHA256, sent.n, sent.sha.Sum(nil))
	}

	m := Metadata{
		Backup: t.Backup, Instance: t.Instance, Namespace: t.Namespace, Mode: t.Mode,
		SourcePod: t.SourcePod, Role: f.snap.Role, ServerVersion: f.snap.ServerVersion,
		Point: f.snap.TakenAt.UTC(), StartedAt: started.UTC(), CompletedAt: now().UTC(),
		Location: store.URL(snapshotKey), Size: obj.Size, SHA256: obj.SHA256,
		Compression: string(t.Destination.Compression), RDBSize: f.snap.Size,
		ReplID: f.snap.ReplID, ReplOffset: f.snap.ReplOffset, Keyspace: keyspace,
	}
	if keyspaceErr != nil {
		m.KeyspaceError = "the agent could not read the RDB's keys: " + keyspaceErr.Error()
	}
	if _, err := m.Encode(); err != nil {
		return Metadata{}, err
	}
	encoded, err := m.EncodeWhole()
	if err != nil {
		return Metadata{}, err
	}
	if err := store.PutBytes(ctx, metadataKey, encoded); err != nil {
		return Metadata{}, err
	}
	return m, nil
}

// DeleteBackup deletes the objects of the backup named name: its metadata
// first, since a snapshot without it is no backup, then its snapshot,
// compressed or not.
func DeleteBackup(ctx context.Context, store *Store, name string) error {
	snapshot, metadata := ObjectKeys(name)
	if err := store.Delete(ctx, metadata); err != nil {
		return err
	}
	return store.Delete(ctx, snapshot, snapshot+zstdSuffix)
}

// URL is where key is: s3://<bucket>/<prefix>/<key>.
func (s *Store) URL(key string) string { return "s3://" + s.bucket + "/" + s.objectName(key) }
