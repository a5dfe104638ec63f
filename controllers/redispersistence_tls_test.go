package controllers

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

func tlsSecret(ns, name string, certPEM, keyPEM, caPEM []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, specs.CACertKey: caPEM},
	}
}

func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// A TLS instance with client certificates, served by the real server: the
// operator reads its INFO over TLS, a plain connection and a TLS client
// without a certificate are refused, and a new certificate in the Secret
// reaches the running server once its files change, without a restart and
// without losing a key.
func TestTLSServedAndRotated(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ca := testenv.NewCA(t)
	firstCert, firstKey := ca.Issue(t, 48*time.Hour, "secure")
	if err := k8s.Create(ctx, tlsSecret(ns, "secure-certs", firstCert, firstKey, ca.PEM)); err != nil {
		t.Fatal(err)
	}
	createRP(t, ns, "secure", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, TLS: &v1alpha1.TLSSpec{SecretName: "secure-certs", ClientAuth: true}})

	// The pod mounts the Secret; the server starts from the rendered
	// redis.conf with the files where the kubelet would put them.
	sts := &appsv1.StatefulSet{}
	eventually(t, 30*time.Second, func() error { return get(t, sts, ns, "secure") })
	if v := sts.Spec.Template.Spec.Volumes[len(sts.Spec.Template.Spec.Volumes)-1]; v.Secret == nil || v.Secret.SecretName != "secure-certs" {
		t.Fatalf("the pod does not mount the certificate Secret: %+v", v)
	}
	files := t.TempDir()
	testenv.WriteTLSFiles(t, files, firstCert, firstKey, ca.PEM)
	addr := testenv.StartServer(t, strings.ReplaceAll(renderedConfig(t, ns, "secure"), specs.TLSDir, files))
	serverAddrs.Store(ns+"/secure-0", addr)
	actAsKubelet(t, ns, "secure-0", "ext4")
	got := waitCondition(t, ns, "secure", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	if got.Status.Engine != "posix" {
		t.Errorf("engine %q: the operator did not read INFO over TLS", got.Status.Engine)
	}
	got = waitCondition(t, ns, "secure", v1alpha1.ConditionTLSReady, metav1.ConditionTrue, ReasonCertificateServed)
	if got.Status.TLS == nil || got.Status.TLS.SecretName != "secure-certs" || got.Status.TLS.NotAfter == nil ||
		!got.Status.TLS.NotAfter.Time.Equal(leafOf(t, firstCert).NotAfter) || got.Status.TLS.LastRotation != nil {
		t.Errorf("status.tls %+v, want the first certificate's expiry and no rotation", got.Status.TLS)
	}

	// Plain TCP and TLS without a client certificate are refused.
	password := instancePassword(t, ns, "secure")
	plain := newClient(addr, password)
	defer func() { _ = plain.Close() }()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Error("a plain connection was served")
	}
	noCert, err := tlsclient.Config(ca.PEM, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	anonymous := redis.NewClient(&redis.Options{Addr: addr, Password: password, TLSConfig: noCert, DisableIdentity: true, MaxRetries: -1})
	defer func() { _ = anonymous.Close() }()
	if err := anonymous.Ping(ctx).Err(); err == nil {
		t.Error("a TLS client without a certificate was served with clientAuth")
	}
	withCert, err := tlsclient.Config(ca.PEM, firstCert, firstKey)
	if err != nil {
		t.Fatal(err)
	}
	server := redis.NewClient(&redis.Options{Addr: addr, Password: password, TLSConfig: withCert, DisableIdentity: true, MaxRetries: -1})
	defer func() { _ = server.Close() }()
	if err := server.Set(ctx, "kept", "across the rotation", 0).Err(); err != nil {
		t.Fatalf("a TLS client with a certificate: %v", err)
	}
	runID := func() string {
		info, err := server.InfoMap(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		return info["Server"]["run_id"]
	}
	before, template := runID(), sts.Spec.Template.DeepCopy()

	// A new certificate in the Secret: until the kubelet updates the files
	// the server presents the old one, and the condition says why.
	secondCert, secondKey := ca.Issue(t, 72*time.Hour, "secure")
	secret := &corev1.Secret{}
	if err := get(t, secret, ns, "secure-certs"); err != nil {
		t.Fatal(err)
	}
	secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey] = secondCert, secondKey
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "secure", v1alpha1.ConditionTLSReady, metav1.ConditionFalse, ReasonRotationPending)

	// The kubelet updates the files; the operator has the server load them.
	testenv.WriteTLSFiles(t, files, secondCert, secondKey, ca.PEM)
	got = waitCondition(t, ns, "secure", v1alpha1.ConditionTLSReady, metav1.ConditionTrue, ReasonCertificateServed)
	if got.Status.TLS == nil || got.Status.TLS.LastRotation == nil || !got.Status.TLS.NotAfter.Time.Equal(leafOf(t, secondCert).NotAfter) {
		t.Errorf("status.tls %+v, want the second certificate's expiry and a rotation", got.Status.TLS)
	}
	served, err := servedCertificate(ctx, addr, withCert)
	if err != nil || !served.Equal(leafOf(t, secondCert)) {
		t.Fatalf("the server presents %v (err %v), not the new certificate", served, err)
	}
	waitEvent(t, ns, "secure", "RotatedCertificate")
	if runID() != before {
		t.Error("the server restarted to load the new certificate")
	}
	if v, err := server.Get(ctx, "kept").Result(); err != nil || v != "across the rotation" {
		t.Errorf("after the rotation the key reads %q, %v", v, err)
	}
	if err := get(t, sts, ns, "secure"); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(template, &sts.Spec.Template) {
		t.Error("the rotation changed the pod template: the pod would restart")
	}
}

// waitEvent waits for an event of reason about the RedisPersistence name.
func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		var events corev1.EventList
		if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s event", reason)
	})
}

// spec.tls.issuerRef without cert-manager says so; once its CRDs are served
// the operator applies a Certificate the real CRD schema accepts and waits
// for cert-manager's Secret, which the pods then mount.
func TestTLSIssuerNeedsCertManager(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createRP(t, ns, "issued", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF,
		TLS: &v1alpha1.TLSSpec{IssuerRef: &v1alpha1.IssuerRef{Name: "ca", Kind: v1alpha1.IssuerCluster}}})
	got := waitCondition(t, ns, "issued", v1alpha1.ConditionTLSReady, metav1.ConditionFalse, ReasonCertManagerMissing)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != ReasonCertManagerMissing || !strings.Contains(c.Message, "install cert-manager") {
		t.Errorf("Ready %+v, want it to say cert-manager is missing", c)
	}
	if err := get(t, &appsv1.StatefulSet{}, ns, "issued"); !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet without its certificate: %v", err)
	}

	if err := env.InstallCRDs(testenv.CertManagerCRD(t, "certificates")); err != nil {
		t.Fatal(err)
	}
	// Nothing announces a new kind: touch the RedisPersistence rather than
	// wait for the minute's resync.
	rp := updateRP(t, ns, "issued", func(rp *v1alpha1.RedisPersistence) {
		metav1.SetMetaDataAnnotation(&rp.ObjectMeta, "test/touch", "1")
	})
	got = waitCondition(t, ns, "issued", v1alpha1.ConditionTLSReady, metav1.ConditionFalse, ReasonTLSSecretMissing)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTLSReady); !strings.Contains(c.Message, "Certificate issued-tls") {
		t.Errorf("TLSReady %q does not name the Certificate", c.Message)
	}
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(specs.CertificateGVK)
	if err := get(t, cert, ns, "issued-tls"); err != nil {
		t.Fatal(err)
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if secretName != "issued-tls" || kind != "ClusterIssuer" || !slices.Contains(dnsNames, "issued."+ns+".svc") || !metav1.IsControlledBy(cert, rp) {
		t.Errorf("Certificate spec %v, owners %v", cert.Object["spec"], cert.GetOwnerReferences())
	}

	// cert-manager writes the Secret; the StatefulSet follows.
	ca := testenv.NewCA(t)
	certPEM, keyPEM := ca.Issue(t, time.Hour, "issued")
	if err := k8s.Create(ctx, tlsSecret(ns, "issued-tls", certPEM, keyPEM, ca.PEM)); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	eventually(t, 30*time.Second, func() error { return get(t, sts, ns, "issued") })
	found := false
	for _, v := range sts.Spec.Template.Spec.Volumes {
		found = found || v.Secret != nil && v.Secret.SecretName == "issued-tls"
	}
	if !found {
		t.Errorf("the pods do not mount cert-manager's Secret: %+v", sts.Spec.Template.Spec.Volumes)
	}

	// A Secret of the user's instead of the issuer: the Certificate goes.
	eventually(t, 30*time.Second, func() error {
		if st := fetchRP(t, ns, "issued").Status.TLS; st == nil || st.SecretName != "issued-tls" {
			return fmt.Errorf("status.tls %+v", st)
		}
		return nil
	})
	if err := k8s.Create(ctx, tlsSecret(ns, "own-certs", certPEM, keyPEM, ca.PEM)); err != nil {
		t.Fatal(err)
	}
	updateRP(t, ns, "issued", func(rp *v1alpha1.RedisPersistence) { rp.Spec.TLS = &v1alpha1.TLSSpec{SecretName: "own-certs"} })
	eventually(t, 30*time.Second, func() error {
		if err := get(t, cert, ns, "issued-tls"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Certificate is still there (%w)", err)
		}
		return nil
	})
	waitEvent(t, ns, "issued", "DeletedCertificate")
}

// A Secret that cannot serve is named in the condition, and nothing starts.
func TestTLSSecretInvalid(t *testing.T) {
	ns := newNamespace(t)
	ca := testenv.NewCA(t)
	certPEM, _ := ca.Issue(t, time.Hour, "broken")
	_, otherKey := ca.Issue(t, time.Hour, "broken")
	if err := k8s.Create(context.Background(), tlsSecret(ns, "broken-certs", certPEM, otherKey, ca.PEM)); err != nil {
		t.Fatal(err)
	}
	createRP(t, ns, "broken", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, TLS: &v1alpha1.TLSSpec{SecretName: "broken-certs"}})
	got := waitCondition(t, ns, "broken", v1alpha1.ConditionTLSReady, metav1.ConditionFalse, ReasonTLSSecretInvalid)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionTLSReady); !strings.Contains(c.Message, "broken-certs") || !strings.Contains(c.Message, "tls.key") {
		t.Errorf("TLSReady %q", c.Message)
	}
	waitEvent(t, ns, "broken", "FailedReadCertificate")
}

// A RedisBenchmark runner reaches a TLS target with the target's files and,
// with ClientAuth, its certificate; a plain target's Job is unchanged.
func TestBenchmarkJobOverTLS(t *testing.T) {
	rb := &v1alpha1.RedisBenchmark{
		ObjectMeta: metav1.ObjectMeta{Name: "cmp", Namespace: "ns"},
		Spec:       v1alpha1.RedisBenchmarkSpec{Targets: []string{"secure"}, Workload: v1alpha1.BenchmarkWorkload{Commands: []v1alpha1.BenchmarkCommand{"set"}}},
	}
	rp := &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: "ns"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, TLS: &v1alpha1.TLSSpec{SecretName: "secure-certs", ClientAuth: true}},
	}
	pod := specs.BenchmarkJob(rb, specs.RunAt(rb, 0), rp, specs.BenchmarkOptions{Image: "uring-redis-bench:test"}).Spec.Template.Spec
	args := strings.Join(pod.Containers[0].Args, " ")
	for _, want := range []string{"--tls-ca-cert=" + specs.TLSCAFile, "--tls-cert=" + specs.TLSCertFile, "--tls-key=" + specs.TLSKeyFile} {
		if !strings.Contains(args, want) {
			t.Errorf("runner args %q lack %s", args, want)
		}
	}
	if v := pod.Volumes[len(pod.Volumes)-1]; v.Secret == nil || v.Secret.SecretName != "secure-certs" || *v.Secret.DefaultMode != 0o440 {
		t.Errorf("runner volumes %+v", pod.Volumes)
	}
	if pod.SecurityContext.FSGroup == nil || *pod.SecurityContext.FSGroup != *pod.SecurityContext.RunAsGroup {
		t.Error("the runner's group cannot read the mounted certificate files")
	}
	rp.Spec.TLS = nil
	if plain := specs.BenchmarkJob(rb, specs.RunAt(rb, 0), rp, specs.BenchmarkOptions{Image: "uring-redis-bench:test"}).Spec.Template.Spec; strings.Contains(strings.Join(plain.Containers[0].Args, " "), "tls") || len(plain.Volumes) != 0 {
		t.Errorf("a plain target's runner mentions TLS: %+v", plain)
	}
}

// A replicated TLS instance against real processes: a primary, a replica
// replicating over TLS with client certificates and a valkey-sentinel
// configured by the start script's TLS lines. The operator follows the
// Sentinel and the servers over TLS, follows a failover, and a new
// certificate reaches both servers.
func TestReplicationOverTLS(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "tlsrepl"
	ca := testenv.NewCA(t)
	firstCert, firstKey := ca.Issue(t, 48*time.Hour, name)
	if err := k8s.Create(ctx, tlsSecret(ns, name+"-certs", firstCert, firstKey, ca.PEM)); err != nil {
		t.Fatal(err)
	}
	createVolumeFor(t, ns, "data-"+name+"-1")
	spec := v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, Replicas: 2, Sentinel: &v1alpha1.SentinelSpec{Count: 1, Quorum: 1},
		TLS: &v1alpha1.TLSSpec{SecretName: name + "-certs", ClientAuth: true},
	}
	createRP(t, ns, name, spec)
	waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)

	files := t.TempDir()
	testenv.WriteTLSFiles(t, files, firstCert, firstKey, ca.PEM)
	password := instancePassword(t, ns, name)
	config := strings.ReplaceAll(renderedConfig(t, ns, name), specs.TLSDir, files) + fmt.Sprintf("primaryauth %q\n", password)
	primary := testenv.StartServer(t, config)
	serverAddrs.Store(ns+"/"+name+"-0", primary)
	markRunning(t, ns, name+"-0")
	_, primaryPort, _ := net.SplitHostPort(primary)
	replica := testenv.StartServer(t, config+fmt.Sprintf("replicaof 127.0.0.1 %s\n", primaryPort))
	serverAddrs.Store(ns+"/"+name+"-1", replica)
	markRunning(t, ns, name+"-1")
	rp := fetchRP(t, ns, name)
	sentinel := testenv.StartSentinel(t, strings.ReplaceAll(specs.SentinelListenConfig(rp), specs.TLSDir, files)+fmt.Sprintf(`
sentinel monitor %[1]s 127.0.0.1 %[2]s 1
sentinel down-after-milliseconds %[1]s 1000
sentinel failover-timeout %[1]s 10000
sentinel auth-pass %[1]s %[3]q
requirepass %[3]q
`, name, primaryPort, password))
	sentinelAddrs.Store(ns+"/"+name+"-sentinel-0", sentinel)
	markRunning(t, ns, name+"-sentinel-0")

	got := waitCondition(t, ns, name, v1alpha1.ConditionReplicating, metav1.ConditionTrue, ReasonReplicating)
	if got.Status.Primary != name+"-0" || len(got.Status.Replicas) != 2 || !got.Status.Replicas[1].LinkUp {
		t.Fatalf("status: primary %q, replicas %+v", got.Status.Primary, got.Status.Replicas)
	}
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, name+"-sentinel"); err != nil {
		t.Fatal(err)
	}
	firstHash := sts.Spec.Template.Annotations[specs.AnnotationTLSHash]
	if firstHash == "" {
		t.Fatal("the Sentinels' template carries no certificate hash: they would not restart for a new certificate")
	}

	config2, err := tlsclient.Config(ca.PEM, firstCert, firstKey)
	if err != nil {
		t.Fatal(err)
	}
	s := redis.NewClient(&redis.Options{Addr: sentinel, Password: password, TLSConfig: config2, DisableIdentity: true, MaxRetries: -1})
	defer func() { _ = s.Close() }()
	eventually(t, 30*time.Second, func() error { return s.Do(ctx, "SENTINEL", "FAILOVER", name).Err() })
	eventually(t, 60*time.Second, func() error {
		if got := roleLabels(t, ns, name+"-0", name+"-1"); got[name+"-0"] != "replica" || got[name+"-1"] != "primary" {
			return fmt.Errorf("role labels %v", got)
		}
		return nil
	})

	// A new certificate reaches both servers; the Sentinels' template follows it.
	secondCert := rotateServedCertificate(t, ns, name, ca, files)
	for _, addr := range []string{primary, replica} {
		if served, err := servedCertificate(ctx, addr, config2); err != nil || !served.Equal(leafOf(t, secondCert)) {
			t.Errorf("%s presents %v (err %v), not the new certificate", addr, served, err)
		}
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, sts, ns, name+"-sentinel"); err != nil {
			return err
		}
		if sts.Spec.Template.Annotations[specs.AnnotationTLSHash] == firstHash {
			return errors.New("the Sentinels' template still carries the first certificate's hash")
		}
		return nil
	})
}

// Without ClientAuth the real server, run from the rendered redis.conf,
// serves a TLS client that presents no certificate, and still no plain one.
func TestTLSWithoutClientCertificates(t *testing.T) {
	ctx := context.Background()
	ca := testenv.NewCA(t)
	certPEM, keyPEM := ca.Issue(t, time.Hour, "cache")
	files := t.TempDir()
	testenv.WriteTLSFiles(t, files, certPEM, keyPEM, ca.PEM)
	rp := specstest.NewRedisPersistence(specstest.GoldenCases["tls-secret"])
	addr := testenv.StartServer(t, strings.ReplaceAll(specs.RenderConfig(rp), specs.TLSDir, files))
	noCert, err := tlsclient.Config(ca.PEM, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	anonymous := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: noCert, DisableIdentity: true, MaxRetries: -1})
	defer func() { _ = anonymous.Close() }()
	if err := anonymous.Ping(ctx).Err(); err != nil {
		t.Errorf("a TLS client without a certificate, clientAuth off: %v", err)
	}
	plain := newClient(addr, "")
	defer func() { _ = plain.Close() }()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Error("a plain connection was served")
	}
	// A server certificate from another CA is refused by the operator's client.
	other := testenv.NewCA(t)
	wrongCA, err := tlsclient.Config(other.PEM, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := servedCertificate(ctx, addr, wrongCA); err == nil || !strings.Contains(err.Error(), "not signed by ca.crt") {
		t.Errorf("a server whose certificate another CA signed: %v", err)
	}
}

// rotateServedCertificate issues a new certificate for instance name, puts
// it into the Secret <name>-certs and, as the kubelet would, into the
// servers' files, and waits until the operator reports every running server
// presenting it (event RotatedCertificate, TLSReady). It returns the new
// certificate.
func rotateServedCertificate(t *testing.T, ns, name string, ca *testenv.CA, files string) []byte {
	t.Helper()
	cert, key := ca.Issue(t, 72*time.Hour, name)
	secret := &corev1.Secret{}
	if err := get(t, secret, ns, name+"-certs"); err != nil {
		t.Fatal(err)
	}
	secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey] = cert, key
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	testenv.WriteTLSFiles(t, files, cert, key, ca.PEM)
	waitEvent(t, ns, name, "RotatedCertificate")
	waitCondition(t, ns, name, v1alpha1.ConditionTLSReady, metav1.ConditionTrue, ReasonCertificateServed)
	return cert
}
