package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// A backup taken with Take restores with Restore, as the base of a new AOF
// (the server loads it with appendonly yes and goes on writing its AOF) and
// as dump.rdb: every key, value and TTL comes back, and what the restored
// server writes next survives its restart. A restore runs once per volume,
// never over data, and never from an object that is not the snapshot the
// backup recorded.
func TestTakeAndRestore(t *testing.T) {
	ctx := context.Background()
	store := testenv.StartObjectStore(t)
	source := testenv.StartServer(t, durableConfig)
	c := redis.NewClient(&redis.Options{Addr: source})
	defer func() { _ = c.Close() }()
	want := writeDataset(t, c)

	take := Take{Source: Source{Addr: source}, Destination: destination(store, "team/cache"), Backup: "nightly", Instance: "cache", Mode: "uring"}
	m, err := take.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Location != "s3://"+store.Bucket+"/team/cache/backups/nightly/dump.rdb" || m.ServerVersion != "8.1.1" || m.Point.IsZero() {
		t.Errorf("metadata %+v", m)
	}
	if _, err := take.Run(ctx); err == nil || !strings.Contains(err.Error(), "already holds a backup named nightly") {
		t.Errorf("a second backup of the same name: %v, want a refusal", err)
	}

	restore := func(dir string, aof bool, sha string) (bool, error) {
		return Restore{Destination: destination(store, ""), Location: m.Location, SHA256: sha, Backup: "nightly", DataDir: dir, AOF: aof}.Run(ctx)
	}
	for _, tc := range []struct {
		name   string
		aof    bool
		config string
	}{
		{"as the AOF's base", true, durableConfig},
		{"as dump.rdb", false, "appendonly no\nsave 1 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if restored, err := restore(dir, tc.aof, m.SHA256); !restored || err != nil {
				t.Fatalf("restore: %v, %v", restored, err)
			}
			if restored, err := restore(dir, tc.aof, m.SHA256); restored || err != nil {
				t.Fatalf("a second restore on the restored volume: %v, %v; want nothing done", restored, err)
			}
			s := testenv.RunServer(t, dir, tc.config)
			restoredClient := redis.NewClient(&redis.Options{Addr: s.Addr})
			defer func() { _ = restoredClient.Close() }()
			compareDataset(t, restoredClient, want)
			if err := restoredClient.Set(ctx, "after-restore", "kept", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if !tc.aof {
				if err := restoredClient.Save(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			s.Stop(t)
			s = testenv.RunServer(t, dir, tc.config)
			again := redis.NewClient(&redis.Options{Addr: s.Addr})
			defer func() { _ = again.Close() }()
			if v := again.Get(ctx, "after-restore").Val(); v != "kept" {
				t.Errorf("a write after the restore reads %q after a restart, want kept", v)
			}
		})
	}

	t.Run("refusals", func(t *testing.T) {
		withData := t.TempDir()
		if err := os.WriteFile(filepath.Join(withData, "dump.rdb"), []byte("theirs"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := restore(withData, true, m.SHA256); !errors.Is(err, ErrVolumeHoldsData) || !strings.Contains(err.Error(), "dump.rdb") {
			t.Errorf("a volume with dump.rdb: %v, want ErrVolumeHoldsData naming it", err)
		}
		if b, _ := os.ReadFile(filepath.Join(withData, "dump.rdb")); string(b) != "theirs" {
			t.Errorf("the refused restore changed dump.rdb to %q", b)
		}

		corrupt := t.TempDir()
		wrong := strings.Repeat("0", 64)
		if _, err := restore(corrupt, true, wrong); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("a snapshot whose SHA-256 is not the recorded one: %v, want it refused as corrupt", err)
		}
		if found := dataFiles(corrupt); len(found) > 0 {
			t.Errorf("a refused snapshot left %v where the server loads", found)
		}

		other := t.TempDir()
		if _, err := restore(other, true, m.SHA256); err != nil {
			t.Fatal(err)
		}
		_, err := Restore{Destination: destination(store, ""), Location: m.Location, SHA256: m.SHA256, Backup: "weekly", DataDir: other, AOF: true}.Run(ctx)
		if !errors.Is(err, ErrVolumeHoldsData) || !strings.Contains(err.Error(), "restored from nightly") {
			t.Errorf("restoring another backup onto a restored volume: %v, want a refusal naming nightly", err)
		}
	})
}
