package controllers

import (
	"cmp"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

// TLS (spec.tls): the server listens with TLS on redisPort and not at all
// in plain TCP (port 0), so a plain connection is refused. Its certificate
// files are the keys of a kubernetes.io/tls Secret mounted at tlsDir: the
// user's (spec.tls.secretName) or the one cert-manager writes for the
// Certificate the operator creates (spec.tls.issuerRef).
//
// Rotation keeps the server running: the kubelet replaces the mounted files
// in place (an atomic symlink swap) some time after the Secret changes, and
// CONFIG SET of tls-cert-file with the same path makes the server read its
// files again (the option is volatile). The operator compares the
// certificate a server presents with the Secret's; when they differ it issues
// that CONFIG SET and looks again, until the server presents the new one.
// Sentinels cannot reload: their pod template carries a hash of the Secret,
// so they roll one at a time instead; they hold no data.
const (
	tlsDir        = "/etc/redis-tls"
	tlsVolumeName = "tls"
	tlsCertFile   = tlsDir + "/" + corev1.TLSCertKey
	tlsKeyFile    = tlsDir + "/" + corev1.TLSPrivateKeyKey
	tlsCAFile     = tlsDir + "/" + caCertKey
	caCertKey     = "ca.crt"

	// annotationTLSHash on the Sentinels' pod template is a hash of the
	// Secret's certificate files: a new certificate rolls the Sentinels.
	annotationTLSHash = "uringredis.io/tls-hash"
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

// certificateGVK is cert-manager's Certificate, applied as an unstructured
// object: the operator does not link cert-manager's API types.
var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// serverCredentials are what the operator presents to a server: the
// password and, with spec.tls, the TLS configuration.
type serverCredentials struct {
	password string
	tls      *tls.Config
}

func tlsEnabled(rp *v1alpha1.RedisPersistence) bool { return rp.Spec.TLS != nil }

func clientAuth(rp *v1alpha1.RedisPersistence) bool {
	return rp.Spec.TLS != nil && rp.Spec.TLS.ClientAuth
}

// tlsSecretName is the Secret the server's certificate comes from: the
// user's, or the one the operator's Certificate has cert-manager write.
func tlsSecretName(rp *v1alpha1.RedisPersistence) string {
	switch {
	case rp.Spec.TLS == nil:
		return ""
	case rp.Spec.TLS.SecretName != "":
		return rp.Spec.TLS.SecretName
	}
	return certificateName(rp)
}

func certificateName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-tls" }

// tlsServerConfig are the redis.conf lines of a TLS server or Sentinel
// listening on port. Replication and Sentinel traffic use TLS too
// (tls-replication); every peer presents its own certificate, which
// tls-auth-clients yes requires.
func tlsServerConfig(rp *v1alpha1.RedisPersistence, port int) []string {
	return []string{
		"port 0",
		fmt.Sprintf("tls-port %d", port),
		"tls-cert-file " + tlsCertFile,
		"tls-key-file " + tlsKeyFile,
		"tls-ca-cert-file " + tlsCAFile,
		"tls-auth-clients " + yesNo(clientAuth(rp)),
		"tls-replication yes",
	}
}

// valkeyCLI is how the pods' scripts and probes call valkey-cli: over TLS,
// with the instance's CA and, when clients must present one, the server's
// certificate. valkey-cli checks the chain, not the host name.
func valkeyCLI(rp *v1alpha1.RedisPersistence) string {
	if !tlsEnabled(rp) {
		return "valkey-cli"
	}
	cli := "valkey-cli --tls --cacert " + tlsCAFile
	if clientAuth(rp) {
		cli += " --cert " + tlsCertFile + " --key " + tlsKeyFile
	}
	return cli
}

// cliTLSEnv has the start scripts' valkey-cli calls (lookups.sh) speak TLS
// as valkeyCLI does, when the instance does.
func cliTLSEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	if !tlsEnabled(rp) {
		return nil
	}
	env := []corev1.EnvVar{envVar("TLS_CA_FILE", tlsCAFile)}
	if clientAuth(rp) {
		env = append(env, envVar("TLS_CERT_FILE", tlsCertFile), envVar("TLS_KEY_FILE", tlsKeyFile))
	}
	return env
}

// tlsVolume mounts the certificate Secret, readable by the server's group
// (the pod's fsGroup) and no one else.
func tlsVolume(rp *v1alpha1.RedisPersistence) corev1.Volume {
	return corev1.Volume{Name: tlsVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  tlsSecretName(rp),
		DefaultMode: ptr.To[int32](0o440),
	}}}
}

var tlsVolumeMount = corev1.VolumeMount{Name: tlsVolumeName, MountPath: tlsDir, ReadOnly: true}

// exporterTLSArgs point redis_exporter at the TLS port. It reaches the server
// over the pod's loopback, where no other pod can answer, so it skips the
// certificate check: checking it would need every certificate to name
// localhost. With clientAuth it presents the server's certificate.
func exporterTLSArgs(rp *v1alpha1.RedisPersistence) []string {
	args := []string{"--skip-tls-verification"}
	if clientAuth(rp) {
		args = append(args, "--tls-client-cert-file="+tlsCertFile, "--tls-client-key-file="+tlsKeyFile)
	}
	return args
}

// benchmarkOverTLS has a RedisBenchmark runner's pod reach its TLS target:
// the target's certificate Secret mounted as the servers mount it, readable
// by the runner's group, and the runner's flags naming its files.
func benchmarkOverTLS(rp *v1alpha1.RedisPersistence, pod *corev1.PodSpec) {
	runner := &pod.Containers[0]
	runner.Args = append(runner.Args, "--tls-ca-cert="+tlsCAFile)
	if clientAuth(rp) {
		runner.Args = append(runner.Args, "--tls-cert="+tlsCertFile, "--tls-key="+tlsKeyFile)
	}
	runner.VolumeMounts = append(runner.VolumeMounts, tlsVolumeMount)
	pod.Volumes = append(pod.Volumes, tlsVolume(rp))
	pod.SecurityContext.FSGroup = pod.SecurityContext.RunAsGroup
}

// buildCertificate is the cert-manager Certificate of spec.tls.issuerRef: the
// names clients reach the servers and Sentinels by, and localhost for a
// port-forward. It serves as a client certificate too: with clientAuth the
// servers, Sentinels, exporter and probes present it to each other.
func buildCertificate(rp *v1alpha1.RedisPersistence) *unstructured.Unstructured {
	issuer := rp.Spec.TLS.IssuerRef
	var dnsNames []any
	for _, service := range []string{rp.Name, replicasServiceName(rp), sentinelName(rp)} {
		if service != rp.Name && !replicated(rp) {
			continue
		}
		dnsNames = append(dnsNames, service, service+"."+rp.Namespace, service+"."+rp.Namespace+".svc")
	}
	dnsNames = append(dnsNames, "*."+headlessDomain(rp), "localhost")
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name":      certificateName(rp),
			"namespace": rp.Namespace,
			"labels":    toAny(objectLabels(rp)),
		},
		"spec": map[string]any{
			"secretName":  tlsSecretName(rp),
			"dnsNames":    dnsNames,
			"ipAddresses": []any{"127.0.0.1"},
			"usages":      []any{"digital signature", "key encipherment", "server auth", "client auth"},
			"privateKey":  map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
			"issuerRef":   map[string]any{"name": issuer.Name, "kind": cmp.Or(string(issuer.Kind), string(v1alpha1.IssuerNamespaced)), "group": cmp.Or(issuer.Group, certificateGVK.Group)},
		},
	}}
	u.SetGroupVersionKind(certificateGVK)
	u.SetOwnerReferences([]metav1.OwnerReference{ownerReference(rp)})
	return u
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// tlsMaterial is the certificate Secret as the operator uses it.
type tlsMaterial struct {
	secretName string
	leaf       *x509.Certificate
	// hash identifies the three files; the Sentinels' template carries it.
	hash string
	// client reaches the servers: ca.crt verifies them, and with clientAuth
	// the Secret's certificate is presented.
	client *tls.Config
}

// tlsMaterialFrom checks that secret holds a usable certificate, its key and
// a CA. The errors name only keys, so they can go into a condition.
func tlsMaterialFrom(secret *corev1.Secret, withClientCert bool) (*tlsMaterial, error) {
	certPEM, keyPEM, caPEM := secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], secret.Data[caCertKey]
	for key, v := range map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, caCertKey: caPEM} {
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
	return &tlsMaterial{secretName: secret.Name, leaf: leaf, hash: hex.EncodeToString(sum.Sum(nil)[:8]), client: config}, nil
}

// readTLS applies the Certificate of spec.tls.issuerRef and reads the
// certificate Secret. A nil material comes with the condition that says what
// is missing; the Secret watch brings the RedisPersistence back when it
// appears or changes.
func (r *RedisPersistenceReconciler) readTLS(ctx context.Context, rp *v1alpha1.RedisPersistence) (*tlsMaterial, *condition, error) {
	named := "named in spec.tls.secretName"
	if rp.Spec.TLS.IssuerRef != nil {
		if _, err := r.RESTMapper().RESTMapping(certificateGVK.GroupKind(), certificateGVK.Version); meta.IsNoMatchError(err) {
			return nil, &condition{metav1.ConditionFalse, ReasonCertManagerMissing,
				"spec.tls.issuerRef needs cert-manager, and the cluster does not serve its Certificate kind (cert-manager.io/v1); " +
					"install cert-manager, or name a Secret of yours in spec.tls.secretName"}, nil
		} else if err != nil {
			return nil, nil, fmt.Errorf("looking up the Certificate kind: %w", err)
		}
		cert := buildCertificate(rp)
		if err := r.Patch(ctx, cert, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			r.Recorder.Eventf(rp, corev1.EventTypeWarning, "FailedApply", "applying Certificate %s: %v", cert.GetName(), err)
			return nil, nil, fmt.Errorf("applying Certificate %s: %w", cert.GetName(), err)
		}
		named = "of the Certificate " + certificateName(rp) + " (cert-manager has not issued it yet; see the Certificate's conditions)"
	}
	secret := &corev1.Secret{}
	name := tlsSecretName(rp)
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: name}, secret); apierrors.IsNotFound(err) {
		return nil, &condition{metav1.ConditionFalse, ReasonTLSSecretMissing, fmt.Sprintf("the Secret %s %s does not exist", name, named)}, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("reading the TLS Secret: %w", err)
	}
	material, err := tlsMaterialFrom(secret, clientAuth(rp))
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
	if rp.Status.TLS == nil || rp.Status.TLS.SecretName != certificateName(rp) || (rp.Spec.TLS != nil && rp.Spec.TLS.IssuerRef != nil) {
		return nil
	}
	if _, err := r.RESTMapper().RESTMapping(certificateGVK.GroupKind(), certificateGVK.Version); meta.IsNoMatchError(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("looking up the Certificate kind: %w", err)
	}
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(certificateGVK)
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: certificateName(rp)}, cert); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading Certificate %s: %w", certificateName(rp), err)
	}
	if !metav1.IsControlledBy(cert, rp) {
		return nil // not ours: left alone
	}
	if err := r.Delete(ctx, cert, client.Preconditions{UID: ptr.To(cert.GetUID())}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Certificate %s: %w", certificateName(rp), err)
	}
	r.Recorder.Event(rp, corev1.EventTypeNormal, "DeletedCertificate", "spec.tls names no issuer any more: deleted the Certificate "+certificateName(rp))
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
	if err := r.List(ctx, &pods, client.InNamespace(rp.Namespace), client.MatchingLabels(selectorLabels(rp))); err != nil {
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
