package plugin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// readTarball returns the files of a report, by their path under its
// top directory.
func readTarball(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		dir, rest, _ := strings.Cut(h.Name, "/")
		if !strings.HasPrefix(dir, "report-cache-") {
			t.Errorf("%s is not under the report's directory", h.Name)
		}
		files[rest] = string(body)
	}
}

// TestReportCutsOutSecrets: a report holds the instance, its objects and
// the events about them, and not one secret: not a value of the Secrets the
// instance owns or names (in plain or base64, wherever it was copied: an
// annotation, an environment variable, an event), nor the passwords of
// configuration lines that come from no Secret the plugin read. What it could
// not read (there is no kubelet here, so no log) it says in README.txt.
func TestReportCutsOutSecrets(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const (
		password    = "hunter2-s3cret-XYZ"  // the instance's own Secret
		storeKey    = "AKIA-store-key-0042" // a Secret the spec names, not owned
		aclPassword = "app-pass-123"        // in a ConfigMap only
		aclHash     = "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
	)
	rp := &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Backup: destination()},
	}
	create(t, rp, v1alpha1.RedisPersistenceStatus{})
	ownedBy := []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RedisPersistence", Name: rp.Name, UID: rp.UID}}
	labels := map[string]string{"app.kubernetes.io/instance": "cache", "app.kubernetes.io/name": "redis"}
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-auth", Labels: labels, OwnerReferences: ownedBy,
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"stringData":{"password":"` + password + `"}}`}},
			Data: map[string][]byte{"password": []byte(password)}},
		// spec.backup.destination.s3.credentials.secretName
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"},
			Data: map[string][]byte{"accessKey": []byte(storeKey), "secretKey": []byte("store-secret-key-9")}},
		// Another instance's Secret: not in the report.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-auth"}, Data: map[string][]byte{"password": []byte("others-password")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache", Labels: labels, OwnerReferences: ownedBy},
			Data: map[string]string{
				"redis.conf":    "appendonly yes\nrequirepass " + password + "\nmasterauth " + password + "\nuser app on >" + aclPassword + " " + aclHash + " ~* +@all\n",
				"sentinel.conf": "sentinel monitor cache 10.0.0.1 6379 2\nsentinel auth-pass cache some-config-only-pass\n",
				"copied":        base64.StdEncoding.EncodeToString([]byte(storeKey)),
			}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-0", Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "redis-uring:test",
				Env: []corev1.EnvVar{{Name: "REDIS_PASSWORD", Value: password}}}}}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache.1"},
			InvolvedObject: corev1.ObjectReference{Kind: "RedisPersistence", Namespace: ns, Name: "cache"},
			Type:           corev1.EventTypeWarning, Reason: "FailedApply", Message: "the store refused key " + storeKey, Count: 3},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other.1"},
			InvolvedObject: corev1.ObjectReference{Kind: "RedisPersistence", Namespace: ns, Name: "other"},
			Type:           corev1.EventTypeNormal, Reason: "Unrelated", Message: "not about cache"},
	} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	file := filepath.Join(t.TempDir(), "report.tar.gz")
	stdout, stderr, err := run(t, "-n", ns, "report", "cache", "-f", file)
	if err != nil {
		t.Fatalf("report: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(stdout, file+": ") || !strings.Contains(stderr, "README.txt in the report says which") {
		t.Errorf("report printed %q, %q", stdout, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	files := readTarball(t, data)

	for name, body := range files {
		for _, secret := range []string{password, storeKey, "store-secret-key-9", aclPassword, aclHash[1:], "some-config-only-pass",
			base64.StdEncoding.EncodeToString([]byte(password)), base64.StdEncoding.EncodeToString([]byte(storeKey))} {
			if strings.Contains(body, secret) {
				t.Errorf("%s holds the secret %q:\n%s", name, secret, body)
			}
		}
		if strings.Contains(body, "others-password") || strings.Contains(body, "not about cache") || strings.HasSuffix(name, "other-auth.yaml") {
			t.Errorf("%s is about another instance:\n%s", name, body)
		}
	}
	for name, want := range map[string][]string{
		"README.txt": {"RedisPersistence cache", "secrets/cache-auth.yaml", "the logs of " + ns + "/cache-0: the pod is not scheduled",
			"the INFO of " + ns + "/cache-0: the pod is not scheduled"},
		"redispersistence.yaml":   {"name: cache", "mode: uring"},
		"secrets/cache-auth.yaml": {"password: '<cut out: 18 bytes>'"},
		"secrets/store.yaml":      {"accessKey:"},
		"configmaps/cache.yaml":   {"requirepass <cut out>", "user app on ><cut out> #<cut out> ~* +@all", "sentinel auth-pass cache <cut out>", "appendonly yes"},
		"pods/cache-0.yaml":       {"name: REDIS_PASSWORD", "value: <cut out>"},
		"events.txt":              {"FailedApply", "x3", "the store refused key <cut out>"},
	} {
		body, ok := files[name]
		if !ok {
			t.Errorf("the report has no %s; it has %v", name, keys(files))
			continue
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q:\n%s", name, w, body)
			}
		}
	}
	if strings.Contains(files["secrets/cache-auth.yaml"], "last-applied-configuration") {
		t.Errorf("the Secret keeps its last-applied-configuration:\n%s", files["secrets/cache-auth.yaml"])
	}

	// A user who may read everything of the namespace but Secrets (what
	// kubectl's view role allows) gets a report without them, which says
	// so, and still without the passwords of configuration lines and of
	// literal environment variables.
	read := []string{"get", "list"}
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "view"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"redispersistences", "redisbackups"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "services", "configmaps", "persistentvolumeclaims", "events"}, Verbs: read},
			{APIGroups: []string{"apps", "batch", "policy", "networking.k8s.io"}, Resources: []string{"*"}, Verbs: read},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "report-viewers"}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "view"}},
	} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	viewer := env.KubeconfigOf("report-viewer", "report-viewers")
	var out, errOut bytes.Buffer
	cmd := NewCommand(Env{IOStreams: genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}, Clock: clocktesting.NewFakePassiveClock(testNow)})
	cmd.SetArgs([]string{"--kubeconfig", viewer, "-n", ns, "report", "cache", "-f", file})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("report as a viewer: %v\n%s", err, errOut.String())
	}
	data, err = os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	files = readTarball(t, data)
	for name, body := range files {
		if strings.HasPrefix(name, "secrets/") {
			t.Errorf("a viewer's report holds %s", name)
		}
		for _, secret := range []string{password, aclPassword, aclHash[1:], "some-config-only-pass"} {
			if strings.Contains(body, secret) {
				t.Errorf("a viewer's %s holds the secret %q:\n%s", name, secret, body)
			}
		}
	}
	if readme := files["README.txt"]; !strings.Contains(readme, "listing secrets") || !strings.Contains(readme, "forbidden") {
		t.Errorf("a viewer's README.txt does not say the Secrets could not be read:\n%s", readme)
	}
	if !strings.Contains(files["configmaps/cache.yaml"], "requirepass <cut out>") {
		t.Errorf("a viewer's report lacks the ConfigMap with its password cut:\n%s", files["configmaps/cache.yaml"])
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// INFO holds no password (requirepass, masterauth and the ACL are not in
// it: a real server's INFO everything was checked for them), but a field
// whose name says it is secret has its value cut, unless the value is a
// count: a number, or the name=number list of a commandstats or
// latencystats line. Everything else stays as the server wrote it.
func TestRedactInfo(t *testing.T) {
	info := "# Server\r\nvalkey_version:8.1.1\r\nexecutable:/usr/bin/valkey-server\r\n" +
		"# Stats\r\nacl_access_denied_auth:3\r\nkeyspace_hits:10\r\n" +
		"# Replication\r\nrole:slave\r\nmaster_host:cache-0.cache-headless\r\nmaster_auth:hunter2-s3cret\r\n" +
		"# Commandstats\r\ncmdstat_auth:calls=1,usec=10,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"# Latencystats\r\nlatency_percentiles_usec_auth:p50=10.047,p99=10.047,p99.9=10.047\r\n" +
		"# Modules\r\nmodule:name=vault,ver=1,api_token=abc123\r\nsome_SECRET_key:s3\r\nsentinel_password:\r\n"
	got, cut := redactInfo([]byte(info))
	want := strings.NewReplacer("master_auth:hunter2-s3cret\r", "master_auth:<cut out>",
		"some_SECRET_key:s3\r", "some_SECRET_key:<cut out>", "sentinel_password:\r", "sentinel_password:<cut out>").Replace(info)
	if string(got) != want || cut != 3 {
		t.Errorf("redactInfo cut %d:\n%q\nwant 3:\n%q", cut, got, want)
	}
}
