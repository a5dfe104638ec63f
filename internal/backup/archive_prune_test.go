package backup

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// The archive lets go of nothing while the store holds no backup. Once it
// holds one, a pass lets go of what no recovery to that backup's point or
// after needs: another volume's timeline archived whole before it, and the
// bases and INCR files of its own timeline before its newest base at or
// before the point. A recovery to the point still restores exactly what
// was written by then.
func TestArchivePrunedBehindOldestBackup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objects := testenv.StartObjectStore(t)
	dest := destination(objects, "team/cache")
	store := open(t, dest)

	// A volume archived once, then gone (or its server made a replica).
	goneDir := t.TempDir()
	gone := testenv.RunServer(t, goneDir, timestampedDurableConfig)
	gc := redis.NewClient(&redis.Options{Addr: gone.Addr})
	defer func() { _ = gc.Close() }()
	writeGroup(t, gc, 9)
	startOfNextSecond()
	goneArchiver := &Archiver{Source: Source{Addr: gone.Addr}, Destination: dest, DataDir: goneDir, Interval: time.Hour, Log: t.Logf}
	if err := goneArchiver.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	server := testenv.RunServer(t, dir, timestampedDurableConfig)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = c.Close() }()
	archiver := &Archiver{Source: Source{Addr: server.Addr}, Destination: dest, DataDir: dir, Interval: time.Hour, PruneEvery: time.Nanosecond, Log: t.Logf}
	pass := func() {
		t.Helper()
		startOfNextSecond()
		if err := archiver.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	timelines := func() []Timeline {
		t.Helper()
		archive, err := ReadArchive(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		return archive.Timelines
	}

	writeGroup(t, c, 0)
	pass()
	rewriteAOF(t, c)
	writeGroup(t, c, 1)
	pass()
	if tls := timelines(); len(tls) != 2 || len(tls[1].Bases) != 2 || tls[1].Incrs[0].Seq != 1 {
		t.Fatalf("with no backup in the store: timelines %+v; want both, the second with both bases and INCR file 1", tls)
	}

	m, err := Take{Source: Source{Addr: server.Addr}, Destination: dest, Backup: "nightly", Instance: "cache", Mode: "uring"}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	startOfNextSecond()
	rewriteAOF(t, c)
	writeGroup(t, c, 2)
	pass()

	tls := timelines()
	if len(tls) != 1 || tls[0].ID != archiver.timeline.ID {
		t.Fatalf("timelines %+v; want the volume's own only", tls)
	}
	tl := tls[0]
	if len(tl.Bases) != 2 || tl.Bases[0].Seq != 2 || tl.Bases[0].Time.After(m.Point) || !tl.Bases[1].Time.After(m.Point) {
		t.Fatalf("bases %+v; want base 2, the newest at or before the backup's point %s, and base 3", tl.Bases, m.Point)
	}
	if tl.Incrs[0].Seq != tl.Bases[0].FirstIncr {
		t.Fatalf("INCR files %+v; want them from base 2's first, %d", tl.Incrs, tl.Bases[0].FirstIncr)
	}
	left, err := store.List(ctx, archiveDir+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range left {
		if !strings.HasPrefix(o.Key, path.Join(archiveDir, tl.ID)+"/") || o.Key == baseKey(tl.ID, 1, tl.Bases[0].File) ||
			strings.HasPrefix(o.Key, incrDir(tl.ID, 1)+"/") && tl.Bases[0].FirstIncr != 1 {
			t.Errorf("%s is still in the store", o.Key)
		}
	}
	if first, _, ok := (Archive{Timelines: tls}).Recoverable(); !ok || !first.Equal(tl.Bases[0].Time) {
		t.Errorf("recoverable from %s (%v), want base 2's %s", first, ok, tl.Bases[0].Time)
	}

	restored := t.TempDir()
	location := "s3://" + objects.Bucket + "/team/cache"
	if ok, err := (ArchiveRestore{Destination: destination(objects, ""), Location: location, Target: m.Point, DataDir: restored}).Run(ctx); !ok || err != nil {
		t.Fatalf("restoring to the backup's point: %v, %v", ok, err)
	}
	checkGroups(t, testenv.RunServer(t, restored, timestampedDurableConfig).Addr, 0, 1)
}

// With MaxAge the archive lets go of what only a recovery to a point older
// than MaxAge needs, with no backup in the store: another volume's timeline
// archived whole before now - MaxAge, and its own bases older than its
// newest base at or before then, with their INCR files. Every second from
// that base on still restores; one before it is refused, naming what the
// archive can restore. The newest base stays however old: the log after it
// needs it.
func TestArchivePrunedPastMaxAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objects := testenv.StartObjectStore(t)
	dest := destination(objects, "team/cache")
	store := open(t, dest)

	goneDir := t.TempDir()
	gone := testenv.RunServer(t, goneDir, timestampedDurableConfig)
	gc := redis.NewClient(&redis.Options{Addr: gone.Addr})
	defer func() { _ = gc.Close() }()
	writeGroup(t, gc, 9)
	startOfNextSecond()
	if err := (&Archiver{Source: Source{Addr: gone.Addr}, Destination: dest, DataDir: goneDir, Interval: time.Hour, Log: t.Logf}).Sync(ctx); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	server := testenv.RunServer(t, dir, timestampedDurableConfig)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = c.Close() }()
	// The archiver's clock runs ahead by ahead, which the test moves.
	var ahead time.Duration
	archiver := &Archiver{Source: Source{Addr: server.Addr}, Destination: dest, DataDir: dir, Interval: time.Hour, PruneEvery: time.Nanosecond,
		MaxAge: time.Hour, Now: func() time.Time { return time.Now().Add(ahead) }, Log: t.Logf}
	pass := func() {
		t.Helper()
		startOfNextSecond()
		if err := archiver.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	timelines := func() []Timeline {
		t.Helper()
		archive, err := ReadArchive(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		return archive.Timelines
	}
	restore := func(target time.Time, groups ...int) error {
		t.Helper()
		restored := t.TempDir()
		ok, err := ArchiveRestore{Destination: destination(objects, ""), Location: "s3://" + objects.Bucket + "/team/cache", Target: target, DataDir: restored}.Run(ctx)
		if err == nil && !ok {
			t.Fatalf("restoring to %s restored nothing", target)
		}
		if err == nil {
			checkGroups(t, testenv.RunServer(t, restored, timestampedDurableConfig).Addr, groups...)
		}
		return err
	}

	group0 := writeGroup(t, c, 0)
	pass()
	rewriteAOF(t, c)
	group1 := writeGroup(t, c, 1)
	pass()
	rewriteAOF(t, c)
	writeGroup(t, c, 2)
	pass()
	tls := timelines()
	if len(tls) != 2 || len(tls[1].Bases) != 3 {
		t.Fatalf("within MaxAge: timelines %+v; want both, the second with its three bases", tls)
	}
	bases := tls[1].Bases

	// now - MaxAge falls between the second base and the third: half a
	// second after the second as ahead is set, at most a pass (the wait
	// for the next second and the shipping) later at the prune.
	if gap := bases[2].Time.Sub(bases[1].Time); gap < 2*time.Second {
		t.Fatalf("the second and third bases are %s apart, want at least 2s", gap)
	}
	ahead = time.Until(bases[1].Time.Add(time.Hour + 500*time.Millisecond))
	pass()
	tls = timelines()
	if len(tls) != 1 || tls[0].ID != archiver.timeline.ID {
		t.Fatalf("timelines %+v; want the volume's own only", tls)
	}
	if kept := tls[0].Bases; len(kept) != 2 || kept[0].Seq != bases[1].Seq || kept[1].Seq != bases[2].Seq || tls[0].Incrs[0].Seq != bases[1].FirstIncr {
		t.Fatalf("bases %+v, INCR files %+v; want the second and third bases and the INCR files from the second's first", kept, tls[0].Incrs)
	}
	if first, _, ok := (Archive{Timelines: tls}).Recoverable(); !ok || !first.Equal(bases[1].Time) {
		t.Errorf("recoverable from %s (%v), want the second base's %s", first, ok, bases[1].Time)
	}
	if err := restore(time.Unix(group1, 0), 0, 1); err != nil {
		t.Errorf("restoring to group 1's second, inside what is kept: %v", err)
	}
	if err := restore(time.Unix(group0, 0)); err == nil || !strings.Contains(err.Error(), "the archive can restore from "+bases[1].Time.Format(time.RFC3339)) {
		t.Errorf("restoring to group 0's second, before what is kept: %v; want it refused, naming the second base's point", err)
	}

	// Long after: the newest base and its log stay, and restore.
	ahead = 10 * time.Hour
	writeGroup(t, c, 3)
	pass()
	if kept := timelines()[0].Bases; len(kept) != 1 || kept[0].Seq != bases[2].Seq {
		t.Fatalf("bases %+v; want the newest only", kept)
	}
	if err := restore(time.Time{}, 0, 1, 2, 3); err != nil {
		t.Errorf("restoring the latest: %v", err)
	}
}
