package specs

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TLS (spec.tls): the server listens with TLS on RedisPort and not at all
// in plain TCP (port 0), so a plain connection is refused. Its certificate
// files are the keys of a kubernetes.io/tls Secret mounted at TLSDir: the
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
	TLSDir        = "/etc/redis-tls"
	tlsVolumeName = "tls"
	TLSCertFile   = TLSDir + "/" + corev1.TLSCertKey
	TLSKeyFile    = TLSDir + "/" + corev1.TLSPrivateKeyKey
	TLSCAFile     = TLSDir + "/" + CACertKey
	CACertKey     = "ca.crt"

	// AnnotationTLSHash on the Sentinels' pod template is a hash of the
	// Secret's certificate files: a new certificate rolls the Sentinels.
	AnnotationTLSHash = "uringredis.io/tls-hash"
)

// CertificateGVK is cert-manager's Certificate, applied as an unstructured
// object: the operator does not link cert-manager's API types.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

func TLSEnabled(rp *v1alpha1.RedisPersistence) bool { return rp.Spec.TLS != nil }

func ClientAuth(rp *v1alpha1.RedisPersistence) bool {
	return rp.Spec.TLS != nil && rp.Spec.TLS.ClientAuth
}

// TLSSecretName is the Secret the server's certificate comes from: the
// user's, or the one the operator's Certificate has cert-manager write.
func TLSSecretName(rp *v1alpha1.RedisPersistence) string {
	switch {
	case rp.Spec.TLS == nil:
		return ""
	case rp.Spec.TLS.SecretName != "":
		return rp.Spec.TLS.SecretName
	}
	return CertificateName(rp)
}

func CertificateName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-tls" }

// TLSServerConfig are the redis.conf lines of a TLS server or Sentinel
// listening on port. Replication and Sentinel traffic use TLS too
// (tls-replication); every peer presents its own certificate, which
// tls-auth-clients yes requires.
func TLSServerConfig(rp *v1alpha1.RedisPersistence, port int) []string {
	return []string{
		"port 0",
		fmt.Sprintf("tls-port %d", port),
		"tls-cert-file " + TLSCertFile,
		"tls-key-file " + TLSKeyFile,
		"tls-ca-cert-file " + TLSCAFile,
		"tls-auth-clients " + yesNo(ClientAuth(rp)),
		"tls-replication yes",
	}
}

// ValkeyCLI is how the pods' scripts and probes call valkey-cli: over TLS,
// with the instance's CA and, when clients must present one, the server's
// certificate. valkey-cli checks the chain, not the host name.
func ValkeyCLI(rp *v1alpha1.RedisPersistence) string {
	return strings.Join(append([]string{"valkey-cli"}, CLITLSArgs(rp)...), " ")
}

// CLITLSArgs are the valkey-cli flags of ValkeyCLI, none without spec.tls:
// the files are where the server and Sentinel containers mount them.
func CLITLSArgs(rp *v1alpha1.RedisPersistence) []string {
	if !TLSEnabled(rp) {
		return nil
	}
	args := []string{"--tls", "--cacert", TLSCAFile}
	if ClientAuth(rp) {
		args = append(args, "--cert", TLSCertFile, "--key", TLSKeyFile)
	}
	return args
}

// CLITLSEnv has the start scripts' valkey-cli calls (lookups.sh) speak TLS
// as ValkeyCLI does, when the instance does.
func CLITLSEnv(rp *v1alpha1.RedisPersistence) []corev1.EnvVar {
	if !TLSEnabled(rp) {
		return nil
	}
	env := []corev1.EnvVar{EnvVar("TLS_CA_FILE", TLSCAFile)}
	if ClientAuth(rp) {
		env = append(env, EnvVar("TLS_CERT_FILE", TLSCertFile), EnvVar("TLS_KEY_FILE", TLSKeyFile))
	}
	return env
}

// TLSVolume mounts the certificate Secret, readable by the server's group
// (the pod's fsGroup) and no one else.
func TLSVolume(rp *v1alpha1.RedisPersistence) corev1.Volume {
	return corev1.Volume{Name: tlsVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  TLSSecretName(rp),
		DefaultMode: ptr.To[int32](0o440),
	}}}
}

// withTLS mounts the certificate Secret into the server's container (its
// redis.conf names the files; the exporter mounts them itself) with spec.tls.
func withTLS(rp *v1alpha1.RedisPersistence, _ Options, _ PodInputs, template *corev1.PodTemplateSpec) {
	if !TLSEnabled(rp) {
		return
	}
	redis := containerOf(&template.Spec, ContainerRedis)
	// The server's mounts are shared with the prepare container's until now.
	redis.VolumeMounts = append(slices.Clone(redis.VolumeMounts), TLSVolumeMount)
	template.Spec.Volumes = append(template.Spec.Volumes, TLSVolume(rp))
}

var TLSVolumeMount = corev1.VolumeMount{Name: tlsVolumeName, MountPath: TLSDir, ReadOnly: true}

// ExporterTLSArgs point redis_exporter at the TLS port. It reaches the server
// over the pod's loopback, where no other pod can answer, so it skips the
// certificate check: checking it would need every certificate to name
// localhost. With ClientAuth it presents the server's certificate.
func ExporterTLSArgs(rp *v1alpha1.RedisPersistence) []string {
	args := []string{"--skip-tls-verification"}
	if ClientAuth(rp) {
		args = append(args, "--tls-client-cert-file="+TLSCertFile, "--tls-client-key-file="+TLSKeyFile)
	}
	return args
}

// BenchmarkOverTLS has a RedisBenchmark runner's pod reach its TLS target:
// the target's certificate Secret mounted as the servers mount it, readable
// by the runner's group, and the runner's flags naming its files.
func BenchmarkOverTLS(rp *v1alpha1.RedisPersistence, pod *corev1.PodSpec) {
	runner := &pod.Containers[0]
	runner.Args = append(runner.Args, "--tls-ca-cert="+TLSCAFile)
	if ClientAuth(rp) {
		runner.Args = append(runner.Args, "--tls-cert="+TLSCertFile, "--tls-key="+TLSKeyFile)
	}
	runner.VolumeMounts = append(runner.VolumeMounts, TLSVolumeMount)
	pod.Volumes = append(pod.Volumes, TLSVolume(rp))
	pod.SecurityContext.FSGroup = pod.SecurityContext.RunAsGroup
}

// Certificate is the cert-manager Certificate of spec.tls.issuerRef: the
// names clients reach the servers and Sentinels by, and localhost for a
// port-forward. It serves as a client certificate too: with ClientAuth the
// servers, Sentinels, exporter and probes present it to each other.
func Certificate(rp *v1alpha1.RedisPersistence) *unstructured.Unstructured {
	issuer := rp.Spec.TLS.IssuerRef
	var dnsNames []any
	for _, service := range []string{rp.Name, ReplicasServiceName(rp), SentinelName(rp)} {
		if service != rp.Name && !Replicated(rp) {
			continue
		}
		dnsNames = append(dnsNames, service, service+"."+rp.Namespace, service+"."+rp.Namespace+".svc")
	}
	dnsNames = append(dnsNames, "*."+HeadlessDomain(rp), "localhost")
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name":      CertificateName(rp),
			"namespace": rp.Namespace,
			"labels":    toAny(ObjectLabels(rp)),
		},
		"spec": map[string]any{
			"secretName":  TLSSecretName(rp),
			"dnsNames":    dnsNames,
			"ipAddresses": []any{"127.0.0.1"},
			"usages":      []any{"digital signature", "key encipherment", "server auth", "client auth"},
			"privateKey":  map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
			"issuerRef":   map[string]any{"name": issuer.Name, "kind": cmp.Or(string(issuer.Kind), string(v1alpha1.IssuerNamespaced)), "group": cmp.Or(issuer.Group, CertificateGVK.Group)},
		},
	}}
	u.SetGroupVersionKind(CertificateGVK)
	u.SetOwnerReferences([]metav1.OwnerReference{OwnerReference(rp)})
	return u
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
