package resp

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// fakeServer answers each request with the next canned reply and sends the
// requests it decoded on got.
func fakeServer(t *testing.T, replies ...string) (addr string, got chan [][]any) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got = make(chan [][]any, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		var reqs [][]any
		defer func() { got <- reqs }()
		for _, rep := range replies {
			// A request is an array of bulk strings: the reply parser reads it.
			req, err := readReply(r)
			if err != nil {
				return
			}
			reqs = append(reqs, req.([]any))
			c.Write([]byte(rep))
		}
	}()
	return l.Addr().String(), got
}

func TestDoRepliesAndEncoding(t *testing.T) {
	addr, got := fakeServer(t,
		"+OK\r\n",
		"$5\r\nhello\r\n",
		"$-1\r\n",
		":42\r\n",
		"-MISCONF disk full\r\n",
		"*3\r\n$1\r\na\r\n$-1\r\n:7\r\n",
	)
	c, err := Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, err := c.Do("SET", "k", "v\r\nx"); v != "OK" || err != nil {
		t.Errorf("SET: %v %v", v, err)
	}
	if s, ok, err := c.String("GET", "k"); s != "hello" || !ok || err != nil {
		t.Errorf("GET: %q %v %v", s, ok, err)
	}
	if s, ok, err := c.String("GET", "missing"); s != "" || ok || err != nil {
		t.Errorf("GET missing: %q %v %v", s, ok, err)
	}
	if n, err := c.Int("INCR", "c"); n != 42 || err != nil {
		t.Errorf("INCR: %v %v", n, err)
	}
	_, err = c.Do("SET", "k", "v")
	if !IsServerError(err) || !strings.HasPrefix(err.Error(), "MISCONF") {
		t.Errorf("error reply: %v", err)
	}
	vals, present, err := c.MGet([]string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if vals[0] != "a" || !present[0] || present[1] || present[2] {
		t.Errorf("MGET: %q %v", vals, present)
	}
	reqs := <-got
	if len(reqs) != 6 || len(reqs[0]) != 3 || reqs[0][2] != "v\r\nx" || reqs[5][3] != "c" {
		t.Errorf("requests not encoded as binary-safe bulk strings: %q", reqs)
	}
}

func TestTransportErrorIsNotServerError(t *testing.T) {
	addr, _ := fakeServer(t) // accepts, then closes at once
	c, err := Dial(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Do("PING")
	if err == nil || IsServerError(err) {
		t.Errorf("closed connection gave %v", err)
	}
}
