package backup

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Source is the server a snapshot is taken from.
type Source struct {
	Addr string
	// TLS, when set, is the configuration to reach a server that serves
	// TLS only (tls-port, port 0).
	TLS *tls.Config
	// Username and Password sign in with AUTH when either is set: the
	// backup user (BackupUser, with BackupUserRules), or default's password
	// when Username is empty.
	Username, Password string
}

// Snapshot describes an RDB that FetchRDB streamed.
type Snapshot struct {
	// Size and SHA256 (lowercase hex) are of the RDB as written to w.
	Size   int64
	SHA256 string
	// ServerVersion is INFO's valkey_version.
	ServerVersion string
	// Role is INFO's role: master or slave.
	Role string
	// ReplID and ReplOffset are the server's replication ID and offset at
	// the fork, from its +FULLRESYNC: the point of the replication stream
	// the snapshot holds.
	ReplID     string
	ReplOffset int64
	// TakenAt is when +FULLRESYNC arrived, this machine's clock: the server
	// sends it as it forks the child that writes the snapshot, so the
	// snapshot holds the writes acknowledged before TakenAt and none after
	// it (but for the network's delay). When the server joins a snapshot it
	// was already taking for a replica (disk-based replication), that
	// snapshot began earlier.
	TakenAt time.Time
}

// BackupUser is the ACL user the backup agent signs in as.
const BackupUser = "uringredis-backup"

// BackupUserRules are the backup user's rules, after "user <BackupUser> on
// ><password>": the commands FetchRDB sends and nothing else, no key and no
// channel (TestFetchRDBRefusals takes each away). AUTH needs no permission;
// PSYNC and REPLCONF are in no ACL category (only @all holds them), so they
// are named. No rule narrows what the snapshot holds: whoever may PSYNC
// reads every key. The rules the operator gives the user on the servers
// (specs.ACLEnv renders them) must grant at least these.
func BackupUserRules() string {
	return "resetkeys resetchannels -@all +info +replconf +psync"
}

// silenceLimit is how long FetchRDB waits for a byte from the server. It
// is generous: the server sends a newline every second while it forks and
// writes a disk-based snapshot, and a diskless one streams as it is
// written, so a server silent this long is stuck or gone.
var silenceLimit = 60 * time.Second

// rdbEOFMarkSize is the length of the random mark that ends a diskless
// snapshot (RDB_EOF_MARK_SIZE in src/replication.c).
const rdbEOFMarkSize = 40

// FetchRDB takes a snapshot of the server at src as valkey-cli --rdb does,
// and streams it to w while it checks it (see VerifyRDB): it signs in, reads
// the server's version and role from INFO, asks for the RDB alone (REPLCONF
// capa eof, REPLCONF rdb-only 1) and sends PSYNC ? -1. The server answers
// +FULLRESYNC <replid> <offset> as it forks, sends newlines while the child
// writes a disk-based snapshot, then the RDB: "$<length>\r\n" and the file
// (disk-based), or "$EOF:<mark>\r\n", the RDB as the child writes it and
// the mark (diskless, repl-diskless-sync yes). The server closes the
// connection after the RDB: an rdb-only replica gets no command stream, and
// the server keeps no output buffer for it.
//
// Any error, even after some bytes reached w, means w holds no valid
// snapshot: the caller discards what it wrote. Cancelling ctx closes the
// connection; a server silent for 60 s (no byte, no newline) is an error.
func FetchRDB(ctx context.Context, src Source, w io.Writer) (Snapshot, error) {
	conn, err := dial(ctx, src)
	if err != nil {
		return Snapshot{}, fmt.Errorf("connecting to %s: %w", src.Addr, err)
	}
	defer func() { _ = conn.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	s := &replicaSession{conn: conn}
	s.r = bufio.NewReaderSize(deadlineReader{conn}, 64<<10)
	snap, err := s.fetch(src, w)
	if err != nil {
		if ctx.Err() != nil {
			return Snapshot{}, fmt.Errorf("fetching the RDB from %s: %w", src.Addr, context.Cause(ctx))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("the server sent nothing for %s: %w", silenceLimit, err)
		}
		return Snapshot{}, fmt.Errorf("fetching the RDB from %s: %w", src.Addr, err)
	}
	return snap, nil
}

// dialRetry is how long dial keeps trying a server that refuses a connection
// or does not answer it. A new pod's first connections can be refused for a
// moment while a NetworkPolicy enforcer learns its address (kube-router: about
// a second, measured on the kind test bed), and a server that is restarting
// refuses them too; an agent that gave up at once would fail its Job.
var dialRetry = 30 * time.Second

// dial connects to src, retrying refusals and timeouts for dialRetry with a
// backoff from 200 ms to 2 s. Other errors (a bad certificate, a name that
// does not resolve) and ctx's end return at once.
func dial(ctx context.Context, src Source) (net.Conn, error) {
	deadline := time.Now().Add(dialRetry)
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		conn, err := dialOnce(ctx, src)
		if err == nil || ctx.Err() != nil || !retryable(err) || time.Now().Add(wait).After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

func dialOnce(ctx context.Context, src Source) (net.Conn, error) {
	if src.TLS != nil {
		d := &tls.Dialer{Config: src.TLS}
		return d.DialContext(ctx, "tcp", src.Addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", src.Addr)
}

func retryable(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || (errors.As(err, &ne) && ne.Timeout())
}

// deadlineReader gives every read of the connection silenceLimit to return
// something: bytes and keepalive newlines alike push the deadline back.
type deadlineReader struct{ conn net.Conn }

func (d deadlineReader) Read(p []byte) (int, error) {
	if err := d.conn.SetReadDeadline(time.Now().Add(silenceLimit)); err != nil {
		return 0, err
	}
	return d.conn.Read(p)
}

// replicaSession speaks to the server as a replica that wants only the RDB.
type replicaSession struct {
	conn net.Conn
	r    *bufio.Reader
}

func (s *replicaSession) fetch(src Source, w io.Writer) (Snapshot, error) {
	var snap Snapshot
	if err := s.signIn(src); err != nil {
		return snap, err
	}
	info, err := s.info("server", "replication")
	if err != nil {
		return snap, err
	}
	snap.ServerVersion = cmp.Or(info["valkey_version"], info["redis_version"])
	snap.Role = info["role"]
	for _, args := range [][]string{{"REPLCONF", "capa", "eof"}, {"REPLCONF", "rdb-only", "1"}} {
		if err := s.command(args...); err != nil {
			return snap, err
		}
	}
	if snap.ReplID, snap.ReplOffset, err = s.fullResync(); err != nil {
		return snap, err
	}
	snap.TakenAt = time.Now()

	v := newRDBVerifier()
	if err := s.payload(io.MultiWriter(v, snapshotWriter{w})); err != nil {
		if v.err != nil {
			return snap, v.err
		}
		return snap, err
	}
	if err := v.finish(); err != nil {
		return snap, err
	}
	snap.Size, snap.SHA256 = v.size, v.sum()
	s.awaitClose()
	return snap, nil
}

// signIn sends AUTH when src has a user or a password.
func (s *replicaSession) signIn(src Source) error {
	if src.Username == "" && src.Password == "" {
		return nil
	}
	args := []string{"AUTH", src.Password}
	if src.Username != "" {
		args = []string{"AUTH", src.Username, src.Password}
	}
	if err := s.command(args...); err != nil {
		return fmt.Errorf("signing in as %s: %w", cmp.Or(src.Username, "default"), err)
	}
	return nil
}

// goodbyeLimit bounds awaitClose.
const goodbyeLimit = 5 * time.Second

// awaitClose waits for the server to close the connection, as it does
// once it has reaped the child that wrote the snapshot. Closing first
// would make the server, on losing its last diskless replica, kill a child
// that had finished, and log the snapshot as failed ("Background RDB
// transfer terminated by signal 10").
func (s *replicaSession) awaitClose() {
	if s.conn.SetReadDeadline(time.Now().Add(goodbyeLimit)) == nil {
		_, _ = io.Copy(io.Discard, s.conn)
	}
}

// command sends args and expects +OK.
func (s *replicaSession) command(args ...string) error {
	if err := s.send(args...); err != nil {
		return err
	}
	line, err := s.line()
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if err := replyError(args, line); err != nil {
		return err
	}
	if line != "+OK" {
		return fmt.Errorf("%s replied %q, not +OK", strings.Join(args[:min(len(args), 2)], " "), line)
	}
	return nil
}

// info reads INFO's sections as key: value.
func (s *replicaSession) info(sections ...string) (map[string]string, error) {
	args := append([]string{"INFO"}, sections...)
	if err := s.send(args...); err != nil {
		return nil, err
	}
	line, err := s.line()
	if err != nil {
		return nil, fmt.Errorf("INFO: %w", err)
	}
	if err := replyError(args, line); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimPrefix(line, "$"))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return nil, fmt.Errorf("INFO replied %q, not a bulk string", line)
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(s.r, body); err != nil {
		return nil, fmt.Errorf("INFO: %w", err)
	}
	info := map[string]string{}
	for _, l := range strings.Split(string(body[:n]), "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			info[k] = v
		}
	}
	return info, nil
}

// fullResync sends PSYNC ? -1, which no history matches, and reads the
// history and offset of the snapshot the server starts. PSYNC rather than
// valkey-cli's SYNC: the server answers SYNC with nothing before the RDB
// itself, which for a disk-based snapshot is after the child wrote all of
// it, whereas +FULLRESYNC comes at the fork and names the point the
// snapshot holds.
func (s *replicaSession) fullResync() (replID string, offset int64, err error) {
	args := []string{"PSYNC", "?", "-1"}
	if err := s.send(args...); err != nil {
		return "", 0, err
	}
	line, err := s.lineAfterKeepalives()
	if err != nil {
		return "", 0, fmt.Errorf("PSYNC: %w", err)
	}
	if err := replyError(args, line); err != nil {
		return "", 0, err
	}
	fields := strings.Fields(line)
	if len(fields) != 3 || fields[0] != "+FULLRESYNC" {
		return "", 0, fmt.Errorf("PSYNC replied %q, not +FULLRESYNC <replid> <offset>", line)
	}
	offset, err = strconv.ParseInt(fields[2], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("PSYNC replied %q: the offset is not a number", line)
	}
	return fields[1], offset, nil
}

// payload copies the RDB that follows +FULLRESYNC to w.
func (s *replicaSession) payload(w io.Writer) error {
	line, err := s.lineAfterKeepalives()
	if err != nil {
		return fmt.Errorf("waiting for the RDB: %w", err)
	}
	if err := replyError([]string{"PSYNC"}, line); err != nil {
		return err // e.g. the server could not fork: -ERR BGSAVE failed
	}
	if mark, ok := strings.CutPrefix(line, "$EOF:"); ok {
		if len(mark) != rdbEOFMarkSize {
			return fmt.Errorf("the diskless RDB's end mark %q is not %d bytes", mark, rdbEOFMarkSize)
		}
		return s.copyUntilMark(w, []byte(mark))
	}
	size, err := strconv.ParseInt(strings.TrimPrefix(line, "$"), 10, 64)
	if !strings.HasPrefix(line, "$") || err != nil || size < 0 {
		return fmt.Errorf("the server sent %q where the RDB's length belongs", line)
	}
	n, err := io.CopyN(w, s.r, size)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("the connection ended after %d of the RDB's %d bytes", n, size)
	}
	return err
}

// copyUntilMark copies a diskless RDB to w, holding back the last
// rdbEOFMarkSize bytes read until more arrive: the stream ends where they
// are the mark, and the mark is not part of the RDB.
func (s *replicaSession) copyUntilMark(w io.Writer, mark []byte) error {
	buf := make([]byte, rdbEOFMarkSize+64<<10)
	held, copied := 0, int64(0)
	for {
		n, err := s.r.Read(buf[held:])
		held += n
		if held >= rdbEOFMarkSize && n > 0 && bytes.Equal(buf[held-rdbEOFMarkSize:held], mark) {
			_, werr := w.Write(buf[:held-rdbEOFMarkSize])
			return werr
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("the connection ended after %d bytes of the diskless RDB, before its end mark", copied+int64(held))
			}
			return err
		}
		if out := held - rdbEOFMarkSize; out > 0 {
			if _, err := w.Write(buf[:out]); err != nil {
				return err
			}
			copied += int64(out)
			held = copy(buf, buf[out:held])
		}
	}
}

func (s *replicaSession) send(args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := s.conn.SetWriteDeadline(time.Now().Add(silenceLimit)); err != nil {
		return err
	}
	if _, err := io.WriteString(s.conn, b.String()); err != nil {
		return fmt.Errorf("sending %s: %w", args[0], err)
	}
	return nil
}

// line reads one reply line, without its CRLF.
func (s *replicaSession) line() (string, error) {
	l, err := s.r.ReadSlice('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(l), "\r\n"), nil
}

// lineAfterKeepalives reads the next line that is not one of the newlines
// the server sends a replica every second before the RDB starts.
func (s *replicaSession) lineAfterKeepalives() (string, error) {
	for {
		l, err := s.line()
		if err != nil || l != "" {
			return l, err
		}
	}
}

// replyError is the server's error reply in line, nil if it is none. A
// refusal by the ACL says which rules the backup user needs.
func replyError(args []string, line string) error {
	msg, ok := strings.CutPrefix(line, "-")
	if !ok {
		return nil
	}
	if strings.HasPrefix(msg, "NOPERM") {
		return fmt.Errorf("%s refused: %s (the backup user needs the rules %q)", args[0], msg, BackupUserRules())
	}
	return fmt.Errorf("%s refused: %s", args[0], msg)
}

// snapshotWriter is the caller's w, named in its errors.
type snapshotWriter struct{ w io.Writer }

func (s snapshotWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		err = fmt.Errorf("writing the snapshot: %w", err)
	}
	return n, err
}
