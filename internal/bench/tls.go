package bench

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

// TLS is how the runner reaches a server that serves TLS only (spec.tls):
// the files of the target's certificate Secret, mounted into the runner's pod.
type TLS struct {
	// CACert verifies the server's certificate.
	CACert string
	// Cert and Key are presented when the server requires client
	// certificates; empty otherwise.
	Cert, Key string

	config *tls.Config
}

// LoadTLS reads the files once; valkey-benchmark reads them itself.
func LoadTLS(caCert, cert, key string) (*TLS, error) {
	read := func(path string) ([]byte, error) {
		if path == "" {
			return nil, nil
		}
		return os.ReadFile(path)
	}
	caPEM, err := read(caCert)
	if err != nil {
		return nil, err
	}
	certPEM, err := read(cert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read(key)
	if err != nil {
		return nil, err
	}
	config, err := tlsclient.Config(caPEM, certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS files: %w", err)
	}
	return &TLS{CACert: caCert, Cert: cert, Key: key, config: config}, nil
}

// clientConfig is go-redis's TLSConfig: nil for a plain server.
func (t *TLS) clientConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return t.config
}

// toolArgs are valkey-benchmark's TLS flags (it checks the chain against
// --cacert, not the host name, like tlsclient).
func (t *TLS) toolArgs() []string {
	if t == nil {
		return nil
	}
	args := []string{"--tls", "--cacert", t.CACert}
	if t.Cert != "" {
		args = append(args, "--cert", t.Cert, "--key", t.Key)
	}
	return args
}
