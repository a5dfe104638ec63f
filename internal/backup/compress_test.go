package backup

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// A backup taken with zstd is stored as dump.rdb.zst, a zstd stream smaller
// than the RDB in it, and restores as the uncompressed one does: every key,
// value and TTL. DeleteBackup deletes it.
func TestCompressedTakeAndRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objects := testenv.StartObjectStore(t)
	source := testenv.StartServer(t, durableConfig)
	c := redis.NewClient(&redis.Options{Addr: source})
	defer func() { _ = c.Close() }()
	want := writeDataset(t, c)

	d := destination(objects, "team/cache")
	d.Compression = CompressionZstd
	m, err := Take{Source: Source{Addr: source}, Destination: d, Backup: "nightly", Instance: "cache", Mode: "uring"}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Location != "s3://"+objects.Bucket+"/team/cache/backups/nightly/dump.rdb.zst" || m.Compression != "zstd" || m.RDBSize <= m.Size {
		t.Fatalf("metadata %+v: want dump.rdb.zst, compressed, smaller than its RDB", m)
	}
	t.Logf("the snapshot: %d bytes of RDB stored as %d (%.2fx)", m.RDBSize, m.Size, float64(m.RDBSize)/float64(m.Size))
	store := open(t, destination(objects, "team/cache"))
	var stored bytes.Buffer
	if _, err := store.Get(ctx, "backups/nightly/dump.rdb.zst", &stored, m.SHA256); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(stored.Bytes(), zstdMagic) {
		t.Fatalf("the stored snapshot begins with %q, not a zstd frame", stored.Bytes()[:8])
	}

	dir := t.TempDir()
	if ok, err := (Restore{Destination: destination(objects, ""), Location: m.Location, SHA256: m.SHA256, Backup: "nightly", DataDir: dir, AOF: true}).Run(ctx); !ok || err != nil {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	restored := redis.NewClient(&redis.Options{Addr: testenv.RunServer(t, dir, durableConfig).Addr})
	defer func() { _ = restored.Close() }()
	compareDataset(t, restored, want)

	if err := DeleteBackup(ctx, store, "nightly"); err != nil {
		t.Fatal(err)
	}
	if left, err := store.List(ctx, "backups/"); err != nil || len(left) != 0 {
		t.Fatalf("after DeleteBackup the store holds %v (%v)", left, err)
	}
}

// An archive written with zstd stores its INCR segments as zstd frames, a
// new archiver on the volume adopts them from the store, and a restore
// reads them: the restored server has every key archived.
func TestCompressedArchive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objects := testenv.StartObjectStore(t)
	dir := t.TempDir()
	server := testenv.RunServer(t, dir, timestampedDurableConfig)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = c.Close() }()
	d := destination(objects, "team/cache")
	d.Compression = CompressionZstd
	newArchiver := func() *Archiver {
		return &Archiver{Source: Source{Addr: server.Addr}, Destination: d, DataDir: dir, Interval: time.Hour, Log: t.Logf}
	}
	archiver := newArchiver()
	writeGroup(t, c, 0)
	startOfNextSecond()
	if err := archiver.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	id := archiver.timeline.ID
	store := open(t, destination(objects, "team/cache"))
	timeline, err := store.GetBytes(ctx, timelineKey(id))
	if err != nil {
		t.Fatal(err)
	}

	// The next pass's timeline.json is lost: a new archiver adopts its
	// segment from the store, reading it back through the decompressor.
	writeGroup(t, c, 1)
	startOfNextSecond()
	if err := archiver.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.PutBytes(ctx, timelineKey(id), timeline); err != nil {
		t.Fatal(err)
	}
	writeGroup(t, c, 2)
	startOfNextSecond()
	if err := newArchiver().Sync(ctx); err != nil {
		t.Fatal(err)
	}

	segments, err := store.List(ctx, incrDir(id, 1)+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(segments) != 3 {
		t.Fatalf("INCR file 1 has %d segments, want one a pass: %v", len(segments), segments)
	}
	for _, s := range segments {
		b, err := store.GetBytes(ctx, s.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, zstdMagic) {
			t.Errorf("segment %s begins with %q, not a zstd frame", s.Key, b[:min(8, len(b))])
		}
	}

	restored := t.TempDir()
	location := "s3://" + objects.Bucket + "/team/cache"
	if ok, err := (ArchiveRestore{Destination: destination(objects, ""), Location: location, DataDir: restored}).Run(ctx); !ok || err != nil {
		t.Fatalf("restoring the latest: %v, %v", ok, err)
	}
	checkGroups(t, testenv.RunServer(t, restored, timestampedDurableConfig).Addr, 0, 1, 2)
}
