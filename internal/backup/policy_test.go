package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestDocumentedPolicies runs every use the agent and the operator make of
// the store with keys whose only rights are the two IAM policies of
// docs/backup.md's "Least privilege", as written there, enforced by
// SeaweedFS's policy engine: the instance's key (shop/cache read-write)
// takes a backup, archives, prunes and reads and deletes as the operator
// does; the recovering instance's key (shop-dr/cache read-write, shop/cache
// read-only) finds and restores the backup and the archive and writes its
// own path. What the policies leave out is refused.
func TestDocumentedPolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	policies := documentedPolicies(t)
	objects := testenv.StartObjectStoreWithIdentities(t,
		testenv.Identity{AccessKey: "instance", SecretKey: "instance-secret", Policy: policies[0]},
		testenv.Identity{AccessKey: "recovering", SecretKey: "recovering-secret", Policy: policies[1]})
	if objects.Bucket != testBucket {
		t.Fatalf("the test store's bucket is %s, not the %s the policies were given", objects.Bucket, testBucket)
	}
	as := func(key, prefix string) Destination {
		d := destination(objects, prefix)
		d.AccessKey, d.SecretKey = key, key+"-secret"
		return d
	}
	// The archiver logs, and does not return, a prune that failed.
	logOrFail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		t.Log(msg)
		if strings.Contains(msg, "failed") {
			t.Errorf("the archiver: %s", msg)
		}
	}

	dir := t.TempDir()
	server := testenv.RunServer(t, dir, timestampedDurableConfig)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	defer func() { _ = c.Close() }()
	var ahead time.Duration
	archiver := &Archiver{Source: Source{Addr: server.Addr}, Destination: as("instance", "shop/cache"), DataDir: dir, Interval: time.Hour,
		PruneEvery: time.Nanosecond, MaxAge: time.Hour, Now: func() time.Time { return time.Now().Add(ahead) }, Log: logOrFail}
	pass := func() {
		t.Helper()
		startOfNextSecond()
		if err := archiver.Sync(ctx); err != nil {
			t.Fatalf("an archive pass with the instance's key: %v", err)
		}
	}

	// The instance: the backup Job, the archive container, the operator.
	writeGroup(t, c, 0)
	pass()
	m, err := Take{Source: Source{Addr: server.Addr}, Destination: as("instance", "shop/cache"), Backup: "nightly", Instance: "cache", Mode: "uring"}.Run(ctx)
	if err != nil {
		t.Fatalf("a backup with the instance's key: %v", err)
	}
	startOfNextSecond()
	rewriteAOF(t, c)
	writeGroup(t, c, 1)
	pass()
	operator := open(t, as("instance", "shop/cache"))
	archive, err := ReadArchive(ctx, operator)
	if err != nil || len(archive.Timelines) != 1 || len(archive.Timelines[0].Bases) != 2 {
		t.Fatalf("the operator reads the archive with the instance's key: %v, %s; want one timeline with two bases", err, baseCounts(archive))
	}
	// The archive's clock moves past the second base by MaxAge: the prune
	// deletes the first base and its INCR file.
	ahead = time.Until(archive.Timelines[0].Bases[1].Time.Add(time.Hour + time.Second))
	pass()
	if archive, err = ReadArchive(ctx, operator); err != nil || len(archive.Timelines) != 1 || len(archive.Timelines[0].Bases) != 1 {
		t.Fatalf("after a prune with the instance's key: %v, %s; want the second base alone", err, baseCounts(archive))
	}
	if n, err := CountBackups(ctx, operator); n != 1 || err != nil {
		t.Fatalf("the operator counts %d backups (%v), want 1", n, err)
	}

	// The recovering instance: the operator finds the backup, the restore
	// containers read the snapshot and the archive, the instance writes its
	// own path.
	source := open(t, as("recovering", "shop/cache"))
	if found, err := FindBackup(ctx, source, ""); err != nil || found.SHA256 != m.SHA256 {
		t.Fatalf("the operator finds %+v (%v) with the recovering key, want the backup nightly", found, err)
	}
	if _, err := ReadArchive(ctx, source); err != nil {
		t.Fatalf("the operator reads the archive with the recovering key: %v", err)
	}
	restored := t.TempDir()
	if ok, err := (Restore{Destination: as("recovering", ""), Location: m.Location, SHA256: m.SHA256, Backup: "nightly", DataDir: restored, AOF: true}).Run(ctx); !ok || err != nil {
		t.Fatalf("restoring the snapshot with the recovering key: %v, %v", ok, err)
	}
	checkGroups(t, testenv.RunServer(t, restored, timestampedDurableConfig).Addr, 0)
	recovered := t.TempDir()
	if ok, err := (ArchiveRestore{Destination: as("recovering", ""), Location: "s3://" + testBucket + "/shop/cache", DataDir: recovered}).Run(ctx); !ok || err != nil {
		t.Fatalf("restoring the archive with the recovering key: %v, %v", ok, err)
	}
	checkGroups(t, testenv.RunServer(t, recovered, timestampedDurableConfig).Addr, 0, 1)
	own := open(t, as("recovering", "shop-dr/cache"))
	if err := own.PutBytes(ctx, "backups/first/backup.json", []byte("{}")); err != nil {
		t.Fatalf("the recovering key writes its own path: %v", err)
	}
	if err := own.Delete(ctx, "backups/first/backup.json"); err != nil {
		t.Fatalf("the recovering key deletes in its own path: %v", err)
	}

	// What the policies leave out.
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "access denied") {
			t.Errorf("%s: %v, want access denied", what, err)
		}
	}
	refused("the recovering key uploads into the source", source.PutBytes(ctx, "backups/other/backup.json", []byte("{}")))
	refused("the recovering key deletes in the source", DeleteBackup(ctx, source, "nightly"))
	_, err = Open(ctx, as("instance", "shop-dr/cache"))
	refused("the instance's key lists another instance's path", err)
	_, err = Open(ctx, as("recovering", ""))
	refused("the recovering key lists the whole bucket", err)
	_, err = Open(ctx, as("instance", "shop"))
	refused("the instance's key lists the folder above its path", err)

	// Retention, last: the operator deletes the backup's objects.
	if err := DeleteBackup(ctx, operator, "nightly"); err != nil {
		t.Fatalf("the operator deletes a backup with the instance's key: %v", err)
	}
	if left, err := operator.List(ctx, "backups/"); err != nil || len(left) != 0 {
		t.Fatalf("after the delete the store holds %v (%v)", left, err)
	}
}

// baseCounts says how many bases each of a's timelines holds.
func baseCounts(a Archive) string {
	var counts []string
	for _, tl := range a.Timelines {
		counts = append(counts, fmt.Sprintf("timeline %s: %d bases", tl.ID, len(tl.Bases)))
	}
	return fmt.Sprint(counts)
}

// testBucket is testenv's bucket, which stands for the documentation's.
const testBucket = "backups"

// documentedPolicies are the JSON blocks of docs/backup.md's "Least
// privilege" section, the example bucket replaced by the test store's.
func documentedPolicies(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "backup.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Least privilege\n")
	if !ok {
		t.Fatal("docs/backup.md has no section Least privilege")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var policies []string
	for _, block := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(section, -1) {
		policies = append(policies, strings.ReplaceAll(block[1], "arn:aws:s3:::shop-backups", "arn:aws:s3:::"+testBucket))
	}
	if len(policies) != 2 {
		t.Fatalf("docs/backup.md's Least privilege has %d JSON policies, want the instance's and the recovering instance's", len(policies))
	}
	return policies
}
