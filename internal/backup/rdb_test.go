package backup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

const (
	appendonlyConfig = "appendonly yes\nappendfsync everysec\n"
	// durableConfig is what the operator runs for mode Uring with its
	// defaults (specs.RuntimeSettings).
	durableConfig = "appendonly yes\nappendfsync always\nappendfsync-engine uring\naof-uring-ack durable\n"
	diskBased     = "repl-diskless-sync no\n"
	diskless      = "repl-diskless-sync yes\nrepl-diskless-sync-delay 0\n"
)

// transfers are the two ways a server sends a snapshot, and what its log
// says when it starts one.
var transfers = []struct{ name, config, logLine string }{
	{"disk-based", diskBased, "Starting BGSAVE for SYNC with target: disk"},
	{"diskless", diskless, "Starting BGSAVE for SYNC with target: replicas sockets"},
}

// A snapshot taken over the network and given to a new server as its
// dbfilename brings back every key, value and TTL, in each persistence mode
// and with both ways the server can send it.
func TestFetchRDBRestores(t *testing.T) {
	for _, mode := range []struct{ name, config string }{{"appendonly", appendonlyConfig}, {"uring durable", durableConfig}} {
		for _, transfer := range transfers {
			t.Run(mode.name+" "+transfer.name, func(t *testing.T) {
				server := testenv.RunServer(t, t.TempDir(), mode.config+transfer.config)
				addr := server.Addr
				c := redis.NewClient(&redis.Options{Addr: addr})
				defer func() { _ = c.Close() }()
				want := writeDataset(t, c)

				before := time.Now()
				path, snap := fetchToFile(t, Source{Addr: addr})
				after := time.Now()
				if snap.Role != "master" || snap.ServerVersion != "8.1.1" {
					t.Errorf("role %q, version %q: want master, 8.1.1", snap.Role, snap.ServerVersion)
				}
				if snap.TakenAt.Before(before) || snap.TakenAt.After(after) {
					t.Errorf("TakenAt %v is not within the fetch, %v to %v", snap.TakenAt, before, after)
				}
				info := infoFields(t, c, "replication")
				if snap.ReplID != info["master_replid"] {
					t.Errorf("ReplID %q, the server's replid %q", snap.ReplID, info["master_replid"])
				}
				if offset, err := strconv.ParseInt(info["master_repl_offset"], 10, 64); err != nil || snap.ReplOffset > offset {
					t.Errorf("ReplOffset %d is past the server's offset %d (%v)", snap.ReplOffset, offset, err)
				}
				checkRestores(t, path, snap, want)
				checkLogSays(t, server, transfer.logLine, "rdb only replica")
			})
		}
	}
}

// A replica serves a snapshot as its primary does, and says it is one.
func TestFetchRDBFromReplica(t *testing.T) {
	primary := testenv.StartServer(t, appendonlyConfig+diskless)
	replica := testenv.StartReplica(t, primary, appendonlyConfig+diskless)
	c := redis.NewClient(&redis.Options{Addr: primary})
	defer func() { _ = c.Close() }()
	want := writeDataset(t, c)
	if n, err := c.Do(context.Background(), "WAIT", 1, 10000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}

	path, snap := fetchToFile(t, Source{Addr: replica})
	if snap.Role != "slave" {
		t.Errorf("role %q, want slave", snap.Role)
	}
	if replid := infoFields(t, c, "replication")["master_replid"]; snap.ReplID != replid {
		t.Errorf("ReplID %q, the primary's replid %q", snap.ReplID, replid)
	}
	checkRestores(t, path, snap, want)
}

// Over TLS with client certificates, the backup user with exactly
// BackupUserRules takes the snapshot.
func TestFetchRDBOverTLSAsBackupUser(t *testing.T) {
	ca := testenv.NewCA(t)
	certPEM, keyPEM := ca.Issue(t, time.Hour, "cache")
	files := t.TempDir()
	testenv.WriteTLSFiles(t, files, certPEM, keyPEM, ca.PEM)
	config := fmt.Sprintf("tls-port 6379\ntls-cert-file %[1]s/tls.crt\ntls-key-file %[1]s/tls.key\ntls-ca-cert-file %[1]s/ca.crt\n"+
		"tls-auth-clients yes\nrequirepass adminpw\nuser %s on >backuppw %s\n", files, BackupUser, BackupUserRules())
	for _, transfer := range transfers {
		t.Run(transfer.name, func(t *testing.T) {
			server := testenv.RunServer(t, t.TempDir(), durableConfig+transfer.config+config)
			addr := server.Addr
			tlsConfig, err := tlsclient.Config(ca.PEM, certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			admin := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tlsConfig, Password: "adminpw"})
			defer func() { _ = admin.Close() }()
			want := writeDataset(t, admin)

			path, snap := fetchToFile(t, Source{Addr: addr, TLS: tlsConfig, Username: BackupUser, Password: "backuppw"})
			checkRestores(t, path, snap, want)
			checkLogSays(t, server, transfer.logLine, "rdb only replica")
			if refused := testenv.ACLRefusals(t, admin); len(refused) > 0 {
				t.Errorf("the ACL refused the backup user: %q", refused)
			}
			// Without a client certificate the server does not serve it.
			noCert, err := tlsclient.Config(ca.PEM, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := FetchRDB(context.Background(), Source{Addr: addr, TLS: noCert, Username: BackupUser, Password: "backuppw"}, io.Discard); err == nil {
				t.Error("a fetch without a client certificate succeeded")
			}
		})
	}
}

// A user without the rules, or with a wrong password, gets an error that
// says what is missing, and nothing is written.
func TestFetchRDBRefusals(t *testing.T) {
	addr := testenv.StartServer(t, appendonlyConfig+"requirepass adminpw\n"+
		"user no-info on >pw resetkeys resetchannels -@all +replconf +psync\n"+
		"user no-replconf on >pw resetkeys resetchannels -@all +info +psync\n"+
		"user no-psync on >pw resetkeys resetchannels -@all +info +replconf\n")
	for _, tc := range []struct {
		desc     string
		src      Source
		wantErrs []string
	}{
		{"wrong password", Source{Addr: addr, Username: "no-psync", Password: "nope"}, []string{"signing in as no-psync", "WRONGPASS"}},
		{"no password", Source{Addr: addr}, []string{"INFO refused: NOAUTH"}},
		{"no INFO", Source{Addr: addr, Username: "no-info", Password: "pw"},
			[]string{"INFO refused: NOPERM", "'info'", BackupUserRules()}},
		{"no REPLCONF", Source{Addr: addr, Username: "no-replconf", Password: "pw"},
			[]string{"REPLCONF refused: NOPERM", "'replconf'", BackupUserRules()}},
		{"no PSYNC", Source{Addr: addr, Username: "no-psync", Password: "pw"},
			[]string{"PSYNC refused: NOPERM", "'psync'", BackupUserRules()}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var out bytes.Buffer
			_, err := FetchRDB(context.Background(), tc.src, &out)
			if err == nil {
				t.Fatal("the fetch succeeded")
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if out.Len() > 0 {
				t.Errorf("%d bytes written", out.Len())
			}
		})
	}
}

// A replica whose link to its primary is down refuses PSYNC, and the error
// says why.
func TestFetchRDBFromDisconnectedReplica(t *testing.T) {
	addr := testenv.StartServer(t, appendonlyConfig+"replicaof 127.0.0.1 1\n") // nothing listens on port 1
	_, err := FetchRDB(context.Background(), Source{Addr: addr}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "PSYNC refused: NOMASTERLINK") {
		t.Errorf("error %v, want PSYNC refused: NOMASTERLINK", err)
	}
}

// VerifyRDB accepts a snapshot as fetched and refuses it with one byte
// flipped, cut short, or not an RDB at all.
func TestVerifyRDB(t *testing.T) {
	addr := testenv.StartServer(t, appendonlyConfig+diskless)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	writeDataset(t, c)
	var good bytes.Buffer
	snap, err := FetchRDB(context.Background(), Source{Addr: addr}, &good)
	if err != nil {
		t.Fatal(err)
	}
	size, sha, err := VerifyRDB(bytes.NewReader(good.Bytes()))
	if err != nil || size != snap.Size || sha != snap.SHA256 {
		t.Fatalf("the snapshot as fetched: %d bytes, sha256 %s, %v; fetched %d bytes, sha256 %s", size, sha, err, snap.Size, snap.SHA256)
	}

	flipped := bytes.Clone(good.Bytes())
	flipped[len(flipped)/2] ^= 0x10
	// Cut about two thirds in, where the 9th byte from the cut is not 0xff,
	// the EOF opcode that a cut there could pass for.
	cut := len(good.Bytes()) * 2 / 3
	for good.Bytes()[cut-9] == rdbOpcodeEOF {
		cut--
	}
	truncated := good.Bytes()[:cut]
	for _, tc := range []struct {
		desc, in, wantErr string
	}{
		{"one byte flipped in the middle", string(flipped), "the RDB is corrupt: its trailer says CRC-64"},
		{"truncated", string(truncated), "the RDB is truncated or corrupt"},
		{"only its header", string(good.Bytes()[:12]), "the RDB is truncated: 12 bytes"},
		{"empty", "", "the RDB is truncated: 0 bytes"},
		{"not an RDB", "*1\r\n$4\r\nPING\r\n", `not an RDB: it starts with "*1\r\n$4\r\nP"`},
		{"RDB version 4", "REDIS0004\xff", "RDB version 4 has no checksum"},
		{"Redis's non-open-source format", "REDIS0012\xff", "RDB version 12 is a Redis format"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, err := VerifyRDB(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one that says %q", err, tc.wantErr)
			}
		})
	}
}

// However the network splits a diskless transfer, the RDB comes out whole,
// without its end mark, and verified: the real snapshot, replayed in reads
// of 1 to 50 bytes.
func TestRDBSplitReads(t *testing.T) {
	addr := testenv.StartServer(t, appendonlyConfig+diskless)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	writeDataset(t, c)
	var rdb bytes.Buffer
	snap, err := FetchRDB(context.Background(), Source{Addr: addr}, &rdb)
	if err != nil {
		t.Fatal(err)
	}
	mark := strings.Repeat("0123456789", 4)
	for _, size := range []int{1, 7, 8, 9, 39, 40, 41, 50} {
		stream := io.MultiReader(strings.NewReader("$EOF:"+mark+"\r\n"), bytes.NewReader(rdb.Bytes()), strings.NewReader(mark))
		s := &replicaSession{r: bufio.NewReader(chunkedReader{stream, size})}
		v := newRDBVerifier()
		var out bytes.Buffer
		if err := s.payload(io.MultiWriter(v, &out)); err != nil {
			t.Fatalf("reads of %d bytes: %v", size, err)
		}
		if err := v.finish(); err != nil {
			t.Fatalf("reads of %d bytes: %v", size, err)
		}
		if !bytes.Equal(out.Bytes(), rdb.Bytes()) || v.sum() != snap.SHA256 {
			t.Fatalf("reads of %d bytes: %d bytes out, sha256 %s; want %d, %s", size, out.Len(), v.sum(), rdb.Len(), snap.SHA256)
		}
	}
}

// chunkedReader returns at most size bytes a read.
type chunkedReader struct {
	r    io.Reader
	size int
}

func (c chunkedReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.size)]) }

// With rdbchecksum no the server ends the RDB with a checksum of 0 and
// loads it unchecked; so do FetchRDB and VerifyRDB.
func TestFetchRDBWithoutChecksum(t *testing.T) {
	addr := testenv.StartServer(t, appendonlyConfig+diskless+"rdbchecksum no\n")
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	want := writeDataset(t, c)
	path, snap := fetchToFile(t, Source{Addr: addr})
	rdb, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if trailer := rdb[len(rdb)-8:]; !bytes.Equal(trailer, make([]byte, 8)) {
		t.Fatalf("the trailer is %x, not 0", trailer)
	}
	checkRestores(t, path, snap, want)
}

// Cancelling the context stops a fetch that waits for the server: here the
// server delays a diskless snapshot by a minute and keeps the connection
// alive with newlines meanwhile.
func TestFetchRDBCancelled(t *testing.T) {
	addr := testenv.StartServer(t, appendonlyConfig+"repl-diskless-sync yes\nrepl-diskless-sync-delay 60\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := FetchRDB(ctx, Source{Addr: addr}, io.Discard)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the fetch ended before the snapshot started: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the fetch went on for a second after its context was cancelled")
	}
}

// A server that goes silent (DEBUG SLEEP stops its event loop, newlines
// included) fails the fetch after silenceLimit; the newlines it sent before
// kept the fetch waiting longer than that.
func TestFetchRDBSilentServer(t *testing.T) {
	defer func(limit time.Duration) { silenceLimit = limit }(silenceLimit)
	silenceLimit = 3 * time.Second
	addr := testenv.StartServer(t, appendonlyConfig+"repl-diskless-sync yes\nrepl-diskless-sync-delay 60\nenable-debug-command yes\n")
	done := make(chan error, 1)
	go func() {
		_, err := FetchRDB(context.Background(), Source{Addr: addr}, io.Discard)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the fetch ended while the server sent newlines: %v", err)
	case <-time.After(silenceLimit + 2*time.Second):
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -1})
	defer func() { _ = c.Close() }()
	go func() { _ = c.Do(context.Background(), "DEBUG", "SLEEP", 10).Err() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "the server sent nothing for 3s") {
			t.Errorf("error %v, want one that says the server sent nothing for 3s", err)
		}
	case <-time.After(silenceLimit + 5*time.Second):
		t.Fatal("the fetch waits on a silent server")
	}
}

// writeDataset writes strings (one of them larger than a read buffer, and
// incompressible), a hash, a list and keys with a TTL, and returns them as
// checkRestores compares them.
func writeDataset(t *testing.T, c *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{}
	pipe := c.Pipeline()
	for i := range 1000 {
		k, v := fmt.Sprintf("string:%d", i), fmt.Sprintf("value %d", i)
		pipe.Set(ctx, k, v, 0)
		want[k] = v
	}
	large := make([]byte, 300<<10)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range large {
		large[i] = byte(rng.Uint32())
	}
	pipe.Set(ctx, "large", large, 0)
	want["large"] = string(large)
	pipe.HSet(ctx, "hash", "a", "1", "b", "2", "c", "three")
	want["hash"] = "a=1 b=2 c=three"
	pipe.RPush(ctx, "list", "x", "y", "z", "x")
	want["list"] = "x y z x"
	for i := range 10 {
		k := fmt.Sprintf("ttl:%d", i)
		pipe.Set(ctx, k, "expires", time.Hour)
		want[k] = "expires ttl"
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return want
}

// fetchToFile takes a snapshot from src into a file and checks that the
// Snapshot describes the file.
func fetchToFile(t *testing.T, src Source) (string, Snapshot) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snapshot.rdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := FetchRDB(context.Background(), src, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(rdb)
	if snap.Size != int64(len(rdb)) || snap.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("Snapshot says %d bytes, sha256 %s; the file has %d, %x", snap.Size, snap.SHA256, len(rdb), sum)
	}
	if len(snap.ReplID) != 40 || snap.ReplOffset <= 0 {
		t.Errorf("ReplID %q, ReplOffset %d: want the server's 40-character replid and an offset", snap.ReplID, snap.ReplOffset)
	}
	return path, snap
}

// checkRestores starts a new server on the snapshot at path, as its
// dbfilename with appendonly no, and compares its dataset with want.
func checkRestores(t *testing.T, path string, snap Snapshot, want map[string]string) {
	t.Helper()
	if size, sha, err := VerifyRDB(openFile(t, path)); err != nil || size != snap.Size || sha != snap.SHA256 {
		t.Errorf("VerifyRDB: %d bytes, sha256 %s, %v; want %d, %s", size, sha, err, snap.Size, snap.SHA256)
	}
	dir := t.TempDir()
	if err := os.Rename(path, filepath.Join(dir, "restored.rdb")); err != nil {
		t.Fatal(err)
	}
	s := testenv.RunServer(t, dir, "appendonly no\nsave \"\"\ndbfilename restored.rdb\n")
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer func() { _ = c.Close() }()
	compareDataset(t, c, want)
}

// compareDataset compares the dataset of the server c talks to with what
// writeDataset wrote.
func compareDataset(t *testing.T, c *redis.Client, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	got := map[string]string{}
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		switch typ := c.Type(ctx, k).Val(); typ {
		case "string":
			got[k] = c.Get(ctx, k).Val()
			if strings.HasPrefix(k, "ttl:") {
				if ttl := c.TTL(ctx, k).Val(); ttl <= 0 || ttl > time.Hour {
					t.Errorf("%s: TTL %v after the restore, want (0, 1h]", k, ttl)
				}
				got[k] += " ttl"
			}
		case "hash":
			h := c.HGetAll(ctx, k).Val()
			got[k] = fmt.Sprintf("a=%s b=%s c=%s", h["a"], h["b"], h["c"])
		case "list":
			got[k] = strings.Join(c.LRange(ctx, k, 0, -1).Val(), " ")
		default:
			t.Errorf("%s: type %s", k, typ)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d keys restored, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s restored as %.40q, want %.40q", k, got[k], v)
		}
	}
}

// checkLogSays checks the server's log has each of lines, and that the
// snapshot's child was not killed when the fetch ended.
func checkLogSays(t *testing.T, s *testenv.Server, lines ...string) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if !bytes.Contains(log, []byte(l)) {
			t.Errorf("the server's log does not say %q:\n%s", l, log)
		}
	}
	if bytes.Contains(log, []byte("Background RDB transfer terminated by signal")) {
		t.Errorf("the server killed the child that wrote the snapshot:\n%s", log)
	}
}

func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func infoFields(t *testing.T, c *redis.Client, section string) map[string]string {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, l := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// Sentinel keeps every replica it sees in a primary's INFO: a backup of the
// primary that spans one of its reads (every 10 s) leaves it a replica at
// port 0 that it never reaches. It does not read replicas' lists, so a
// backup of a replica leaves nothing (see the package comment).
func TestFetchRDBSentinelSeesBackupsOfThePrimaryOnly(t *testing.T) {
	ctx := context.Background()
	primary := testenv.StartServer(t, appendonlyConfig+diskless)
	replica := testenv.StartReplica(t, primary, appendonlyConfig+diskless)
	_, port, err := net.SplitHostPort(primary)
	if err != nil {
		t.Fatal(err)
	}
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: testenv.StartSentinel(t, "sentinel monitor m 127.0.0.1 "+port+" 1\n")})
	defer func() { _ = sentinel.Close() }()
	replicas := func() []string {
		t.Helper()
		var addrs []string
		for _, r := range sentinel.Replicas(ctx, "m").Val() {
			addrs = append(addrs, r["name"])
		}
		slices.Sort(addrs)
		return addrs
	}
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(replicas(), []string{replica}) {
		if time.Now().After(deadline) {
			t.Fatalf("Sentinel knows replicas %q, not %s", replicas(), replica)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The delay keeps each backup waiting, listed, through a read of
	// Sentinel's.
	for _, addr := range []string{replica, primary} {
		c := redis.NewClient(&redis.Options{Addr: addr})
		err := c.ConfigSet(ctx, "repl-diskless-sync-delay", "12").Err()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := FetchRDB(ctx, Source{Addr: addr}, io.Discard); err != nil {
			t.Fatal(err)
		}
		want := []string{replica}
		if addr == primary {
			want = []string{"127.0.0.1:0", replica}
		}
		if got := replicas(); !slices.Equal(got, want) {
			t.Errorf("after a backup of %s, Sentinel knows replicas %q, want %q", addr, got, want)
		}
	}
}

// TestDialRetriesRefusals: a server that refuses the agent's first
// connections (as a NetworkPolicy enforcer refuses a new pod's for a moment)
// is reached once it listens; one that never does is given up after
// dialRetry, with the refusal as the error.
func TestDialRetriesRefusals(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	listening := make(chan net.Listener, 1)
	go func() {
		time.Sleep(700 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			close(listening)
			return
		}
		listening <- l
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dial(ctx, Source{Addr: addr})
	if err != nil {
		t.Fatalf("dial of a server listening 700 ms late: %v", err)
	}
	_ = conn.Close()
	if l, ok := <-listening; ok {
		_ = l.Close()
	}

	saved := dialRetry
	dialRetry = time.Second
	t.Cleanup(func() { dialRetry = saved })
	if _, err := dial(ctx, Source{Addr: addr}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial of a closed port: %v, want the refusal", err)
	}
	if ctx.Err() != nil {
		t.Fatal("dial of a closed port outlived its retry bound")
	}
}
