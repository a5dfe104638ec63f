package backup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// An archive outlives a failover: each server's archiver runs beside it on
// its own volume, and only the primary's ships. After the replica is
// promoted, its archiver ships its own log (the old primary's writes as it
// replicated them, then its own) into a timeline of its own, and the old
// primary's, now a replica, ships nothing more. A recovery to a second
// before the failover and one to the latest each hold exactly the writes of
// their time.
func TestArchiveAcrossFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objects := testenv.StartObjectStore(t)
	dest := destination(objects, "team/cache")

	primaryDir, replicaDir := t.TempDir(), t.TempDir()
	primary := testenv.RunServer(t, primaryDir, timestampedDurableConfig)
	replica := testenv.RunServer(t, replicaDir, timestampedDurableConfig+"replicaof "+strings.Replace(primary.Addr, ":", " ", 1)+"\n")
	pc := redis.NewClient(&redis.Options{Addr: primary.Addr})
	defer func() { _ = pc.Close() }()
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer func() { _ = rc.Close() }()
	waitReplicating(t, rc, "up")

	archivers := []*Archiver{
		{Source: Source{Addr: primary.Addr}, Destination: dest, DataDir: primaryDir, Interval: time.Hour, Log: t.Logf},
		{Source: Source{Addr: replica.Addr}, Destination: dest, DataDir: replicaDir, Interval: time.Hour, Log: t.Logf},
	}
	pass := func() {
		t.Helper()
		startOfNextSecond()
		for _, a := range archivers {
			if err := a.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	before := writeGroup(t, pc, 0)
	waitReplicated(t, pc)
	pass()
	if archivers[1].timeline != nil {
		t.Fatalf("the replica's archiver archived timeline %s", archivers[1].timeline.ID)
	}

	// The failover, as Sentinel makes it: the replica is promoted, the old
	// primary follows it.
	if err := rc.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(replica.Addr, ":")
	if err := pc.SlaveOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	waitReplicating(t, pc, "up")
	writeGroup(t, rc, 1)
	pass()
	pass() // the chain covers the seconds whole before its last pass

	archive, err := ReadArchive(ctx, open(t, dest))
	if err != nil {
		t.Fatal(err)
	}
	if len(archive.Timelines) != 2 || archivers[0].timeline != nil || archivers[1].timeline == nil {
		t.Fatalf("timelines %+v: want the old primary's and the new one's, only the new one's archiver shipping", archive.Timelines)
	}
	location := "s3://" + objects.Bucket + "/team/cache"
	for _, tc := range []struct {
		name   string
		target time.Time
		groups []int
	}{
		{"before the failover", time.Unix(before, 0), []int{0}},
		{"the latest", time.Time{}, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if ok, err := (ArchiveRestore{Destination: destination(objects, ""), Location: location, Target: tc.target, DataDir: dir}).Run(ctx); !ok || err != nil {
				t.Fatalf("restore: %v, %v", ok, err)
			}
			checkGroups(t, testenv.RunServer(t, dir, timestampedDurableConfig).Addr, tc.groups...)
		})
	}
}

// waitReplicating waits until c, a replica, reports its link to the
// primary as status (INFO replication master_link_status).
func waitReplicating(t *testing.T, c *redis.Client, status string) {
	t.Helper()
	for range 300 {
		if infoFields(t, c, "replication")["master_link_status"] == status {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the replica's link is not %s after 30 s: %v", status, infoFields(t, c, "replication"))
}

// waitReplicated waits until every replica of c, a primary, acknowledged
// its whole replication stream.
func waitReplicated(t *testing.T, c *redis.Client) {
	t.Helper()
	if n, err := c.Wait(context.Background(), 1, 10_000).Result(); err != nil || n < 1 {
		t.Fatalf("WAIT 1: %d replicas, %v", n, err)
	}
}
