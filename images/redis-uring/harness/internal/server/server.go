// Package server starts, inspects and kills Valkey/Redis server processes for
// the harness. Each server runs in its own process group so that SIGKILL also
// takes any rewrite/save child with it, and only our own processes are hit.
package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/cleanup"
	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/resp"
)

// Binaries are the tools of one server build; valkey-* names are preferred,
// redis-* names accepted (a stock Redis works for developing the harness).
type Binaries struct {
	Dir, Server, CLI, Benchmark, CheckAOF string
}

// FindBinaries resolves the tools in dir.
func FindBinaries(dir string) (Binaries, error) {
	b := Binaries{Dir: dir}
	find := func(names ...string) string {
		for _, n := range names {
			p := filepath.Join(dir, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p
			}
		}
		return ""
	}
	b.Server = find("valkey-server", "redis-server")
	b.CLI = find("valkey-cli", "redis-cli")
	b.Benchmark = find("valkey-benchmark", "redis-benchmark")
	b.CheckAOF = find("valkey-check-aof", "redis-check-aof")
	if b.Server == "" {
		return b, fmt.Errorf("no valkey-server or redis-server in %s (set SERVER_BIN_DIR)", dir)
	}
	if b.CheckAOF == "" {
		// valkey-check-aof is the server binary run under another name.
		b.CheckAOF = b.Server
	}
	return b, nil
}

// Options describe one server instance.
type Options struct {
	Bin      Binaries
	Mode     Mode
	DataDir  string   // dir: AOF/RDB live here (the volume under test)
	StateDir string   // config and log: outside the volume, they survive a cut
	Name     string   // file-name prefix in StateDir
	Extra    []string // further config lines
	Port     int      // 0 picks a free port
}

// Server is a running server process.
type Server struct {
	Opts    Options
	Addr    string
	Cmd     *exec.Cmd
	LogPath string
	exited  chan struct{}
	waitErr error
	undo    cleanup.Handle
}

// Start writes the config, launches the server and waits until it answers
// PING (after loading its data).
func Start(o Options) (*Server, error) {
	if o.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		o.Port = p
	}
	if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(o.StateDir, o.Name+".conf")
	logPath := filepath.Join(o.StateDir, o.Name+".log")
	listen := []string{"port " + strconv.Itoa(o.Port)}
	if ServeTLS != nil {
		listen = ServeTLS.configLines(o.Port)
	}
	lines := append([]string{"bind 127.0.0.1"}, listen...)
	lines = append(lines,
		"daemonize no",
		"dir "+o.DataDir,
		"logfile "+logPath,
		// Rewrites happen when a test asks for them, not when a size
		// threshold is crossed mid-measurement.
		"auto-aof-rewrite-percentage 0",
	)
	lines = append(lines, o.Mode.ConfigLines()...)
	lines = append(lines, o.Extra...)
	if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	s := &Server{Opts: o, Addr: fmt.Sprintf("127.0.0.1:%d", o.Port), LogPath: logPath, exited: make(chan struct{})}
	stderr, err := os.OpenFile(logPath+".stderr", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s.Cmd = exec.Command(o.Bin.Server, conf)
	s.Cmd.Stdout, s.Cmd.Stderr = stderr, stderr
	s.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var startMu sync.Mutex // Start and the undo step never interleave
	startMu.Lock()
	s.undo = cleanup.Register("server "+o.Name, func() error {
		startMu.Lock()
		defer startMu.Unlock()
		if s.Cmd.Process != nil {
			s.Kill()
		}
		return nil
	})
	err = s.Cmd.Start()
	startMu.Unlock()
	if err != nil {
		s.undo.Forget()
		stderr.Close()
		return nil, err
	}
	go func() {
		s.waitErr = s.Cmd.Wait()
		stderr.Close()
		close(s.exited)
	}()
	if err := s.waitReady(60 * time.Second); err != nil {
		s.Kill()
		return nil, fmt.Errorf("server %s (%s) did not start: %w\n%s", o.Name, o.Mode.Name, err, s.LogTail(15))
	}
	return s, nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("exited: %v", s.waitErr)
		default:
		}
		c, err := s.dial(time.Second)
		if err == nil {
			_, last = c.Do("PING")
			c.Close()
			if last == nil {
				return nil
			}
		} else {
			last = err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("timeout: %v", last)
}

// StartReplica starts a server replicating from primary (REPLICAOF in its
// config) and waits until it streams with its AOF on and its first rewrite
// done (before that a replica reports no AOF fsync, so a primary with
// aof-uring-ack-replicas would only hold its writes), and the primary counts
// it online.
func StartReplica(o Options, primary *Server) (*Server, error) {
	o.Extra = append(append([]string(nil), o.Extra...), "replicaof "+strings.Replace(primary.Addr, ":", " ", 1))
	r, err := Start(o)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ri, err := r.Info("all")
		if err == nil {
			var pi map[string]string
			if pi, err = primary.Info("replication"); err == nil && ri["master_link_status"] == "up" &&
				ri["aof_rewrite_in_progress"] == "0" && ri["aof_rewrite_scheduled"] == "0" &&
				(ri["aof_enabled"] == "1" || o.Mode.Persistence != "aof") && strings.Contains(pi["slave0"], "state=online") {
				return r, nil
			}
		}
		if time.Now().After(deadline) {
			r.Kill()
			return nil, fmt.Errorf("replica %s not online after 60 s (%v)\n%s", o.Name, err, r.LogTail(10))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.Cmd.Process.Pid }

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// ExitErr is the process's exit status, valid after Exited is closed.
func (s *Server) ExitErr() error { return s.waitErr }

// Kill sends SIGKILL to the server's process group and waits for the exit.
func (s *Server) Kill() {
	select {
	case <-s.exited:
	default:
		syscall.Kill(-s.Cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	s.undo.Forget()
}

// Freeze stops every thread of the server's process group with SIGSTOP and
// waits until each has stopped. A thread inside a system call stops when the
// call returns, so once Freeze returns the server can send nothing more: a
// reply a client reads later was written to the socket before the freeze.
// io_uring's kernel-side threads (iou-wrk-*, iou-sqp-*) ignore SIGSTOP and
// are not waited for; without the main thread nothing reaps their work.
func (s *Server) Freeze(timeout time.Duration) error {
	syscall.Kill(-s.Cmd.Process.Pid, syscall.SIGSTOP)
	deadline := time.Now().Add(timeout)
	for {
		running, err := s.runningThreads()
		if err != nil || running == "" {
			return nil // gone or all stopped
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server threads still running %v after SIGSTOP: %s", timeout, running)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads lists threads (other than io_uring's) not yet stopped.
func (s *Server) runningThreads() (string, error) {
	dir := fmt.Sprintf("/proc/%d/task", s.Cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var running []string
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		st := string(data)
		open, close := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || close+2 >= len(st) {
			continue
		}
		comm, state := st[open+1:close], st[close+2]
		if strings.HasPrefix(comm, "iou-") || strings.ContainsRune("TtZX", rune(state)) {
			continue
		}
		running = append(running, fmt.Sprintf("%s/%s:%c", e.Name(), comm, state))
	}
	return strings.Join(running, " "), nil
}

// Stop asks for a clean shutdown (SIGTERM: final AOF flush+fsync) and waits;
// it falls back to Kill after timeout.
func (s *Server) Stop(timeout time.Duration) error {
	syscall.Kill(s.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.exited:
		// Reap a leftover rewrite child, if any.
		syscall.Kill(-s.Cmd.Process.Pid, syscall.SIGKILL)
		s.undo.Forget()
		return nil
	case <-time.After(timeout):
		s.Kill()
		return errors.New("clean shutdown timed out; killed")
	}
}

// Dial opens a new client connection.
func (s *Server) Dial() (*resp.Conn, error) { return s.dial(5 * time.Second) }

func (s *Server) dial(timeout time.Duration) (*resp.Conn, error) {
	if ServeTLS != nil {
		return resp.DialTLS(s.Addr, timeout, ServeTLS.Client)
	}
	return resp.Dial(s.Addr, timeout)
}

// Info returns INFO <section> as a map.
func (s *Server) Info(section string) (map[string]string, error) {
	c, err := s.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	txt, _, err := c.String("INFO", section)
	if err != nil {
		return nil, err
	}
	return ParseInfo(txt), nil
}

// ParseInfo turns INFO text into field -> value.
func ParseInfo(txt string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(txt))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// LogTail returns the last n lines of the server log and its stderr.
func (s *Server) LogTail(n int) string {
	var b strings.Builder
	for _, p := range []string{s.LogPath, s.LogPath + ".stderr"} {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(p), strings.Join(lines, "\n"))
	}
	return b.String()
}

// FreePort asks the kernel for an unused loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
