// Package tlsclient builds the TLS configuration the operator and the
// benchmark runner reach a server with, from the PEM files of a
// kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt).
//
// The server's certificate is verified against ca.crt, not against a host
// name: the operator reaches every server by its pod IP and the runner by a
// Service name, and neither need be in the certificate. That is the check
// the servers themselves (replication), valkey-cli and valkey-benchmark make.
package tlsclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Config verifies the server's certificate chain against caPEM and, when
// certPEM and keyPEM are set, presents them as the client's certificate
// (for servers with tls-auth-clients yes).
func Config(caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("ca.crt holds no PEM certificate")
	}
	config := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is verified in VerifyConnection, without a host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, roots)
		},
	}
	if len(certPEM) > 0 || len(keyPEM) > 0 {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("tls.crt and tls.key: %w", err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config, nil
}

func verifyChain(chain []*x509.Certificate, roots *x509.CertPool) error {
	if len(chain) == 0 {
		return errors.New("the server presented no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates}); err != nil {
		return fmt.Errorf("the server's certificate is not signed by ca.crt: %w", err)
	}
	return nil
}
