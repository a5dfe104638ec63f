package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLS is the certificate set of a run whose servers serve TLS only (the
// harness' -tls): a CA, the servers' certificate for 127.0.0.1 and a client
// certificate, as PEM files. The servers require client certificates
// (tls-auth-clients yes), the operator's strictest spec.tls, and replicas
// connect over TLS with the servers' certificate.
type TLS struct {
	CA, Cert, Key         string // files the servers are configured with
	ClientCert, ClientKey string // the client certificate, for valkey-benchmark
	Client                *tls.Config
}

// ServeTLS, when set, makes every server Start launches serve TLS only, on
// its port, and every Dial speak TLS with ServeTLS.Client. Like
// UringAppendfsync it is a setting of the whole run.
var ServeTLS *TLS

// NewTLS generates the CA and the two certificates into dir.
func NewTLS(dir string) (*TLS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "harness CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage []x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
	}
	// The servers' certificate also authenticates a replica to its primary.
	srvCert, srvKey, err := leaf(2, "redis-uring", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}
	cliCert, cliKey, err := leaf(3, "harness client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	if err != nil {
		return nil, err
	}
	t := &TLS{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key")}
	for path, data := range map[string][]byte{
		t.CA:         pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		t.Cert:       srvCert,
		t.Key:        srvKey,
		t.ClientCert: cliCert,
		t.ClientKey:  cliKey,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	t.Client = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	return t, nil
}

// configLines serve TLS only on port: the plain port is closed.
func (t *TLS) configLines(port int) []string {
	return []string{
		"port 0",
		fmt.Sprintf("tls-port %d", port),
		"tls-cert-file " + t.Cert,
		"tls-key-file " + t.Key,
		"tls-ca-cert-file " + t.CA,
		"tls-auth-clients yes",
		"tls-replication yes",
	}
}
