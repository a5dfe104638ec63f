package controllers

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// The operator's metrics endpoint, as the operator serves it with the role
// its markers generate: HTTPS, and a 401 without a token, a 403 for a token
// not bound to the metrics-reader ClusterRole, the metrics for one that is.
func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	mgr, err := ctrl.NewManager(env.UserConfig(operatorUser), ctrl.Options{
		Scheme:                 scheme.Scheme,
		Cache:                  CacheOptions(nil),
		Metrics:                MetricsServerOptions(addr, true, ""),
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	ns := newNamespace(t)
	reader, stranger := serviceAccountToken(t, ns, "prometheus"), serviceAccountToken(t, ns, "stranger")
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(data, role); err != nil {
		t.Fatal(err)
	}
	role.Name = "metrics-reader-" + ns
	if err := k8s.Create(context.Background(), role); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
	}); err != nil {
		t.Fatal(err)
	}

	// The certificate is self-signed: the token is what is checked.
	httpClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(scheme, token string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	eventually(t, 30*time.Second, func() error {
		code, _, err := scrape("https", reader)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		return err
	})
	for _, c := range []struct {
		desc, scheme, token string
		want                int
	}{
		{"no token", "https", "", http.StatusUnauthorized},
		{"a ServiceAccount not bound to the metrics-reader role", "https", stranger, http.StatusForbidden},
		{"a ServiceAccount bound to it", "https", reader, http.StatusOK},
	} {
		code, body, err := scrape(c.scheme, c.token)
		if err != nil {
			t.Errorf("%s: %v", c.desc, err)
			continue
		}
		if code != c.want {
			t.Errorf("%s: status %d, want %d: %.200s", c.desc, code, c.want, body)
		}
	}
	// controller-runtime answers a token the API server cannot review with 500.
	if code, _, err := scrape("https", "not-a-token"); err != nil || code == http.StatusOK {
		t.Errorf("a token the API server does not know: status %d, err %v", code, err)
	}
	if code, _, err := scrape("http", reader); err == nil && code == http.StatusOK {
		t.Error("the metrics are served over plain HTTP too")
	}
}

// serviceAccountToken creates a ServiceAccount and returns a token of it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	clientset, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
