// Package resp is a minimal RESP2 client. The harness needs exact
// acknowledgement semantics (a reply read means acknowledged, nothing is ever
// retried behind our back), so it speaks the protocol itself instead of using
// a pooled, retrying client library.
package resp

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ServerError is a RESP error reply ("-ERR ...", "-MISCONF ..."): the server
// answered and refused. Transport failures are returned as other error types.
type ServerError string

func (e ServerError) Error() string { return string(e) }

// IsServerError reports whether err is an error reply from the server.
func IsServerError(err error) bool {
	var se ServerError
	return errors.As(err, &se)
}

// Conn is one connection; it is not safe for concurrent use.
type Conn struct {
	nc net.Conn
	r  *bufio.Reader
	w  *bufio.Writer
}

// Dial connects to addr (host:port).
func Dial(addr string, timeout time.Duration) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return newConn(nc), nil
}

// DialTLS connects to addr and completes a TLS handshake with cfg, both
// within timeout.
func DialTLS(addr string, timeout time.Duration, cfg *tls.Config) (*Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return newConn(nc), nil
}

func newConn(nc net.Conn) *Conn {
	return &Conn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10)}
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// SetDeadline bounds every later read and write; zero means none.
func (c *Conn) SetDeadline(t time.Time) error { return c.nc.SetDeadline(t) }

// Do sends one command and reads its reply.
func (c *Conn) Do(args ...string) (any, error) {
	c.Send(args...)
	if err := c.Flush(); err != nil {
		return nil, err
	}
	return c.Receive()
}

// Send buffers one command; Flush writes everything buffered.
func (c *Conn) Send(args ...string) {
	c.w.WriteString("*")
	c.w.WriteString(strconv.Itoa(len(args)))
	c.w.WriteString("\r\n")
	for _, a := range args {
		c.w.WriteString("$")
		c.w.WriteString(strconv.Itoa(len(a)))
		c.w.WriteString("\r\n")
		c.w.WriteString(a)
		c.w.WriteString("\r\n")
	}
}

// Flush writes the buffered commands.
func (c *Conn) Flush() error { return c.w.Flush() }

// Receive reads one reply: string (simple or bulk), int64, nil (null bulk or
// array), []any, or a ServerError as the error.
func (c *Conn) Receive() (any, error) { return readReply(c.r) }

func readReply(r *bufio.Reader) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, fmt.Errorf("resp: empty line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, ServerError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("resp: bad bulk length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("resp: bad array length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(r)
			if err != nil && !IsServerError(err) {
				return nil, err
			}
			if err != nil {
				v = err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("resp: unexpected type byte %q", line[0])
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return "", fmt.Errorf("resp: line without CRLF: %q", line)
	}
	return line[:len(line)-2], nil
}

// String runs a command whose reply is a string (or nil -> "", false).
func (c *Conn) String(args ...string) (string, bool, error) {
	v, err := c.Do(args...)
	if err != nil {
		return "", false, err
	}
	switch t := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return t, true, nil
	}
	return "", false, fmt.Errorf("resp: %s: unexpected reply %T", args[0], v)
}

// Int runs a command whose reply is an integer.
func (c *Conn) Int(args ...string) (int64, error) {
	v, err := c.Do(args...)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("resp: %s: unexpected reply %T", args[0], v)
	}
	return n, nil
}

// MGet returns the values of keys; a missing key is ("", false).
func (c *Conn) MGet(keys []string) ([]string, []bool, error) {
	v, err := c.Do(append([]string{"MGET"}, keys...)...)
	if err != nil {
		return nil, nil, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != len(keys) {
		return nil, nil, fmt.Errorf("resp: MGET: unexpected reply %T", v)
	}
	vals := make([]string, len(keys))
	present := make([]bool, len(keys))
	for i, e := range arr {
		if s, ok := e.(string); ok {
			vals[i], present[i] = s, true
		}
	}
	return vals, present, nil
}
