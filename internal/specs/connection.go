package specs

import (
	"net"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// The connection Secret <name>-app holds what an application needs to reach
// an instance, so a Deployment can take it whole with envFrom. Its choices:
//
//   - The name is the one the design gives it, after CloudNativePG's
//     <cluster>-app, which users of operators already look for. It hands on
//     the default user, which may run every command; each spec.users entry
//     has its own, <name>-app-<user>, the same keys signing in as that user.
//   - Its keys are environment variable names as applications already read
//     them (REDIS_URL is the name Sidekiq, Celery, Heroku and most client
//     examples use), so envFrom needs no prefix and no mapping; envFrom's
//     prefix tells two instances apart. The CA is the exception: ca.crt, the
//     key cert-manager and Kubernetes itself use, meant for a volume mount
//     (envFrom passes it too, as a variable named ca.crt that programs can
//     read and shells cannot expand).
//   - The password is the server's (the Secret AuthSecretRef names),
//     copied: an application needs one Secret, not two, and a copy the
//     operator keeps can follow the password wherever spec.auth points it.
//   - It is owned by the RedisPersistence and goes with it. Unlike the
//     generated password it holds nothing that cannot be made again.
//   - The operator applies it at every reconcile, so it follows the spec and
//     the password and a hand-edited key is put back; keys the operator does
//     not set (added by hand) are left alone.
const (
	ConnectionHostKey     = "REDIS_HOST"
	ConnectionPortKey     = "REDIS_PORT"
	ConnectionUsernameKey = "REDIS_USERNAME"
	ConnectionPasswordKey = "REDIS_PASSWORD"
	// ConnectionURLKey is redis://[default:<password>@]<host>:<port>, or
	// rediss:// with spec.tls.
	ConnectionURLKey = "REDIS_URL"
	// The Sentinels of a replicated instance: Sentinel-aware clients ask them
	// for the primary of ConnectionSentinelMasterKey and follow failovers.
	ConnectionSentinelHostKey   = "REDIS_SENTINEL_HOST"
	ConnectionSentinelPortKey   = "REDIS_SENTINEL_PORT"
	ConnectionSentinelMasterKey = "REDIS_SENTINEL_MASTER"

	// DefaultUser is the server's user requirepass sets the password of.
	DefaultUser = "default"
)

func ConnectionSecretName(rp *v1alpha1.RedisPersistence) string { return rp.Name + "-app" }

// ClientHost is the client Service's DNS name. Like HeadlessDomain it
// leaves the cluster domain to the pod's resolv.conf search path, which
// knows it; the operator does not.
func ClientHost(rp *v1alpha1.RedisPersistence) string { return rp.Name + "." + rp.Namespace + ".svc" }

// SentinelMasterName is the name the Sentinels monitor the primary under:
// the instance's (sentinel-start.sh's $INSTANCE).
func SentinelMasterName(rp *v1alpha1.RedisPersistence) string { return rp.Name }

// ConnectionInputs are the credentials the connection Secret hands on, which
// the operator reads from other Secrets.
type ConnectionInputs struct {
	// Username signs in with Password; "" is the default user.
	Username string
	// Password of the user; "" when the server runs without one.
	Password string
	// CACert is the PEM of the CA the servers' certificates chain to (ca.crt
	// of the certificate Secret); nil without spec.tls.
	CACert []byte
}

// ConnectionSecret is the connection Secret of rp, or with in.Username the
// one of that spec.users entry, <name>-app-<user>. Without a password it
// has no user, password or credentials in its URL; without replication no
// Sentinel keys; without TLS no CA. Applied, a key it no longer has is
// removed from the Secret.
func ConnectionSecret(rp *v1alpha1.RedisPersistence, in ConnectionInputs) *corev1.Secret {
	host, port := ClientHost(rp), strconv.Itoa(RedisPort)
	uri := url.URL{Scheme: "redis", Host: net.JoinHostPort(host, port)}
	if TLSEnabled(rp) {
		uri.Scheme = "rediss"
	}
	data := map[string][]byte{
		ConnectionHostKey: []byte(host),
		ConnectionPortKey: []byte(port),
	}
	user := in.Username
	if user == "" {
		user = DefaultUser
	}
	if in.Password != "" {
		uri.User = url.UserPassword(user, in.Password)
		data[ConnectionUsernameKey] = []byte(user)
		data[ConnectionPasswordKey] = []byte(in.Password)
	}
	data[ConnectionURLKey] = []byte(uri.String())
	if Replicated(rp) {
		data[ConnectionSentinelHostKey] = []byte(SentinelName(rp) + "." + rp.Namespace + ".svc")
		data[ConnectionSentinelPortKey] = []byte(strconv.Itoa(SentinelPort))
		data[ConnectionSentinelMasterKey] = []byte(SentinelMasterName(rp))
	}
	if TLSEnabled(rp) && len(in.CACert) > 0 {
		data[CACertKey] = in.CACert
	}
	meta := ObjectMeta(rp, ConnectionSecretName(rp))
	if in.Username != "" {
		meta.Name = UserConnectionSecretName(rp, in.Username)
		meta.Labels[LabelUser] = in.Username
	}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}
