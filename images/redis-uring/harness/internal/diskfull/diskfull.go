// Package diskfull fills the AOF's filesystem and checks the contract:
// writes are refused with an error (or, for posix `always`, the server stops
// as upstream documents), reads keep being served, the AOF on disk stays
// valid, writes resume once space is freed, and no acknowledged write is lost.
// In durable mode the write that hit the full disk is not answered until it
// is on disk: it must be answered OK once space is freed.
package diskfull

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/loopfs"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/resp"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/server"
)

// Config of one disk-full check.
type Config struct {
	Bin        server.Binaries
	WorkDir    string
	LogDir     string // server configs and logs, kept after the run
	Mode       server.Mode
	FSSizeMiB  int // the whole filesystem
	BallastMiB int // a file deleted to free space
	ValueSize  int
}

// Outcome is what happened.
type Outcome struct {
	Mode         string `json:"mode"`
	AckedBefore  int    `json:"acked_before_full"`
	Refusal      string `json:"refusal,omitempty"`
	ServerExited bool   `json:"server_exited"`
	HeldWrite    bool   `json:"held_write"`
	ReadsServed  bool   `json:"reads_served_while_full"`
	ResumeMs     int64  `json:"resume_ms_after_free"`
	AckedAfter   int    `json:"acked_after_free"`
	CheckAOF     string `json:"check_aof"`
	Lost         int    `json:"lost"`
	Corrupt      int    `json:"corrupt"`
}

const (
	postFreeWrites = 100
	resumeTimeout  = 15 * time.Second
	heldAfter      = 5 * time.Second
)

func key(prefix string, i int) string { return prefix + strconv.Itoa(i) }

func value(k string, size int) string { return k + ":" + strings.Repeat("v", size) }

// Run performs the check; a nil error means the contract held.
func Run(cfg Config) (Outcome, error) {
	o := Outcome{Mode: cfg.Mode.Name}
	name := "diskfull-" + cfg.Mode.Name
	fs, err := loopfs.Create(cfg.WorkDir, name, cfg.FSSizeMiB)
	if err != nil {
		return o, err
	}
	defer fs.Close()
	ballast := filepath.Join(fs.Mount, "ballast")
	if err := writeBallast(ballast, cfg.BallastMiB); err != nil {
		return o, err
	}
	opts := server.Options{Bin: cfg.Bin, Mode: cfg.Mode, Name: name,
		DataDir: filepath.Join(fs.Mount, "data"), StateDir: filepath.Join(cfg.LogDir, name)}
	srv, err := server.Start(opts)
	if err != nil {
		return o, err
	}
	defer func() { srv.Kill() }()
	if err := srv.CheckEngine(); err != nil {
		return o, err
	}
	c, err := srv.Dial()
	if err != nil {
		return o, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))

	// Fill with one writer, so "acknowledged" is exact. A durable engine
	// holds the reply of the write that hit ENOSPC until that write is on
	// disk: a reply that does not come within heldAfter means held, and a
	// second connection then sees the refusal.
	limit := (cfg.FSSizeMiB << 20) / cfg.ValueSize * 4
	var held chan error
	for i := 0; held == nil; i++ {
		if i == limit {
			return o, fmt.Errorf("%d writes of %d bytes were all accepted on a %d MiB filesystem", i, cfg.ValueSize, cfg.FSSizeMiB)
		}
		k := key("df:", i)
		done := make(chan error, 1)
		go func() { _, err := c.Do("SET", k, value(k, cfg.ValueSize)); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(heldAfter):
			held, o.HeldWrite = done, true
			continue
		}
		if err == nil {
			o.AckedBefore++
			continue
		}
		if resp.IsServerError(err) {
			o.Refusal = err.Error()
		} else {
			select {
			case <-srv.Exited():
				o.ServerExited = true
			case <-time.After(5 * time.Second):
				return o, fmt.Errorf("write failed without an error reply and the server kept running: %v", err)
			}
		}
		break
	}

	if o.ServerExited {
		if !(cfg.Mode.Persistence == "aof" && !cfg.Mode.Uring && cfg.Mode.Fsync == "always") {
			return o, fmt.Errorf("server exited on a full disk instead of refusing writes:\n%s", srv.LogTail(10))
		}
		// Upstream `always` cannot un-send replies already buffered, so it
		// stops; the check is that nothing acknowledged was lost and it
		// comes back once there is space.
		if err := os.Remove(ballast); err != nil {
			return o, err
		}
	} else {
		probe, err := srv.Dial()
		if err != nil {
			return o, err
		}
		defer probe.Close()
		probe.SetDeadline(time.Now().Add(2 * time.Minute))
		if held != nil {
			_, err := probe.Do("SET", "df:probe", "x")
			if !resp.IsServerError(err) {
				return o, fmt.Errorf("a write was held %v but another client's write got %v, not a refusal", heldAfter, err)
			}
			o.Refusal = err.Error()
		}
		if err := whileFull(cfg, probe, &o); err != nil {
			return o, err
		}
		if err := os.Remove(ballast); err != nil {
			return o, err
		}
		if held != nil {
			// The held write must complete, successfully, once space is back.
			select {
			case err := <-held:
				if err != nil {
					return o, fmt.Errorf("the held write failed after space was freed: %w", err)
				}
				o.AckedBefore++
			case <-time.After(resumeTimeout):
				return o, fmt.Errorf("the held write got no reply %v after space was freed", resumeTimeout)
			}
		}
		if err := awaitResume(cfg, probe, &o); err != nil {
			return o, err
		}
	}
	if cfg.Mode.Durable() {
		srv.Kill() // nothing acknowledged may depend on a clean shutdown
	} else if err := srv.Stop(30 * time.Second); err != nil {
		return o, err
	}

	if o.CheckAOF, err = checkAOF(cfg.Bin, opts.DataDir); err != nil {
		return o, err
	}
	opts.Name = name + "-restart"
	srv, err = server.Start(opts)
	if err != nil {
		return o, fmt.Errorf("restart after disk full: %w", err)
	}
	if err := verify(cfg, srv, &o); err != nil {
		return o, err
	}
	if o.Lost > 0 || o.Corrupt > 0 {
		return o, fmt.Errorf("%d acknowledged writes lost, %d corrupt after restart", o.Lost, o.Corrupt)
	}
	return o, nil
}

// whileFull checks that the refusal is sticky and that reads still work.
func whileFull(cfg Config, c *resp.Conn, o *Outcome) error {
	if !strings.HasPrefix(o.Refusal, "MISCONF") && !strings.HasPrefix(o.Refusal, "ERR") {
		return fmt.Errorf("unexpected refusal %q (want MISCONF or ERR)", o.Refusal)
	}
	if _, err := c.Do("SET", "df:refused", "x"); !resp.IsServerError(err) {
		return fmt.Errorf("a second write while the disk is full got %v, want an error reply", err)
	}
	if o.AckedBefore > 0 {
		k := key("df:", 0)
		v, ok, err := c.String("GET", k)
		if err != nil || !ok || v != value(k, cfg.ValueSize) {
			return fmt.Errorf("read while the disk is full: ok=%v err=%v", ok, err)
		}
		o.ReadsServed = true
	}
	return nil
}

// awaitResume polls with a write until the server accepts writes again,
// then writes a few more keys that must survive too.
func awaitResume(cfg Config, c *resp.Conn, o *Outcome) error {
	freed := time.Now()
	for {
		_, err := c.Do("SET", "df:resume", value("df:resume", 16))
		if err == nil {
			break
		}
		if !resp.IsServerError(err) {
			return fmt.Errorf("after freeing space: %w", err)
		}
		if time.Since(freed) > resumeTimeout {
			return fmt.Errorf("writes still refused %v after freeing space: %v", resumeTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	o.ResumeMs = time.Since(freed).Milliseconds()
	for i := 0; i < postFreeWrites; i++ {
		k := key("df:post:", i)
		if _, err := c.Do("SET", k, value(k, 1024)); err != nil {
			return fmt.Errorf("write %d after resuming: %w", i, err)
		}
		o.AckedAfter++
	}
	return nil
}

func checkAOF(bin server.Binaries, dataDir string) (string, error) {
	manifests, _ := filepath.Glob(filepath.Join(dataDir, "appendonlydir", "*.manifest"))
	if len(manifests) != 1 {
		return "", fmt.Errorf("want one AOF manifest in %s, found %d", dataDir, len(manifests))
	}
	cmd := exec.Command(bin.CheckAOF, manifests[0])
	if bin.CheckAOF == bin.Server {
		cmd.Args[0] = "valkey-check-aof"
	}
	out, err := cmd.CombinedOutput()
	summary := strings.TrimSpace(string(out))
	if i := strings.LastIndex(summary, "\n"); i >= 0 {
		summary = summary[i+1:]
	}
	if err != nil {
		return summary, fmt.Errorf("check-aof: %v: %s", err, out)
	}
	return summary, nil
}

func verify(cfg Config, srv *server.Server, o *Outcome) error {
	c, err := srv.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	check := func(k string, size int) error {
		v, ok, err := c.String("GET", k)
		switch {
		case err != nil:
			return err
		case !ok:
			o.Lost++
		case v != value(k, size):
			o.Corrupt++
		}
		return nil
	}
	for i := 0; i < o.AckedBefore; i++ {
		if err := check(key("df:", i), cfg.ValueSize); err != nil {
			return err
		}
	}
	for i := 0; i < o.AckedAfter; i++ {
		if err := check(key("df:post:", i), 1024); err != nil {
			return err
		}
	}
	if o.AckedAfter > 0 {
		return check("df:resume", 16)
	}
	// The server stopped: it must accept writes again after the restart.
	if _, err := c.Do("SET", "df:resume", "x"); err != nil {
		return fmt.Errorf("write after restart with free space: %w", err)
	}
	return nil
}

func writeBallast(path string, mib int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = 0xa5
	}
	for i := 0; i < mib; i++ {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(f.Sync(), f.Close())
}
