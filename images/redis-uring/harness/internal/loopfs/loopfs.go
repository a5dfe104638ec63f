// Package loopfs puts an ext4 filesystem on a loop device so the harness can
// cut its power (EXT4_IOC_SHUTDOWN with NOLOGFLUSH: everything not yet on the
// device is lost, as in a power cut), fill it, and remount it (journal replay).
//
// The loop device's backing file lives on the host filesystem and is never
// crashed itself: the model is a disk whose completed writes and flushes are
// durable, and whose volatile state (the ext4 page cache and un-committed
// journal) vanishes at the cut.
package loopfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/cleanup"
)

// ext4 ioctl from linux/ext4.h: _IOR('X', 125, __u32).
const (
	ext4IocShutdown          = 0x8004587d
	ext4GoingFlagsNoLogFlush = 0x2
)

// FS is one image file attached to a loop device and mounted.
type FS struct {
	mu      sync.Mutex // setup and teardown never interleave
	Image   string
	Device  string
	Mount   string
	mounted bool
	undo    cleanup.Handle
}

// Create makes an image of sizeMiB under workDir, formats it ext4, attaches
// it and mounts it. Close (or cleanup.All) undoes all of it.
func Create(workDir, name string, sizeMiB int) (*FS, error) {
	return CreateOn(workDir, workDir, name, sizeMiB)
}

// CreateOn is Create with the image in imageDir (the disk under the loop
// device, e.g. a fusedisk mount) and the mount point in workDir.
func CreateOn(imageDir, workDir, name string, sizeMiB int) (*FS, error) {
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	fs := &FS{
		Image: filepath.Join(imageDir, name+".img"),
		Mount: filepath.Join(workDir, name+".mnt"),
	}
	fs.mu.Lock()
	fs.undo = cleanup.Register("loop fs "+fs.Image, fs.teardown)
	err := fs.setup(sizeMiB)
	fs.mu.Unlock()
	if err != nil {
		fs.Close()
		return nil, err
	}
	return fs, nil
}

func (fs *FS) setup(sizeMiB int) error {
	f, err := os.OpenFile(fs.Image, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	// Allocated, not sparse: loop writes then do not allocate host blocks,
	// which would add host-filesystem work to every measured fsync.
	err = unix.Fallocate(int(f.Fd()), 0, 0, int64(sizeMiB)<<20)
	f.Close()
	if err != nil {
		return fmt.Errorf("fallocate %s: %w", fs.Image, err)
	}
	if err := fs.Attach(); err != nil {
		return err
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-E", "nodiscard", fs.Device).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %v: %s", fs.Device, err, out)
	}
	if err := os.MkdirAll(fs.Mount, 0o755); err != nil {
		return err
	}
	return fs.Remount()
}

// Attach attaches the image to a free loop device (after Detach).
func (fs *FS) Attach() error {
	if fs.Device != "" {
		return nil
	}
	out, err := exec.Command("losetup", "--find", "--show", fs.Image).CombinedOutput()
	if err != nil {
		return fmt.Errorf("losetup %s: %v: %s", fs.Image, err, out)
	}
	fs.Device = strings.TrimSpace(string(out))
	return nil
}

// Detach releases the loop device (unmount first): the image file is then
// closed, so the disk under it can be unmounted too.
func (fs *FS) Detach() error {
	if fs.Device == "" {
		return nil
	}
	if out, err := exec.Command("losetup", "--detach", fs.Device).CombinedOutput(); err != nil {
		return fmt.Errorf("losetup -d %s: %v: %s", fs.Device, err, out)
	}
	fs.Device = ""
	return nil
}

// Remount mounts the filesystem again (after Unmount); ext4 replays its
// journal here, which is what a reboot after a power cut does.
func (fs *FS) Remount() error {
	if fs.mounted {
		return nil
	}
	if err := unix.Mount(fs.Device, fs.Mount, "ext4", 0, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fs.Device, fs.Mount, err)
	}
	fs.mounted = true
	return nil
}

// Unmount unmounts, retrying briefly while the last user goes away.
func (fs *FS) Unmount() error {
	if !fs.mounted {
		return nil
	}
	var err error
	for i := 0; i < 100; i++ {
		if err = unix.Unmount(fs.Mount, 0); err == nil {
			fs.mounted = false
			return fs.awaitSuperblockGone()
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("umount %s: %w", fs.Mount, err)
}

// awaitSuperblockGone waits until the kernel has released the filesystem
// (its /sys/fs/ext4/<dev> entry disappears). Should anything still hold it,
// mounting the device again would hand back the old, shut-down superblock
// instead of replaying the journal, and every read would fail with EIO.
// The release is usually immediate, but once in 35 uring-durable cuts
// (2026-11-25, two fdatasyncs in flight at the cut) the kernel put the
// superblock 10.2 s after the umount, so the wait allows 30 s.
func (fs *FS) awaitSuperblockGone() error {
	const wait = 30 * time.Second
	sysfs := filepath.Join("/sys/fs/ext4", filepath.Base(fs.Device))
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sysfs); os.IsNotExist(err) {
			return nil
		}
	}
	return fmt.Errorf("ext4 on %s still alive %v after umount (%s exists): something outside this mount holds it", fs.Device, wait, sysfs)
}

// PowerCut shuts the filesystem down without flushing the journal: every
// later I/O fails with EIO and what was not committed to the device is gone.
func (fs *FS) PowerCut() error {
	d, err := os.Open(fs.Mount)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.IoctlSetPointerInt(int(d.Fd()), ext4IocShutdown, ext4GoingFlagsNoLogFlush); err != nil {
		return fmt.Errorf("EXT4_IOC_SHUTDOWN %s: %w", fs.Mount, err)
	}
	return nil
}

// Close unmounts, detaches and deletes the image.
func (fs *FS) Close() error { return fs.undo.Run() }

func (fs *FS) teardown() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var errs []error
	if err := fs.Unmount(); err != nil {
		// Lazy detach so the loop device can still be released.
		errs = append(errs, err, unix.Unmount(fs.Mount, unix.MNT_DETACH))
		fs.mounted = false
	}
	if err := fs.Detach(); err != nil {
		errs = append(errs, err)
	}
	os.Remove(fs.Mount)
	if err := os.Remove(fs.Image); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
