package server

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/uring-redis/uring-redis-operator/images/redis-uring/harness/internal/resp"
)

// The generated set works the way the servers use it: a listener with the
// servers' files that requires client certificates from the CA accepts the
// harness' client, and refuses a client without a certificate.
func TestTLSCertificatesAuthenticateBothSides(t *testing.T) {
	tl, err := NewTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(tl.Cert, tl.Key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(tl.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				if _, err := c.Read(buf); err == nil { // completes the handshake
					_, _ = c.Write([]byte("+PONG\r\n"))
				}
			}()
		}
	}()
	c, err := resp.DialTLS(l.Addr().String(), 5*time.Second, tl.Client)
	if err != nil {
		t.Fatalf("the harness client was refused: %v", err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if v, err := c.Do("PING"); v != "PONG" || err != nil {
		t.Errorf("PING over TLS: %v, %v", v, err)
	}
	_ = c.Close()

	anon := tl.Client.Clone()
	anon.Certificates = nil
	if c, err := resp.DialTLS(l.Addr().String(), 5*time.Second, anon); err == nil {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Do("PING"); err == nil {
			t.Error("a client without a certificate was served")
		}
		_ = c.Close()
	}

	lines := tl.configLines(6390)
	for _, want := range []string{"port 0", "tls-port 6390", "tls-auth-clients yes", "tls-replication yes",
		"tls-cert-file " + tl.Cert, "tls-key-file " + tl.Key, "tls-ca-cert-file " + tl.CA} {
		if !slices.Contains(lines, want) {
			t.Errorf("config lacks %q: %q", want, lines)
		}
	}
}
