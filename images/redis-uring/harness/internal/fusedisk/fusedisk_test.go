package fusedisk

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/cleanup"
)

// The model itself: after the cut, every file is what its last fsync made
// durable, whatever was written (overwritten, appended) after it.
func TestPowerCutKeepsWhatWasFlushed(t *testing.T) {
	bin := os.Getenv("FUSEDISK")
	switch {
	case os.Geteuid() != 0:
		t.Skip("needs root to mount FUSE (the harness' make targets run as root)")
	case bin == "":
		t.Skip("FUSEDISK names no fusedisk binary (make -C images/redis-uring fusedisk; the harness Makefile sets it)")
	}
	defer cleanup.All()
	const delay = 3 * time.Millisecond
	d, err := Mount(bin, t.TempDir(), "disk", delay)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	flushed := bytes.Repeat([]byte("A"), 10000)
	f, err := os.OpenFile(filepath.Join(d.Mount, "log"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(flushed); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("fsync took %v, less than the flush delay %v", took, delay)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte("B"), 100), 5000); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte("C"), 5000), 10000); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Mount, "never-synced"), []byte("gone"), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := d.PowerCut(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, syscall.EIO) {
		t.Errorf("a read after the cut: %v, want EIO", err)
	}
	f.Close()
	if err := d.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := d.Remount(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(d.Mount, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, flushed) {
		t.Errorf("after the cut the file holds %d bytes (%q...), want the %d flushed ones", len(got), got[min(len(got), 4990):min(len(got), 5010)], len(flushed))
	}
	// The namespace is durable at once; the data written into it was not.
	if got, err := os.ReadFile(filepath.Join(d.Mount, "never-synced")); err != nil || len(got) != 0 {
		t.Errorf("never-synced after the cut: %q, %v; want an empty file", got, err)
	}
}
