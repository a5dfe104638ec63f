// Package volume is the disk under a server in the power-cut trials and the
// benchmark: one of the volume classes below, each with the power cut it can
// model and the reboot after it.
package volume

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/fusedisk"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/loopfs"
)

// Kind names a volume class.
type Kind string

const (
	// Loop is ext4 on a loop device over a host file: a fast device (an
	// fdatasync of an overwrite takes about 0.25 ms here). The cut is
	// EXT4_IOC_SHUTDOWN without a log flush; the backing file's page cache
	// survives it, so a device flush that never came goes unseen.
	Loop Kind = "loop"
	// Fuse is the server's directory on fusedisk itself, no ext4: the cut
	// drops every write whose file was not fsync'ed after it (LazyFS's
	// model). It catches a write acknowledged without the filesystem being
	// asked to flush it, e.g. a direct write whose RWF_DSYNC the filesystem
	// does not honour.
	Fuse Kind = "fuse"
	// GP3 is ext4 on a loop device whose backing file is on fusedisk with a
	// serial cache flush of GP3FlushDelay: a volume with a slow flush, like
	// EBS gp3 (emulated: flushes never overlap, and the loop device's writes
	// wait while one runs, as FUSE holds the image's inode lock). The
	// cut shuts ext4 down and drops what ext4 never flushed to the device.
	GP3 Kind = "gp3"
)

// GP3FlushDelay is what every flush of a GP3 volume costs: an EBS gp3
// volume's fdatasync is about 1-2 ms.
const GP3FlushDelay = 1500 * time.Microsecond

// Kinds lists them in the order tables show them.
var Kinds = []Kind{Loop, GP3, Fuse}

// Parse checks a comma-separated list of kinds.
func Parse(list string) ([]Kind, error) {
	var ks []Kind
	for _, s := range strings.Split(list, ",") {
		k := Kind(strings.TrimSpace(s))
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("unknown volume %q (known: %v)", s, Kinds)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// Describe is a line for reports.
func (k Kind) Describe() string {
	switch k {
	case Loop:
		return "ext4 on a loop device over a host file"
	case Fuse:
		return "fusedisk (a FUSE passthrough that drops unflushed writes at the cut), no ext4"
	case GP3:
		return fmt.Sprintf("ext4 on a loop device over fusedisk with a %.1f ms serial flush (gp3-like, emulated)", GP3FlushDelay.Seconds()*1000)
	}
	return string(k)
}

// DirectDeclined is what INFO aof_uring_direct_declined_reason must end
// with on this volume: "" where the server should write batches as O_DIRECT
// writes with RWF_DSYNC (ext4, on its allow-list), the reason where it must
// not (on fusedisk itself the write reaches the daemon with no fsync after
// it).
func (k Kind) DirectDeclined() string {
	if k == Fuse {
		return "fs_fuse_not_allowed"
	}
	return ""
}

// Volume is a mounted volume of some kind.
type Volume interface {
	// Dir is where the server's files go.
	Dir() string
	// PowerCut loses what the device does not hold; every later I/O fails.
	PowerCut() error
	// Reboot mounts the volume again after a cut (ext4 replays its journal).
	Reboot() error
	// Close unmounts and deletes everything Create made.
	Close() error
}

// Options of Create. FuseDisk is the fusedisk binary (Fuse and GP3).
type Options struct {
	Kind     Kind
	WorkDir  string
	Name     string
	SizeMiB  int
	FuseDisk string
}

// Create makes a volume; Close (or cleanup.All) undoes it.
func Create(o Options) (Volume, error) {
	switch o.Kind {
	case Loop:
		fs, err := loopfs.Create(o.WorkDir, o.Name, o.SizeMiB)
		if err != nil {
			return nil, err
		}
		return loop{fs}, nil
	case Fuse:
		d, err := mountFuseDisk(o, 0)
		if err != nil {
			return nil, err
		}
		return fuse{d}, nil
	case GP3:
		d, err := mountFuseDisk(o, GP3FlushDelay)
		if err != nil {
			return nil, err
		}
		fs, err := loopfs.CreateOn(d.Mount, o.WorkDir, o.Name, o.SizeMiB)
		if err != nil {
			return nil, errors.Join(err, d.Close())
		}
		return &gp3{disk: d, fs: fs}, nil
	}
	return nil, fmt.Errorf("unknown volume kind %q", o.Kind)
}

func mountFuseDisk(o Options, delay time.Duration) (*fusedisk.Disk, error) {
	if o.FuseDisk == "" {
		return nil, fmt.Errorf("volume %s needs the fusedisk binary (-fusedisk)", o.Kind)
	}
	if _, err := os.Stat(o.FuseDisk); err != nil {
		return nil, fmt.Errorf("volume %s: %w (make -C images/redis-uring fusedisk)", o.Kind, err)
	}
	return fusedisk.Mount(o.FuseDisk, o.WorkDir, o.Name, delay)
}

type loop struct{ fs *loopfs.FS }

func (v loop) Dir() string     { return v.fs.Mount }
func (v loop) PowerCut() error { return v.fs.PowerCut() }
func (v loop) Close() error    { return v.fs.Close() }
func (v loop) Reboot() error {
	if err := v.fs.Unmount(); err != nil {
		return err
	}
	return v.fs.Remount()
}

type fuse struct{ d *fusedisk.Disk }

func (v fuse) Dir() string     { return v.d.Mount }
func (v fuse) PowerCut() error { return v.d.PowerCut() }
func (v fuse) Close() error    { return v.d.Close() }
func (v fuse) Reboot() error {
	if err := v.d.Unmount(); err != nil {
		return err
	}
	return v.d.Remount()
}

type gp3 struct {
	disk *fusedisk.Disk
	fs   *loopfs.FS
}

func (v *gp3) Dir() string { return v.fs.Mount }

// PowerCut stops ext4 first (it can then neither write nor flush), then the
// device loses its volatile cache.
func (v *gp3) PowerCut() error { return errors.Join(v.fs.PowerCut(), v.disk.PowerCut()) }

func (v *gp3) Reboot() error {
	for _, step := range []func() error{v.fs.Unmount, v.fs.Detach, v.disk.Unmount, v.disk.Remount, v.fs.Attach, v.fs.Remount} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func (v *gp3) Close() error { return errors.Join(v.fs.Close(), v.disk.Close()) }
