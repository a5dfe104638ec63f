//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestDefaultInstanceIsClosed: an instance created with no word about
// security refuses a client without the password. The client is a pod with
// no label, in the instance's namespace, reaching the server through its
// Service; with the generated password the same pod is served, so the refusal
// is the server's, not the network's. The NetworkPolicy is there too; this
// cluster's network plugin (the CNI bridge) does not enforce it.
func TestDefaultInstanceIsClosed(t *testing.T) {
	createWithoutStorage(t, "closed", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	waitReady(t, "closed")
	// The outsider runs the server's image, which the node already holds, for its valkey-cli.
	server := getPod(t, "closed-0").Spec.Containers[0]
	outsider := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "outsider", Namespace: namespace},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            "redis", // outsiderCLI execs here
				Image:           server.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sleep", "600"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](999),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if err := k8s.Create(context.Background(), outsider); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), outsider) })
	eventually(t, 2*time.Minute, func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(outsider), outsider) == nil && outsider.Status.Phase == corev1.PodRunning
	})
	if outsider.Status.Phase != corev1.PodRunning {
		t.Fatalf("the outsider pod is %s: %+v", outsider.Status.Phase, outsider.Status.ContainerStatuses)
	}

	secret := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "closed-auth"}, secret); err != nil {
		t.Fatalf("no generated password Secret: %v", err)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "closed"}, &networkingv1.NetworkPolicy{}); err != nil {
		t.Errorf("no NetworkPolicy: %v", err)
	}
	t.Log("the NetworkPolicy is not enforced on this test bed (the CNI bridge plugin); the password is what refuses")

	var refused string
	eventually(t, 60*time.Second, func() bool {
		refused = outsiderCLI(t, "-h", "closed", "set", "k", "v")
		return refused != "" && !strings.Contains(refused, "Could not connect")
	})
	if !strings.Contains(refused, "NOAUTH") {
		t.Fatalf("a client without the password got %q, want NOAUTH", refused)
	}
	if got := outsiderCLI(t, "-h", "closed", "--no-auth-warning", "-a", string(secret.Data["password"]), "ping"); got != "PONG" {
		t.Fatalf("with the generated password the outsider got %q: the refusal above may not be the server's", got)
	}
	if got := outsiderCLI(t, "-h", "closed", "--no-auth-warning", "-a", "guessed", "ping"); !strings.Contains(got, "WRONGPASS") {
		t.Errorf("a wrong password got %q, want WRONGPASS", got)
	}
}

// outsiderCLI runs valkey-cli in the outsider pod; it returns what the
// command printed, error replies included.
func outsiderCLI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := append(append([]string{}, kubectl[1:]...), "-n", namespace, "exec", "outsider", "-c", "redis", "--", "valkey-cli")
	out, _ := execOutput(kubectl[0], append(cmd, args...)...)
	return strings.TrimSpace(out)
}

// eventually polls check every second until it passes or timeout passes.
func eventually(t *testing.T, timeout time.Duration, check func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !check(); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			return
		}
	}
}

// TestOperatorMetricsNeedAToken: the operator serves its metrics over HTTPS
// to a ServiceAccount bound to the chart's metrics-reader ClusterRole, and
// refuses a scrape without a token (401) or with a token not bound (403).
func TestOperatorMetricsNeedAToken(t *testing.T) {
	if code, body := scrapeOperator(t, ""); code != http.StatusUnauthorized {
		t.Errorf("a scrape without a token: status %d, want 401: %.200s", code, body)
	}
	if code, body := scrapeOperator(t, serviceAccountToken(t, "stranger")); code != http.StatusForbidden {
		t.Errorf("a scrape with an unbound ServiceAccount's token: status %d, want 403: %.200s", code, body)
	}
	if body := operatorMetrics(t); !strings.Contains(body, "controller_runtime_reconcile_total") {
		t.Errorf("an authorized scrape got no controller metrics: %.300s", body)
	}
}

// metricsReaderToken is a token of a ServiceAccount of the test namespace
// bound to the chart's ClusterRole <release>-metrics-reader.
func metricsReaderToken(t *testing.T) string {
	t.Helper()
	token := serviceAccountToken(t, "metrics-reader")
	role := envOr("E2E_RELEASE", "uring-redis-operator") + "-metrics-reader"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "metrics-reader", Namespace: namespace}},
	}
	if err := k8s.Create(context.Background(), binding); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	return token
}

// serviceAccountToken makes (or reuses) a ServiceAccount of the test
// namespace and returns a short-lived token of it.
func serviceAccountToken(t *testing.T, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if err := k8s.Create(context.Background(), sa); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := k8s.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// scrapeOperator GETs the operator's /metrics through a port-forward to its
// pod, with token as bearer token unless it is empty. The API server's pod
// proxy would not do: it drops the Authorization header.
func scrapeOperator(t *testing.T, token string) (int, string) {
	t.Helper()
	operatorNS := envOr("E2E_NAMESPACE", "uring-redis-system")
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/name": "uring-redis-operator"}); err != nil {
		t.Fatal(err)
	}
	var pod string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			pod = p.Name
		}
	}
	if pod == "" {
		t.Fatalf("no running operator pod in %s", operatorNS)
	}
	cmd := exec.Command(kubectl[0], append(kubectl[1:], "-n", operatorNS, "port-forward", "pod/"+pod, ":8443")...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// "Forwarding from 127.0.0.1:40123 -> 8443"
	line, err := bufio.NewReader(stdout).ReadString('\n')
	local, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "Forwarding from "), " ->")
	if err != nil || !ok {
		t.Fatalf("kubectl port-forward said %q (%v)", line, err)
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+local+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The certificate is self-signed: the token is what the operator checks.
	httpClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
