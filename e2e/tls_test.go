//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

// TestTLSInstance: an instance with spec.tls and client certificates, from a
// Secret the test makes with a CA of its own. Through the instance's Service
// a plain connection is refused and a TLS one with the certificate is served;
// a new certificate in the Secret reaches the running server (the pod keeps
// running, an in-memory key is still there) once the kubelet updates the
// mounted files.
func TestTLSInstance(t *testing.T) {
	ctx := context.Background()
	ca := testenv.NewCA(t)
	names := []string{"secure", "secure." + namespace + ".svc", "*.secure-headless." + namespace + ".svc"}
	firstCert, firstKey := ca.Issue(t, 48*time.Hour, names...)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "secure-certs", Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": firstCert, "tls.key": firstKey, "ca.crt": ca.PEM},
	}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	createWithoutStorage(t, "secure", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, TLS: &v1alpha1.TLSSpec{SecretName: "secure-certs", ClientAuth: true}})
	waitReady(t, "secure")
	waitFor(t, "secure", time.Minute, hasCondition(v1alpha1.ConditionTLSReady, metav1.ConditionTrue, "Served"))
	pod := getPod(t, "secure-0")

	// From the server's pod (its valkey-cli, the mounted files and the
	// password it carries), through the Service.
	tlsCLI := []string{"valkey-cli", "--tls", "--cacert", "/etc/redis-tls/ca.crt", "--cert", "/etc/redis-tls/tls.crt", "--key", "/etc/redis-tls/tls.key", "-h", "secure"}
	if out := refusedCLI(t, "valkey-cli", "-h", "secure", "ping"); out == "PONG" {
		t.Fatal("a plain connection was served")
	} else {
		t.Logf("a plain connection: %q", out)
	}
	if out := refusedCLI(t, "valkey-cli", "--tls", "--cacert", "/etc/redis-tls/ca.crt", "-h", "secure", "ping"); out == "PONG" {
		t.Fatal("a TLS connection without a client certificate was served")
	} else {
		t.Logf("a TLS connection without a client certificate: %q", out)
	}
	if out := podExec(t, "secure-0", "", append(tlsCLI, "set", "kept", "in memory")...); out != "OK" {
		t.Fatalf("a TLS connection with the certificate: %q", out)
	}

	// Rotation: a new certificate in the Secret, served without a restart.
	secondCert, secondKey := ca.Issue(t, 72*time.Hour, names...)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["tls.crt"], secret.Data["tls.key"] = secondCert, secondKey
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	second := parseCert(t, secondCert)
	waitFor(t, "secure", 4*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if st := rp.Status.TLS; st == nil || st.LastRotation == nil || st.NotAfter == nil || !st.NotAfter.Equal(&metav1.Time{Time: second.NotAfter}) {
			return fmt.Errorf("status.tls %+v: the new certificate is not served yet", rp.Status.TLS)
		}
		return hasCondition(v1alpha1.ConditionTLSReady, metav1.ConditionTrue, "Served")(rp)
	})
	t.Logf("the server presents the new certificate %s after the Secret changed", time.Since(start).Round(time.Second))
	if served := servedCertificate(t, ca.PEM, secondCert, secondKey); !served.Equal(second) {
		t.Errorf("through a port-forward the server presents serial %s, want the new %s", served.SerialNumber, second.SerialNumber)
	}
	after := getPod(t, "secure-0")
	if after.UID != pod.UID || after.Status.ContainerStatuses[0].RestartCount != pod.Status.ContainerStatuses[0].RestartCount {
		t.Error("the pod was replaced or its server restarted to load the new certificate")
	}
	if out := podExec(t, "secure-0", "", append(tlsCLI, "get", "kept")...); out != "in memory" {
		t.Errorf("the key set before the rotation reads %q (mode none keeps it in memory only)", out)
	}
}

// refusedCLI runs a command in secure-0's server container that may fail,
// and returns what it printed either way.
func refusedCLI(t *testing.T, command ...string) string {
	t.Helper()
	args := append(append([]string{}, kubectl[1:]...), "-n", namespace, "exec", "secure-0", "-c", "redis", "--")
	out, _ := execOutput(kubectl[0], append(args, command...)...)
	return strings.TrimSpace(out)
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// servedCertificate is the certificate secure-0 presents, read through a
// port-forward with the test's CA and client certificate.
func servedCertificate(t *testing.T, caPEM, certPEM, keyPEM []byte) *x509.Certificate {
	t.Helper()
	config, err := tlsclient.Config(caPEM, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	local, stop := portForward(t, namespace, "secure-0", 6379)
	defer stop()
	conn, err := tls.Dial("tcp", local, config)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	peer := conn.ConnectionState().PeerCertificates
	if len(peer) == 0 {
		t.Fatal(errors.New("no certificate presented"))
	}
	return peer[0]
}
