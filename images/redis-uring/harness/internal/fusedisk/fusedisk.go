// Package fusedisk mounts tests/tools/fusedisk: a passthrough of a directory
// that models a disk with a volatile write cache and a slow, serial cache
// flush. What was written but never fsync'ed is dropped by PowerCut, so a
// server that acknowledges a write whose flush never reached the device loses
// it here, although the backing directory sits on a host filesystem that
// never crashes (EXT4_IOC_SHUTDOWN on a loop file cannot show that: the
// backing file's page cache survives it).
package fusedisk

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/cleanup"
)

// fuseSuperMagic is statfs' f_type of a FUSE mount.
const fuseSuperMagic = 0x65735546

// Disk is one fusedisk mount and the daemon serving it.
type Disk struct {
	Mount      string
	bin        string
	backing    string
	cutDone    string
	flushDelay time.Duration
	log        string
	cmd        *exec.Cmd
	exited     chan struct{}
	undo       cleanup.Handle
}

// Mount serves workDir/name.backing at workDir/name.fuse; every fsync holds
// the device for flushDelay. Close (or cleanup.All) unmounts and deletes it.
func Mount(bin, workDir, name string, flushDelay time.Duration) (*Disk, error) {
	d := &Disk{
		Mount:      filepath.Join(workDir, name+".fuse"),
		bin:        bin,
		backing:    filepath.Join(workDir, name+".backing"),
		cutDone:    filepath.Join(workDir, name+".cut"),
		log:        filepath.Join(workDir, name+".fusedisk.log"),
		flushDelay: flushDelay,
	}
	for _, dir := range []string{d.Mount, d.backing} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	d.undo = cleanup.Register("fusedisk "+d.Mount, d.teardown)
	if err := d.Remount(); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// Remount starts the daemon again on the same backing directory (after
// Unmount): the disk after a reboot holds what was flushed before the cut.
func (d *Disk) Remount() error {
	if d.cmd != nil {
		return nil
	}
	_ = os.Remove(d.cutDone)
	logf, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	opts := fmt.Sprintf("flush_delay_us=%d,cut_done=%s", d.flushDelay.Microseconds(), d.cutDone)
	cmd := exec.Command(d.bin, d.backing, d.Mount, "-f", "-o", opts)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", d.bin, err)
	}
	d.cmd, d.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.exited)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var st unix.Statfs_t
		if unix.Statfs(d.Mount, &st) == nil && st.Type == fuseSuperMagic {
			return nil
		}
		select {
		case <-d.exited:
			d.cmd = nil
			return fmt.Errorf("fusedisk on %s exited before mounting: %s", d.Mount, d.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fusedisk on %s: not mounted after 10s: %s", d.Mount, d.logTail())
		}
	}
}

// PowerCut drops every write no fsync has covered and fails every later
// operation with EIO, until Unmount and Remount.
func (d *Disk) PowerCut() error {
	if d.cmd == nil {
		return errors.New("fusedisk: not mounted")
	}
	if err := d.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(d.cutDone); err == nil {
			return nil
		}
	}
	return fmt.Errorf("fusedisk on %s: the power cut did not complete in 30s: %s", d.Mount, d.logTail())
}

// Unmount unmounts, retrying briefly while the last user goes away, and
// waits for the daemon to exit.
func (d *Disk) Unmount() error {
	if d.cmd == nil {
		return nil
	}
	var out []byte
	var err error
	for i := 0; i < 100; i++ {
		if out, err = exec.Command("fusermount3", "-u", d.Mount).CombinedOutput(); err == nil {
			break
		}
		if !strings.Contains(string(out), "busy") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("fusermount3 -u %s: %v: %s", d.Mount, err, out)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.cmd = nil
	return nil
}

// Close unmounts (lazily if it must) and deletes the backing directory.
func (d *Disk) Close() error { return d.undo.Run() }

func (d *Disk) teardown() error {
	err := d.Unmount()
	if err != nil {
		err = errors.Join(err, unix.Unmount(d.Mount, unix.MNT_DETACH))
		if d.cmd != nil {
			_ = d.cmd.Process.Kill()
			<-d.exited
			d.cmd = nil
		}
	}
	os.Remove(d.Mount)
	os.Remove(d.cutDone)
	return errors.Join(err, os.RemoveAll(d.backing))
}

func (d *Disk) logTail() string {
	b, _ := os.ReadFile(d.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strconv.Quote(strings.Join(lines, "\n"))
}
