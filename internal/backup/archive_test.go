package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// A primary's archive restores to any second it covers, across an AOF
// rewrite: a new server on the restored volume has every key written in
// that second and before it, TTLs included, and none written after. A
// replica's archiver archives nothing. A new
// archiver on the volume (a restarted pod) goes on with the timeline from
// what the store holds, even beyond its timeline.json, without rewriting
// any object. A restore is refused
// a target outside the archive and an object that is not the one archived.
func TestArchiveAndRestore(t *testing.T) {
	t.Parallel() // it spends most of its time waiting for the next second
	ctx := context.Background()
	objects := testenv.StartObjectStore(t)
	dir := t.TempDir()
	server := testenv.RunServer(t, dir, timestampedDurableConfig)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = c.Close() }()
	newArchiver := func() *Archiver {
		return &Archiver{Source: Source{Addr: server.Addr}, Destination: destination(objects, "team/cache"), DataDir: dir, Interval: time.Hour, Log: t.Logf}
	}
	archiver := newArchiver()
	pass := func(a *Archiver) {
		t.Helper()
		startOfNextSecond() // the seconds written so far are whole
		if err := a.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}

	seconds := []int64{writeGroup(t, c, 0), writeGroup(t, c, 1)}
	pass(archiver)
	startOfNextSecond()
	rewriteAOF(t, c)
	seconds = append(seconds, writeGroup(t, c, 2), writeGroup(t, c, 3))
	pass(archiver)

	// Run passes once at its start and once more when it is stopped.
	stop, ran := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- archiver.Run(stop) }()
	seconds = append(seconds, writeGroup(t, c, 4))
	startOfNextSecond()
	ran()
	if err := <-done; err != nil {
		t.Fatalf("Run's last pass: %v", err)
	}

	// A pass ships group 5 but its timeline.json is lost (the agent died
	// before it wrote it), and so is the agent's memory: a new archiver
	// adopts what the store holds beyond timeline.json.
	store := open(t, destination(objects, "team/cache"))
	stale, err := store.GetBytes(ctx, timelineKey(archiver.timeline.ID))
	if err != nil {
		t.Fatal(err)
	}
	seconds = append(seconds, writeGroup(t, c, 5))
	pass(archiver)
	if err := store.PutBytes(ctx, timelineKey(archiver.timeline.ID), stale); err != nil {
		t.Fatal(err)
	}
	before, err := store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	pass(newArchiver())
	after, err := store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range before {
		if o.Key == timelineKey(archiver.timeline.ID) {
			continue
		}
		if i := slices.IndexFunc(after, func(a ObjectInfo) bool { return a.Key == o.Key }); i < 0 || after[i] != o {
			t.Errorf("the new archiver rewrote or removed %s", o.Key)
		}
	}

	archive, err := ReadArchive(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(archive.Timelines) != 1 {
		t.Fatalf("%d timelines, want the volume's one: %+v", len(archive.Timelines), archive.Timelines)
	}
	tl := archive.Timelines[0]
	if len(tl.Bases) != 2 || len(tl.Incrs) != 2 || !tl.Incrs[0].Closed || tl.Incrs[0].LostTail || tl.Incrs[1].Closed {
		t.Fatalf("timeline %+v: want two bases, INCR 1 closed whole and INCR 2 open", tl)
	}
	first, last, ok := archive.Recoverable()
	if !ok || !first.Equal(tl.Bases[0].Time) || last.Unix() < seconds[5] {
		t.Errorf("recoverable from %s to %s (%v); want from the first base's %s to at least %d", first, last, ok, tl.Bases[0].Time, seconds[5])
	}
	for _, tc := range []struct {
		group int
		base  int64
	}{{0, 1}, {1, 1}, {2, 2}} {
		plan, err := archive.Plan(time.Unix(seconds[tc.group], 0))
		if err != nil || plan.Base.Seq != tc.base {
			t.Errorf("the plan for group %d's second: %v, %v; want base %d", tc.group, plan, err, tc.base)
		}
	}

	location := "s3://" + objects.Bucket + "/team/cache"
	restore := func(dir string, target time.Time) (bool, error) {
		return ArchiveRestore{Destination: destination(objects, ""), Location: location, Target: target, DataDir: dir}.Run(ctx)
	}
	for _, group := range []int{0, 1, 3, -1} {
		name := fmt.Sprintf("to group %d's second", group)
		if group < 0 {
			name = "to the latest"
		}
		t.Run(name, func(t *testing.T) {
			target, groups := time.Time{}, len(seconds)
			if group >= 0 {
				target, groups = time.Unix(seconds[group], 0), group+1
			}
			dir := t.TempDir()
			if restored, err := restore(dir, target); !restored || err != nil {
				t.Fatalf("restore: %v, %v", restored, err)
			}
			if restored, err := restore(dir, target); restored || err != nil {
				t.Fatalf("a second restore on the restored volume: %v, %v; want nothing done", restored, err)
			}
			if _, err := restore(dir, time.Unix(seconds[0], 0).Add(time.Hour)); !errors.Is(err, ErrVolumeHoldsData) {
				t.Errorf("another target on the restored volume: %v, want ErrVolumeHoldsData", err)
			}
			restored := testenv.RunServer(t, dir, timestampedDurableConfig)
			var want []int
			for i := range groups {
				want = append(want, i)
			}
			checkGroups(t, restored.Addr, want...)
		})
	}

	t.Run("refusals", func(t *testing.T) {
		early := time.Unix(seconds[0], 0).Add(-time.Hour)
		_, err := restore(t.TempDir(), early)
		for _, want := range []string{first.Format(time.RFC3339), last.Format(time.RFC3339)} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("a target before the first base: %v, want an error naming %s", err, want)
			}
		}

		withData := t.TempDir()
		if err := os.WriteFile(filepath.Join(withData, "dump.rdb"), []byte("theirs"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := restore(withData, time.Time{}); !errors.Is(err, ErrVolumeHoldsData) || !strings.Contains(err.Error(), "dump.rdb") {
			t.Errorf("a volume with dump.rdb: %v, want ErrVolumeHoldsData naming it", err)
		}

		// A segment replaced by another of its size, and one of another
		// size, each with the digest of what replaced it recorded beside it.
		key := segmentKey(tl.ID, tl.Incrs[0].Seq, 0)
		original, err := store.GetBytes(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		sameSize := []byte(strings.Replace(string(original), "value", "VALUE", 1))
		for _, replacement := range [][]byte{sameSize, []byte("*1\r\n$4\r\nPING\r\n")} {
			if err := store.PutBytes(ctx, key, replacement); err != nil {
				t.Fatal(err)
			}
			corrupt := t.TempDir()
			if _, err := restore(corrupt, time.Unix(seconds[0], 0)); err == nil || !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("a segment of %d bytes that is not the one archived: %v, want it refused as corrupt", len(replacement), err)
			}
			if found := dataFiles(corrupt); len(found) > 0 {
				t.Errorf("a refused restore left %v where the server loads", found)
			}
		}
	})

	t.Run("a replica archives nothing, and says so once", func(t *testing.T) {
		dir := t.TempDir()
		replica := testenv.RunServer(t, dir, timestampedDurableConfig+"replicaof "+strings.Replace(server.Addr, ":", " ", 1)+"\n")
		var mu sync.Mutex
		var logs []string
		a := &Archiver{Source: Source{Addr: replica.Addr}, Destination: destination(objects, "team/replica"), DataDir: dir, Log: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprintf(format, args...))
		}}
		for range 2 {
			if err := a.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(logs) != 1 || !strings.Contains(logs[0], "replica") {
			t.Errorf("logs %q, want one line saying the server is a replica", logs)
		}
		if objs, err := open(t, destination(objects, "team/replica")).List(ctx, ""); err != nil || len(objs) != 0 {
			t.Errorf("the store holds %v (%v), want nothing", objs, err)
		}
		if _, err := os.Stat(filepath.Join(dir, TimelineFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the replica's volume has a timeline: %v", err)
		}
	})

	t.Run("a store that refuses the credentials", func(t *testing.T) {
		d := destination(objects, "team/cache")
		d.SecretKey = "wrong"
		a := &Archiver{Source: Source{Addr: server.Addr}, Destination: d, DataDir: dir, Log: t.Logf}
		if err := a.Sync(ctx); err == nil || !strings.Contains(err.Error(), "access denied") {
			t.Errorf("Sync: %v, want an error saying access is denied", err)
		}
	})

	// A crash that takes the last writes (group 5) leaves a log that goes
	// on differently from what was archived of it.
	t.Run("a log that lost its archived tail goes into a new timeline, an INCR file deleted unread ends its chains", func(t *testing.T) {
		server.Stop(t)
		incr := lastIncr(t, dir)
		b, err := os.ReadFile(incr)
		if err != nil {
			t.Fatal(err)
		}
		scan, err := ScanAOF(b, seconds[4])
		if err != nil || scan.Cut < 0 {
			t.Fatalf("no #TS after group 4 in %s: %v", incr, err)
		}
		if err := os.Truncate(incr, int64(scan.Cut)); err != nil {
			t.Fatal(err)
		}
		restarted := testenv.RunServer(t, dir, timestampedDurableConfig)
		c := redis.NewClient(&redis.Options{Addr: restarted.Addr})
		defer func() { _ = c.Close() }()
		writeGroup(t, c, 6)
		startOfNextSecond()
		var logs []string
		a := &Archiver{Source: Source{Addr: restarted.Addr}, Destination: destination(objects, "team/cache"), DataDir: dir, Log: func(format string, args ...any) {
			logs = append(logs, fmt.Sprintf(format, args...))
		}}
		if err := a.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "archiving into a new timeline") }) {
			t.Errorf("logs %q, want one saying the archive goes into a new timeline", logs)
		}
		again, err := ReadArchive(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Timelines) != 2 || again.Timelines[0].ID != tl.ID || !again.Timelines[0].LastArchivedTime.Equal(archive.Timelines[0].LastArchivedTime) {
			t.Fatalf("timelines %+v, want the first one as it was and a new one", again.Timelines)
		}
		restoredDir := t.TempDir()
		if _, err := restore(restoredDir, time.Time{}); err != nil {
			t.Fatal(err)
		}
		restored := testenv.RunServer(t, restoredDir, timestampedDurableConfig)
		checkGroups(t, restored.Addr, 0, 1, 2, 3, 4, 6)

		// The agent is down while a rewrite deletes the INCR file it was
		// shipping: the chains through that file end where its archive
		// does, and the new base's chain goes on.
		writeGroup(t, c, 7)
		rewriteAOF(t, c)
		writeGroup(t, c, 8)
		startOfNextSecond()
		logs = nil
		restarted2 := &Archiver{Source: a.Source, Destination: a.Destination, DataDir: dir, Log: a.Log}
		if err := restarted2.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(logs, func(l string) bool { return strings.Contains(l, "was deleted before its end was archived") }) {
			t.Errorf("logs %q, want one saying the INCR file's tail is lost", logs)
		}
		again, err = ReadArchive(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		lost := again.Timelines[1].Incrs[len(again.Timelines[1].Incrs)-2]
		if !lost.Closed || !lost.LostTail {
			t.Errorf("INCR file %+v, want it closed with its tail lost", lost)
		}
		_, err = again.Plan(time.Unix(seconds[0], 0).Add(-time.Hour))
		if err == nil || !strings.Contains(err.Error(), "in the ranges") {
			t.Errorf("a target outside the archive: %v, want an error naming the ranges it covers", err)
		}
		latestDir := t.TempDir()
		if _, err := restore(latestDir, time.Time{}); err != nil {
			t.Fatal(err)
		}
		latest := testenv.RunServer(t, latestDir, timestampedDurableConfig)
		checkGroups(t, latest.Addr, 0, 1, 2, 3, 4, 6, 7, 8)
	})
}

// rewriteAOF runs BGREWRITEAOF and waits for it to finish.
func rewriteAOF(t *testing.T, c *redis.Client) {
	t.Helper()
	rewrites := infoFields(t, c, "persistence")["aof_rewrites"]
	if err := c.BgRewriteAOF(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		info := infoFields(t, c, "persistence")
		if info["aof_rewrites"] != rewrites && info["aof_rewrite_in_progress"] == "0" {
			if info["aof_last_bgrewrite_status"] != "ok" {
				t.Fatalf("the AOF rewrite failed: %v", info)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the AOF rewrite did not finish in 10 s")
}

// checkGroups checks the server at addr holds the keys of writeGroup's
// groups, and no other.
func checkGroups(t *testing.T, addr string, groups ...int) {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	var want []string
	for _, i := range groups {
		for j := range 10 {
			want = append(want, fmt.Sprintf("g%d:%d", i, j))
		}
		want = append(want, fmt.Sprintf("g%d:ttl", i))
	}
	got, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the restored server has keys %v, want %v", got, want)
	}
	for _, i := range groups {
		if v := c.Get(ctx, fmt.Sprintf("g%d:3", i)).Val(); v != fmt.Sprintf("value\x00%d\r\n3", i) {
			t.Errorf("g%d:3 is %q", i, v)
		}
		if ttl := c.TTL(ctx, fmt.Sprintf("g%d:ttl", i)).Val(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("g%d:ttl has TTL %v, want (0, 1h]", i, ttl)
		}
	}
}

// Plan chooses the latest base at or before the target among the chains
// that reach it: an older base goes on through the INCR files a rewrite
// split the log into, and a chain ends where an INCR file's tail was lost.
func TestPlan(t *testing.T) {
	at := func(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
	readAt := func(sec int64) time.Time { return time.Unix(sec, 500e6).UTC() }
	timeline := func(lost bool) Timeline {
		first := ArchivedIncr{Seq: 1, File: "appendonly.aof.1.incr.aof", Base: 1, FirstTS: 100, LastTS: 150, Closed: true, ReadAt: readAt(149)}
		if lost {
			first.LostTail, first.ReadAt = true, readAt(140)
		}
		return Timeline{
			ID: "20261127T000000Z-abcdef",
			Bases: []ArchivedBase{
				{Seq: 1, File: "appendonly.aof.1.base.rdb", Time: at(100), FirstIncr: 1},
				{Seq: 2, File: "appendonly.aof.2.base.rdb", Time: at(160), FirstIncr: 2},
			},
			Incrs: []ArchivedIncr{
				first,
				{Seq: 2, File: "appendonly.aof.2.incr.aof", Base: 2, FirstTS: 151, LastTS: 200, ReadAt: readAt(200)},
			},
			LastArchivedTime: readAt(200),
		}
	}
	for _, tc := range []struct {
		name    string
		lost    bool
		target  time.Time
		base    int64
		incrs   []int64
		wantErr string
	}{
		{name: "in the first INCR file", target: at(120), base: 1, incrs: []int64{1}},
		{name: "after the rotation, before the new base", target: at(155), base: 1, incrs: []int64{1, 2}},
		{name: "after the new base", target: at(170), base: 2, incrs: []int64{2}},
		{name: "the last second archived whole", target: at(199), base: 2, incrs: []int64{2}},
		{name: "the latest", base: 2, incrs: []int64{2}},
		{name: "the second under way", target: at(200), wantErr: "from 1970-01-01T00:01:40Z to 1970-01-01T00:03:19Z"},
		{name: "before the first base", target: at(99), wantErr: "from 1970-01-01T00:01:40Z to 1970-01-01T00:03:19Z"},
		{name: "before a lost tail", lost: true, target: at(138), base: 1, incrs: []int64{1}},
		{name: "in the hole a lost tail leaves", lost: true, target: at(150), wantErr: "in the ranges 1970-01-01T00:01:40Z..1970-01-01T00:02:19Z, 1970-01-01T00:02:40Z..1970-01-01T00:03:19Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := Archive{Timelines: []Timeline{timeline(tc.lost)}}.Plan(tc.target)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Plan(%s): %v, %v; want an error saying %q", tc.target, plan, err, tc.wantErr)
				}
				return
			}
			var incrs []int64
			for _, incr := range plan.Incrs {
				incrs = append(incrs, incr.Seq)
			}
			if err != nil || plan.Base.Seq != tc.base || !slices.Equal(incrs, tc.incrs) || plan.Latest != tc.target.IsZero() {
				t.Fatalf("Plan(%s): base %d, INCR files %v, latest %v, %v; want base %d and %v", tc.target, plan.Base.Seq, incrs, plan.Latest, err, tc.base, tc.incrs)
			}
		})
	}
}

// The instant a pass archives up to: with the uring engine, the first
// INFO's time once the durable bytes reach what was fed then; with the
// posix engine, the time of an INFO that finds the AOF buffer empty.
func TestWrittenThrough(t *testing.T) {
	first := map[string]string{"server_time_usec": "1000000", "aof_engine": "uring", "aof_uring_fed_bytes": "500", "aof_uring_durable_bytes": "300", "aof_buffer_length": "0"}
	for _, tc := range []struct {
		name   string
		first  map[string]string
		latest map[string]string
		want   int64 // unix microseconds, -1 for none yet
	}{
		{"uring, fed bytes not durable yet", first, map[string]string{"server_time_usec": "2000000", "aof_uring_durable_bytes": "499", "aof_buffer_length": "0"}, -1},
		{"uring, durable past what was fed", first, map[string]string{"server_time_usec": "2000000", "aof_uring_durable_bytes": "700", "aof_buffer_length": "200"}, 1000000},
		{"posix, a buffer to write", map[string]string{"aof_engine": "posix"}, map[string]string{"server_time_usec": "3000000", "aof_buffer_length": "12"}, -1},
		{"posix, the buffer written", map[string]string{"aof_engine": "posix"}, map[string]string{"server_time_usec": "3000000", "aof_buffer_length": "0"}, 3000000},
	} {
		got, ok := writtenThrough(tc.first, tc.latest)
		if tc.want < 0 && ok || tc.want >= 0 && (!ok || got.UnixMicro() != tc.want) {
			t.Errorf("%s: %v, %v; want %d", tc.name, got, ok, tc.want)
		}
	}
}

// A base restored from a backup holds the backup's point, older than the
// server's first start on it: the restored server's timeline covers from
// that start, so a recovery to a time between the backup and the restore
// takes another timeline (the lost instance's), never the backup replayed.
func TestRestoredBaseBeginsWithItsServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objects := testenv.StartObjectStore(t)
	source := testenv.StartServer(t, durableConfig)
	c := redis.NewClient(&redis.Options{Addr: source})
	defer func() { _ = c.Close() }()
	writeDataset(t, c)
	take := Take{Source: Source{Addr: source}, Destination: destination(objects, "team/cache"), Backup: "nightly", Instance: "cache", Mode: "uring"}
	m, err := take.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)

	dir := t.TempDir()
	restore := Restore{Destination: destination(objects, ""), Location: m.Location, SHA256: m.SHA256, Backup: "nightly", DataDir: dir, AOF: true}
	if _, err := restore.Run(ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	server := testenv.RunServer(t, dir, timestampedDurableConfig)
	archiver := &Archiver{Source: Source{Addr: server.Addr}, Destination: destination(objects, "team/restored"), DataDir: dir, Interval: time.Hour, Log: t.Logf}
	// Two passes: the chain covers whole seconds after its base's.
	for range 2 {
		startOfNextSecond()
		if err := archiver.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	archive, err := ReadArchive(ctx, open(t, destination(objects, "team/restored")))
	if err != nil {
		t.Fatal(err)
	}
	first, _, ok := archive.Recoverable()
	if !ok || first.Before(started.Truncate(time.Second)) || !m.Point.Before(started.Add(-time.Second)) {
		t.Fatalf("the restored server's archive begins at %s (ok %v); its server started at %s on a backup of %s", first, ok, started, m.Point)
	}
	if _, err := archive.Plan(m.Point.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "no archived point reaches") {
		t.Errorf("a recovery to between the backup and the restore: %v, want a refusal", err)
	}
}
