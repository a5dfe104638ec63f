package controllers

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

const (
	// tlsRotationRetry is how often the operator looks again while a server
	// still presents an older certificate than the Secret holds: the kubelet
	// updates a mounted Secret within its sync period (a minute by default)
	// plus its cache's TTL.
	tlsRotationRetry = 10 * time.Second

	// The reasons of the TLSReady condition.
	ReasonCertificateServed  = "Served"
	ReasonRotationPending    = "RotationPending"
	ReasonTLSSecretMissing   = "TLSSecretMissing"
	ReasonTLSSecretInvalid   = "TLSSecretInvalid"
	ReasonCertManagerMissing = "CertManagerNotInstalled"
	ReasonTLSNotServing      = "NotServing"
)

// serverCredentials are what the operator presents to a server: the
// password and, with spec.tls, the TLS configuration.
type serverCredentials struct {
	password string
	tls      *tls.Config
}

// tlsMaterial is the certificate Secret as the operator uses it.
type tlsMaterial struct {
	secretName string
	leaf       *x509.Certificate
	// hash identifies the three files; the Sentinels' template carries it.
	hash string
	// client reaches the servers: ca.crt verifies them, and with ClientAuth
	// the Secret's certificate is presented.
	client *tls.Config
	// caPEM is ca.crt, which the connection Secret hands on to applications.
	caPEM []byte
}

// tlsMaterialFrom checks that secret holds a usable certificate, its key and
// a CA. The errors name only keys, so they can go into a condition.
func tlsMaterialFrom(secret *corev1.Secret, withClientCert bool) (*tlsMaterial, error) {
	certPEM, keyPEM, caPEM := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], secret.Data[specs.CACertKey]
	for key, v := range map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, specs.CACertKey: caPEM} {
		if len(v) == 0 {
			return nil, fmt.Errorf("it has no key %s (it needs tls.crt, tls.key and ca.crt)", key)
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.crt and tls.key are not a certificate and its key: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls.crt: %w", err)
	}
	var clientCert, clientKey []byte
	if withClientCert {
		clientCert, clientKey = certPEM, keyPEM
	}
	config, err := tlsclient.Config(caPEM, clientCert, clientKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	for _, v := range [][]byte{certPEM, keyPEM, caPEM} {
		sum.Write(v)
		sum.Write([]byte{0})
	}
	return &tlsMaterial{secretName: secret.Name, leaf: leaf, hash: hex.EncodeToString(sum.Sum(nil)[:8]), client: config, caPEM: caPEM}, nil
}

// readTLS applies the Certificate of spec.tls.issuerRef and reads the
// certificate Secret. A nil material comes with the condition that says what
// is missing; the Secret watch brings the RedisPersistence back when it
// appears or changes.
func (r *RedisPersistenceReconciler) readTLS(ctx context.Context, rp *v1alpha1.RedisPersistence) (*tlsMaterial, *condition, error) {
	named := "named in spec.tls.secretName"
	if rp.Spec.TLS.IssuerRef != nil {
		if _, err := r.RESTMapper().RESTMapping(specs.CertificateGVK.GroupKind(), specs.CertificateGVK.Version); meta.IsNoMatchError(err) {
			return nil, &condition{metav1.ConditionFalse, ReasonCertManagerMissing,
				"spec.tls.issuerRef needs cert-manager, and the cluster does not serve its Certificate kind (cert-manager.io/v1); " +
					"install cert-manager, or name a Secret of yours in spec.tls.secretName"}, nil
		} else if err != nil {
			return nil, nil, fmt.Errorf("looking up the Certificate kind: %w", err)
		}
		cert := specs.Certificate(rp)
		if err := r.Patch(ctx, cert, client.Apply, client.FieldOwner(specs.FieldOwner), client.ForceOwnership); err != nil {
			r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApply", "applying Certificate %s: %v", cert.GetName(), err)
			return nil, nil, fmt.Errorf("applying Certificate %s: %w", cert.GetName(), err)
		}
		named = "of the Certificate " + specs.CertificateName(rp) + " (cert-manager has not issued it yet; see the Certificate's conditions)"
	}
	secret := &corev1.Secret{}
	name := specs.TLSSecretName(rp)
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, secret); apierrors.IsNotFound(err) {
		return nil, &condition{metav1.ConditionFalse, ReasonTLSSecretMissing, fmt.Sprintf("the Secret %s %s does not exist", name, named)}, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("reading the TLS Secret: %w", err)
	}
	material, err := tlsMaterialFrom(secret, specs.ClientAuth(rp))
	if err != nil {
		return nil, &condition{metav1.ConditionFalse, ReasonTLSSecretInvalid, fmt.Sprintf("the Secret %s %s cannot serve: %v", name, named, err)}, nil
	}
	return material, nil, nil
}

// removeCertificate deletes the Certificate the operator created for
// spec.tls.issuerRef once the spec no longer names an issuer. Only an
// instance whose status says it served cert-manager's Secret is looked at,
// so instances that never had one cost no request. cert-manager leaves its
// Secret behind; the servers stop using it.
func (r *RedisPersistenceReconciler) removeCertificate(ctx context.Context, rp *v1alpha1.RedisPersistence) error {
	if rp.Status.TLS == nil || rp.Status.TLS.SecretName != specs.CertificateName(rp) || (rp.Spec.TLS != nil && rp.Spec.TLS.IssuerRef != nil) {
		return nil
	}
	if _, err := r.RESTMapper().RESTMapping(specs.CertificateGVK.GroupKind(), specs.CertificateGVK.Version); meta.IsNoMatchError(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("looking up the Certificate kind: %w", err)
	}
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(specs.CertificateGVK)
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: specs.CertificateName(rp)}, cert); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading Certificate %s: %w", specs.CertificateName(rp), err)
	}
	if !metav1.IsControlledBy(cert, rp) {
		return nil // not ours: left alone
	}
	if err := r.Delete(ctx, cert, client.Preconditions{UID: ptr.To(cert.GetUID())}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Certificate %s: %w", specs.CertificateName(rp), err)
	}
	r.Recorder.Event(rp, corev1.EventTypeNormal, "DeletedCertificate", "spec.tls names no issuer any more: deleted the Certificate "+specs.CertificateName(rp))
	return nil
}

// servedCertificate is the certificate the server at addr presents.
func servedCertificate(ctx context.Context, addr string, config *tls.Config) (*x509.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	dialer := tls.Dialer{NetDialer: &net.Dialer{}, Config: config}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	peer := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(peer) == 0 {
		return nil, errors.New("the server presented no certificate")
	}
	return peer[0], nil
}

// reloadCertificate has the server read its certificate, key and CA files
// again: CONFIG SET of the paths it already has, all three in one command so
// that it never pairs a new certificate with an old key. A server that cannot
// load them keeps serving the old ones and answers with an error.
func reloadCertificate(ctx context.Context, addr string, creds serverCredentials) error {
	c := dialServer(addr, creds)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, serverRequestTimeout)
	defer cancel()
	files, err := c.ConfigGet(ctx, "tls-*-file").Result()
	if err != nil {
		return fmt.Errorf("CONFIG GET tls-*-file: %w", err)
	}
	args := []any{"CONFIG", "SET"}
	for _, name := range []string{"tls-cert-file", "tls-key-file", "tls-ca-cert-file"} {
		if files[name] == "" {
			return fmt.Errorf("the server has no %s", name)
		}
		args = append(args, name, files[name])
	}
	if err := c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("CONFIG SET tls-cert-file: %w", err)
	}
	return nil
}

// tlsOutcome is what serveCertificate found.
type tlsOutcome struct {
	condition condition
	// served is the certificate every running server presents, nil when
	// one still presents another or none runs.
	served *x509.Certificate
	// rotated is true when a server loaded the Secret's certificate in this
	// reconcile.
	rotated bool
	// retry is true while a server waits for the kubelet to update its files.
	retry bool
}

// serveCertificate makes every running server present the certificate the
// Secret holds, without restarting it (see the comment at the top).
func (r *RedisPersistenceReconciler) serveCertificate(ctx context.Context, rp *v1alpha1.RedisPersistence, creds serverCredentials, material *tlsMaterial) (tlsOutcome, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(rp.Namespace), client.MatchingLabels(specs.SelectorLabels(rp))); err != nil {
		return tlsOutcome{}, fmt.Errorf("listing the server pods: %w", err)
	}
	out := tlsOutcome{served: material.leaf}
	running := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !podReady(pod) || pod.Status.PodIP == "" {
			continue
		}
		running++
		addr := r.ServerAddress(pod)
		served, err := servedCertificate(ctx, addr, material.client)
		if err == nil && !served.Equal(material.leaf) {
			if err = reloadCertificate(ctx, addr, creds); err == nil {
				served, err = servedCertificate(ctx, addr, material.client)
			}
			if err == nil && served.Equal(material.leaf) {
				out.rotated = true
				log.FromContext(ctx).Info("the server loaded a new certificate", "pod", klogRef(pod), "secret", material.secretName)
			}
		}
		switch {
		case err != nil:
			log.FromContext(ctx).Info("reading the certificate a server presents failed", "pod", klogRef(pod), "err", err)
			out.served, out.retry = nil, true
			out.condition = condition{metav1.ConditionFalse, ReasonServerUnreachable,
				"the operator could not read the certificate a server presents over TLS (see the operator's log); it tries again"}
			return out, nil
		case !served.Equal(material.leaf):
			out.served, out.retry = nil, true
			out.condition = condition{metav1.ConditionFalse, ReasonRotationPending, fmt.Sprintf(
				"the Secret %s holds a new certificate; a server still presents the previous one: the kubelet has not updated its files yet (it does within about a minute of the change), and the operator has the server load them then, without a restart",
				material.secretName)}
			return out, nil
		}
	}
	if running == 0 {
		out.served = nil
		out.condition = condition{metav1.ConditionFalse, ReasonTLSNotServing, "no server runs yet"}
		return out, nil
	}
	out.condition = condition{metav1.ConditionTrue, ReasonCertificateServed, fmt.Sprintf("every running server presents the certificate of the Secret %s", material.secretName)}
	return out, nil
}

// convergeCertificate has every running server present the certificate of
// spec.tls, and reports it. It returns true while a server waits for the
// kubelet to update its files, which no event announces.
func (r *RedisPersistenceReconciler) convergeCertificate(ctx context.Context, rp *v1alpha1.RedisPersistence, creds *credentials) (bool, error) {
	if creds.certs == nil {
		return false, nil
	}
	served, err := r.serveCertificate(ctx, rp, creds.server, creds.certs)
	if err != nil {
		return false, err
	}
	r.reportTLS(rp, creds.certs, served)
	return served.retry, nil
}

// reportTLS records what serveCertificate found in status.tls and events.
func (r *RedisPersistenceReconciler) reportTLS(rp *v1alpha1.RedisPersistence, material *tlsMaterial, out tlsOutcome) {
	r.setCondition(rp, v1alpha1.ConditionTLSReady, out.condition)
	st := rp.Status.TLS
	if st == nil || st.SecretName != material.secretName {
		st = &v1alpha1.TLSStatus{SecretName: material.secretName}
	}
	if out.served != nil {
		st.NotAfter = &metav1.Time{Time: out.served.NotAfter}
	}
	if out.rotated {
		st.LastRotation = &metav1.Time{Time: r.Clock.Now()}
		r.Recorder.Eventf(rp, corev1.EventTypeNormal, "RotatedCertificate",
			"the servers present the new certificate of the Secret %s (valid until %s), loaded without a restart",
			material.secretName, material.leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	rp.Status.TLS = st
}
