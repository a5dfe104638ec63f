package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Capabilities are what the binary under test supports.
type Capabilities struct {
	Version string
	// UringSkip is empty when the uring engine's options exist, otherwise the
	// reason every uring mode is reported as skipped.
	UringSkip string
}

// Probe starts a throw-away server without persistence and asks it which
// options it knows.
func Probe(bin Binaries, workDir string) (Capabilities, error) {
	dir := filepath.Join(workDir, "probe")
	defer os.RemoveAll(dir)
	s, err := Start(Options{Bin: bin, Mode: None, DataDir: dir, StateDir: dir, Name: "probe"})
	if err != nil {
		return Capabilities{}, err
	}
	defer s.Kill()
	var caps Capabilities
	info, err := s.Info("server")
	if err != nil {
		return caps, err
	}
	caps.Version = info["valkey_version"]
	if caps.Version == "" {
		caps.Version = "redis " + info["redis_version"]
	}
	c, err := s.Dial()
	if err != nil {
		return caps, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var missing []string
	for _, opt := range []string{"appendfsync-engine", "aof-uring-ack"} {
		v, err := c.Do("CONFIG", "GET", opt)
		if err != nil {
			return caps, err
		}
		if arr, _ := v.([]any); len(arr) == 0 {
			missing = append(missing, opt)
		}
	}
	if len(missing) > 0 {
		caps.UringSkip = fmt.Sprintf("server %s (%s) does not know %s", caps.Version, bin.Server, strings.Join(missing, ", "))
	}
	return caps, nil
}

// CheckEngine verifies that a uring-mode server really runs the uring
// engine. The engine falls back to posix when io_uring is unavailable; a
// test that believes it measured uring while posix ran would be a lie.
func (s *Server) CheckEngine() error {
	if !s.Opts.Mode.Uring {
		return nil
	}
	info, err := s.Info("all")
	if err != nil {
		return err
	}
	active, ok := info["aof_uring_active"]
	if !ok {
		return nil // build predates the INFO field; the option was accepted
	}
	if active != "1" {
		return fmt.Errorf("uring engine not active (aof_engine=%s, fallback reason %q)",
			info["aof_engine"], info["aof_uring_fallback_reason"])
	}
	if sq, ok := info["aof_uring_sqpoll"]; ok && (sq == "1") != s.Opts.Mode.SQPoll {
		return fmt.Errorf("aof_uring_sqpoll is %s, mode %s wants SQPOLL %v", sq, s.Opts.Mode.Name, s.Opts.Mode.SQPoll)
	}
	if ack, ok := info["aof_uring_ack"]; ok && ack != s.Opts.Mode.Ack {
		return fmt.Errorf("aof_uring_ack is %s, mode %s wants %s", ack, s.Opts.Mode.Name, s.Opts.Mode.Ack)
	}
	return nil
}
