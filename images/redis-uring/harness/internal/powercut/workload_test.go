package powercut

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/resp"
)

func kindNamed(t *testing.T, name string) kind {
	t.Helper()
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	t.Fatalf("no kind %s", name)
	return kind{}
}

func TestKindsCycleByIndex(t *testing.T) {
	for i := range 3 * len(kinds) {
		if got, want := kindOf(i).name, kinds[i%len(kinds)].name; got != want {
			t.Fatalf("kindOf(%d) = %s, want %s", i, got, want)
		}
	}
	seen := map[string]bool{}
	for _, k := range kinds {
		if seen[k.name] {
			t.Errorf("kind %s listed twice", k.name)
		}
		seen[k.name] = true
		if !k.db0 && !k.db1 {
			t.Errorf("kind %s puts its key nowhere", k.name)
		}
	}
}

func TestWhereKindsPutKeys(t *testing.T) {
	tests := []struct {
		kind       string
		dbs        string
		observedDB int
	}{
		{"set", "0", 0},
		{"eval", "0", 0},
		{"eval-aof-only", "0", 0},
		{"eval-select", "1", 1},
		{"multi", "0", 0},
		{"multi-move", "1", 1},
		{"multi-copy", "0,1", 1},
		{"set-ex", "0", 0},
		{"multi-expire", "0", 0},
	}
	if len(tests) != len(kinds) {
		t.Fatalf("%d kinds, %d in this table", len(kinds), len(tests))
	}
	for i, tt := range tests {
		k := kinds[i]
		if k.name != tt.kind || k.dbs() != tt.dbs || k.observedDB() != tt.observedDB {
			t.Errorf("kinds[%d] = %s in db %s observed in db %d, want %s in db %s observed in db %d",
				i, k.name, k.dbs(), k.observedDB(), tt.kind, tt.dbs, tt.observedDB)
		}
	}
}

func TestRestored(t *testing.T) {
	tests := []struct {
		kind          string
		in0, in1      bool
		present, torn bool
	}{
		{"set", true, false, true, false},
		{"set", false, false, false, false},
		{"set", false, true, false, true},
		{"set", true, true, false, true},
		{"multi-move", false, true, true, false},
		{"multi-move", true, false, false, true}, // SET without its MOVE
		{"multi-move", false, false, false, false},
		{"multi-copy", true, true, true, false},
		{"multi-copy", true, false, false, true}, // SET without its COPY
		{"multi-copy", false, true, false, true},
		{"multi-copy", false, false, false, false},
	}
	for _, tt := range tests {
		present, torn := kindNamed(t, tt.kind).restored(tt.in0, tt.in1)
		if present != tt.present || torn != tt.torn {
			t.Errorf("%s restored(%v, %v) = present %v torn %v, want %v %v", tt.kind, tt.in0, tt.in1, present, torn, tt.present, tt.torn)
		}
	}
}

func TestParseNotification(t *testing.T) {
	tests := []struct {
		msg   any
		db    int
		key   string
		event string
		ok    bool
	}{
		{[]any{"pmessage", "__keyspace@0__:pc:*", "__keyspace@0__:pc:3:17", "set"}, 0, "pc:3:17", "set", true},
		{[]any{"pmessage", "__keyspace@1__:pc:*", "__keyspace@1__:pc:0:5", "move_to"}, 1, "pc:0:5", "move_to", true},
		// A key may itself contain "__:".
		{[]any{"pmessage", "p", "__keyspace@1__:pc:__:x", "set"}, 1, "pc:__:x", "set", true},
		{[]any{"message", "__keyspace@0__:pc:1:1", "set"}, 0, "", "", false},
		{[]any{"pmessage", "p", "__keyevent@0__:set", "pc:1:1"}, 0, "", "", false},
		{[]any{"pmessage", "p", "__keyspace@x__:pc:1:1", "set"}, 0, "", "", false},
		{[]any{"pmessage", "p", "__keyspace@0:pc:1:1", "set"}, 0, "", "", false},
		{[]any{"pmessage", "p", int64(1), "set"}, 0, "", "", false},
		{"OK", 0, "", "", false},
	}
	for _, tt := range tests {
		db, key, event, ok := parseNotification(tt.msg)
		if db != tt.db || key != tt.key || event != tt.event || ok != tt.ok {
			t.Errorf("parseNotification(%v) = %d %q %q %v, want %d %q %q %v", tt.msg, db, key, event, ok, tt.db, tt.key, tt.event, tt.ok)
		}
	}
}

func TestParseKey(t *testing.T) {
	for _, wi := range [][2]int{{0, 0}, {3, 17}, {49, 123456}} {
		w, i, ok := parseKey(key(wi[0], wi[1]))
		if !ok || w != wi[0] || i != wi[1] {
			t.Errorf("parseKey(key(%d, %d)) = %d %d %v", wi[0], wi[1], w, i, ok)
		}
	}
	for _, s := range []string{"pc:1", "pc:a:1", "pc:1:b", "x:1:2", "pc:-1:2", "pc:1:2:3", ""} {
		if _, _, ok := parseKey(s); ok {
			t.Errorf("parseKey(%q) accepted", s)
		}
	}
}

// fakeServer plays the server's part for write: SET, EVAL, MOVE and COPY
// succeed, MULTI queues until EXEC answers with every queued reply; failing
// names a command that gets an error reply instead.
func fakeServer(t *testing.T, failing string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		r := bufio.NewReader(c)
		var queued []string
		inMulti := false
		for {
			req, err := readRequest(r)
			if err != nil {
				return
			}
			var reply string
			switch cmd := req[0]; {
			case cmd == failing:
				reply = "-ERR " + cmd + " refused\r\n"
			case cmd == "MULTI":
				inMulti, queued, reply = true, nil, "+OK\r\n"
			case cmd == "EXEC":
				inMulti, reply = false, fmt.Sprintf("*%d\r\n%s", len(queued), strings.Join(queued, ""))
			case inMulti:
				queued, reply = append(queued, success(cmd)), "+QUEUED\r\n"
			default:
				reply = success(cmd)
			}
			if _, err := io.WriteString(c, reply); err != nil {
				return
			}
		}
	}()
	return l.Addr().String()
}

func success(cmd string) string {
	if cmd == "MOVE" || cmd == "COPY" || cmd == "EXPIRE" {
		return ":1\r\n"
	}
	return "+OK\r\n"
}

// readRequest reads one RESP array of bulk strings.
func readRequest(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	var n int
	if _, err := fmt.Sscanf(line, "*%d\r\n", &n); err != nil {
		return nil, err
	}
	req := make([]string, n)
	for i := range req {
		if _, err := r.ReadString('\n'); err != nil { // $<len>
			return nil, err
		}
		arg, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		req[i] = strings.TrimSuffix(arg, "\r\n")
	}
	return req, nil
}

func TestWriteAcknowledgesOnlyTheCompletingReply(t *testing.T) {
	for _, k := range kinds {
		c, err := resp.Dial(fakeServer(t, ""), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if err := k.write(c, "pc:0:0", "v"); err != nil {
			t.Errorf("%s: %v", k.name, err)
		}
		_ = c.Close()
	}
	for _, failing := range []string{"SET", "EVAL", "MULTI", "EXEC"} {
		for _, k := range kinds {
			cmds := k.commands("pc:0:0", "v")
			uses := false
			for _, cmd := range cmds {
				uses = uses || cmd[0] == failing
			}
			if !uses {
				continue
			}
			c, err := resp.Dial(fakeServer(t, failing), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			err = k.write(c, "pc:0:0", "v")
			if !resp.IsServerError(err) {
				t.Errorf("%s with %s refused: err = %v, want the error reply", k.name, failing, err)
			}
			_ = c.Close()
		}
	}
}

func TestWriteRejectsAnUnexpectedAck(t *testing.T) {
	// EXEC answering for a MULTI whose MOVE found nothing to move (":0")
	// is no acknowledgement of a key in db 1.
	k := kindNamed(t, "multi-move")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		_, _ = io.WriteString(c, "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:0\r\n")
		_, _ = io.Copy(io.Discard, c)
	}()
	c, err := resp.Dial(l.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := k.write(c, "pc:0:0", "v"); err == nil || resp.IsServerError(err) {
		t.Errorf("write = %v, want an unexpected-reply error", err)
	}
}

func TestFailoverTrialsWriteNothingKeptOffTheReplicas(t *testing.T) {
	plain, failover := Config{}, Config{Replica: true}
	sawAOFOnly := false
	for i := range 2 * len(kinds) {
		if plain.kindOf(i).name == "eval-aof-only" {
			sawAOFOnly = true
		}
		if k := failover.kindOf(i); k.name == "eval-aof-only" {
			t.Fatalf("failover kindOf(%d) = %s: the primary refuses writes kept off its replicas", i, k.name)
		}
		if plain.kindOf(i).name != "eval-aof-only" && failover.kindOf(i).name != plain.kindOf(i).name {
			t.Fatalf("failover kindOf(%d) = %s, want %s", i, failover.kindOf(i).name, plain.kindOf(i).name)
		}
	}
	if !sawAOFOnly {
		t.Fatal("plain trials never write the AOF-only kind")
	}
}

// withoutTTL flags the keys of ttl kinds that came back without an expiry,
// and asks nothing about other kinds' keys or absent ones.
func TestWithoutTTLFlagsKeysThatLostTheirExpiry(t *testing.T) {
	ttlAt := -1
	for i := range kinds {
		if kinds[i].ttl {
			ttlAt = i
			break
		}
	}
	if ttlAt < 0 {
		t.Fatal("no ttl kind")
	}
	// Keys ttlAt and ttlAt+len(kinds) are of a ttl kind and present: the
	// first keeps its expiry, the second lost it. The other ttl kinds' keys
	// are absent; every other key is present.
	n := 2*len(kinds) + ttlAt + 1
	keys := make([]string, n)
	in0 := make([]bool, n)
	for i := range keys {
		keys[i], in0[i] = key(0, i), !kindOf(i).ttl || i == ttlAt || i == ttlAt+len(kinds)
	}
	pttl := map[string]string{keys[ttlAt]: ":3599000\r\n", keys[ttlAt+len(kinds)]: ":-1\r\n"}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	asked := make(chan []string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		var got []string
		defer func() { asked <- got }()
		for {
			req, err := readRequest(r)
			if err != nil {
				return
			}
			reply := "+OK\r\n"
			if req[0] == "PTTL" {
				got = append(got, req[1])
				reply = pttl[req[1]]
			}
			if _, err := io.WriteString(c, reply); err != nil {
				return
			}
		}
	}()
	c, err := resp.Dial(l.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	noTTL, err := withoutTTL(c, Config{}, keys, 0, in0)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	for i, flagged := range noTTL {
		if want := i == ttlAt+len(kinds); flagged != want {
			t.Errorf("key %s flagged %v, want %v", keys[i], flagged, want)
		}
	}
	if got := <-asked; strings.Join(got, " ") != keys[ttlAt]+" "+keys[ttlAt+len(kinds)] {
		t.Errorf("PTTL asked for %q", got)
	}
}
