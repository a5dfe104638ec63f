package controllers

import (
	"context"
	"crypto/x509"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// waitConnectionSecret waits until the connection Secret of ns/name passes
// check and returns its data.
func waitConnectionSecret(t *testing.T, ns, name string, check func(data map[string]string) error) map[string]string {
	t.Helper()
	return waitConnectionSecretWithin(t, 30*time.Second, ns, name, check)
}

func waitConnectionSecretWithin(t *testing.T, timeout time.Duration, ns, name string, check func(data map[string]string) error) map[string]string {
	t.Helper()
	var data map[string]string
	eventually(t, timeout, func() error {
		secret := &corev1.Secret{}
		if err := get(t, secret, ns, name+"-app"); err != nil {
			return err
		}
		data = map[string]string{}
		for k, v := range secret.Data {
			data[k] = string(v)
		}
		return check(data)
	})
	return data
}

// hasData is a check of waitConnectionSecret: the data is exactly want.
func hasData(want map[string]string) func(map[string]string) error {
	return func(data map[string]string) error {
		if !maps.Equal(data, want) {
			return fmt.Errorf("connection Secret holds %v, want %v", data, want)
		}
		return nil
	}
}

// urlOptions are the client options an application configures from the
// connection Secret's URL alone. The URL names the client Service, which
// nothing resolves here: only the address they dial is the test server's, as
// the cluster's DNS and Service would route it; the user, password and TLS
// (and the server name TLS checks) are the URL's.
func urlOptions(t *testing.T, ns, name, uri, serverAddr string) *redis.Options {
	t.Helper()
	opts, err := redis.ParseURL(uri)
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := get(t, svc, ns, name); err != nil {
		t.Fatal(err)
	}
	if want := net.JoinHostPort(svc.Name+"."+svc.Namespace+".svc", strconv.Itoa(int(svc.Spec.Ports[0].Port))); opts.Addr != want {
		t.Fatalf("the URL's address %s is not the client Service's %s", opts.Addr, want)
	}
	opts.Addr = serverAddr
	opts.MaxRetries = -1
	return opts
}

// setGet writes and reads a key with a client of opts.
func setGet(t *testing.T, opts *redis.Options, value string) {
	t.Helper()
	ctx := context.Background()
	c := redis.NewClient(opts)
	defer func() { _ = c.Close() }()
	if err := c.Set(ctx, "connection-test", value, 0).Err(); err != nil {
		t.Fatalf("SET through the connection Secret's URL: %v", err)
	}
	if got, err := c.Get(ctx, "connection-test").Result(); err != nil || got != value {
		t.Fatalf("GET through the connection Secret's URL: %q, %v; want %q", got, err, value)
	}
}

// The connection Secret of an instance with a password of the user's: an
// application that takes it whole reaches the server, and the Secret follows
// what the instance becomes (a new password, no password, Sentinels).
func TestConnectionSecret(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createSecret(t, ns, "shop-password", "first-password")
	createRP(t, ns, "shop", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF,
		Auth: &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "shop-password", Key: "password"}}})

	host := "shop." + ns + ".svc"
	want := map[string]string{
		"REDIS_HOST": host, "REDIS_PORT": "6379", "REDIS_USERNAME": "default", "REDIS_PASSWORD": "first-password",
		"REDIS_URL": "redis://default:first-password@" + host + ":6379",
	}
	data := waitConnectionSecret(t, ns, "shop", hasData(want))
	secret := &corev1.Secret{}
	if err := get(t, secret, ns, "shop-app"); err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RedisPersistence{}
	if err := get(t, rp, ns, "shop"); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(secret, rp) {
		t.Errorf("the connection Secret is not owned by its RedisPersistence: %+v", secret.OwnerReferences)
	}

	// The server as the pod runs it, with the password of the user's Secret.
	eventually(t, 30*time.Second, func() error { return get(t, &appsv1.StatefulSet{}, ns, "shop") })
	addr := testenv.StartServer(t, renderedConfig(t, ns, "shop"))
	setGet(t, urlOptions(t, ns, "shop", data["REDIS_URL"], addr), "first")

	// A new password in the user's Secret reaches the connection Secret
	// through the Secret watch alone, and a server started with it lets a
	// client of the new URL in.
	userSecret := &corev1.Secret{}
	if err := get(t, userSecret, ns, "shop-password"); err != nil {
		t.Fatal(err)
	}
	userSecret.Data["password"] = []byte("second-password")
	if err := k8s.Update(ctx, userSecret); err != nil {
		t.Fatal(err)
	}
	want["REDIS_PASSWORD"] = "second-password"
	want["REDIS_URL"] = "redis://default:second-password@" + host + ":6379"
	data = waitConnectionSecret(t, ns, "shop", hasData(want))
	addr = testenv.StartServer(t, renderedConfig(t, ns, "shop"))
	setGet(t, urlOptions(t, ns, "shop", data["REDIS_URL"], addr), "second")

	// Without a password the user, the password and the URL's credentials
	// go; with Sentinels their address and master name come.
	updateRP(t, ns, "shop", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Auth = &v1alpha1.AuthSpec{Disabled: true}
		rp.Spec.Replicas = 2
		rp.Spec.Sentinel = &v1alpha1.SentinelSpec{Count: 1, Quorum: 1}
	})
	waitConnectionSecret(t, ns, "shop", hasData(map[string]string{
		"REDIS_HOST": host, "REDIS_PORT": "6379", "REDIS_URL": "redis://" + host + ":6379",
		"REDIS_SENTINEL_HOST": "shop-sentinel." + ns + ".svc", "REDIS_SENTINEL_PORT": "26379", "REDIS_SENTINEL_MASTER": "shop",
	}))

	var events corev1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, "first-password") || strings.Contains(e.Message, "second-password") {
			t.Errorf("an event carries the password: %s", e.Message)
		}
	}
}

// A TLS instance's connection Secret: a client configured from its rediss://
// URL and its ca.crt alone checks the server's certificate against the
// client Service's name and reaches the server with the generated password.
func TestConnectionSecretTLS(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ca := testenv.NewCA(t)
	cert, key := ca.Issue(t, 48*time.Hour, "vault."+ns+".svc")
	if err := k8s.Create(ctx, tlsSecret(ns, "vault-certs", cert, key, ca.PEM)); err != nil {
		t.Fatal(err)
	}
	createRP(t, ns, "vault", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, TLS: &v1alpha1.TLSSpec{SecretName: "vault-certs"}})

	data := waitConnectionSecret(t, ns, "vault", func(data map[string]string) error {
		if data["ca.crt"] != string(ca.PEM) || !strings.HasPrefix(data["REDIS_URL"], "rediss://default:") {
			return fmt.Errorf("no CA or no rediss:// URL with a password in %v", slices.Sorted(maps.Keys(data)))
		}
		return nil
	})
	if data["REDIS_PASSWORD"] != instancePassword(t, ns, "vault") {
		t.Error("the connection Secret's password is not the generated one")
	}

	// The server as the pod runs it, once the pod template exists.
	eventually(t, 30*time.Second, func() error { return get(t, &appsv1.StatefulSet{}, ns, "vault") })
	files := t.TempDir()
	testenv.WriteTLSFiles(t, files, cert, key, ca.PEM)
	addr := testenv.StartServer(t, strings.ReplaceAll(renderedConfig(t, ns, "vault"), specs.TLSDir, files))
	opts := urlOptions(t, ns, "vault", data["REDIS_URL"], addr)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(data["ca.crt"])) {
		t.Fatal("ca.crt holds no certificate")
	}
	opts.TLSConfig.RootCAs = roots
	setGet(t, opts, "over TLS")
}

// A Secret of the connection Secret's name that the operator did not make
// is left as it is, with a warning; the instance runs regardless.
func TestConnectionSecretNotTheOperators(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createSecret(t, ns, "taken-app", "someone-elses")
	createRP(t, ns, "taken", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	waitCondition(t, ns, "taken", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	waitEvent(t, ns, "taken", "ConnectionSecretTaken")
	secret := &corev1.Secret{}
	if err := get(t, secret, ns, "taken-app"); err != nil {
		t.Fatal(err)
	}
	if len(secret.Data) != 1 || string(secret.Data["password"]) != "someone-elses" || len(secret.OwnerReferences) != 0 {
		t.Errorf("the operator changed a Secret it did not make: data keys %v, owners %v", slices.Sorted(maps.Keys(secret.Data)), secret.OwnerReferences)
	}
}

// A hand edit of the connection Secret is undone: a changed value and a
// deleted key come back, a key of someone else's is left alone. The
// instance has settled first, so only the Secret watch can bring it back
// within the wait, which is shorter than any requeue of a settled instance.
func TestConnectionSecretPutBack(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createRP(t, ns, "notes", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	waitCondition(t, ns, "notes", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	want := waitConnectionSecret(t, ns, "notes", func(data map[string]string) error {
		if data["REDIS_PASSWORD"] == "" {
			return fmt.Errorf("no password yet")
		}
		return nil
	})
	time.Sleep(3 * time.Second)

	secret := &corev1.Secret{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := get(t, secret, ns, "notes-app"); err != nil {
			return err
		}
		secret.Data["REDIS_URL"] = []byte("redis://default:guess@elsewhere:6379")
		delete(secret.Data, "REDIS_HOST")
		secret.Data["TEAM_NOTE"] = []byte("kept")
		return k8s.Update(ctx, secret)
	}); err != nil {
		t.Fatal(err)
	}
	want["TEAM_NOTE"] = "kept"
	waitConnectionSecretWithin(t, 15*time.Second, ns, "notes", hasData(want))
}
