//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestDefaultInstanceIsClosed: an instance created with no word about
// security refuses a client without the password. The instance's
// NetworkPolicy is checked against the live pods: it selects the server and
// admits to its port the pods labelled as its clients and the running
// operator, not an unlabelled pod. Two pods in the instance's namespace try
// it through its Service: one labelled uringredis.io/client: <name> is
// served with the generated password and refused without it (the refusal is
// the server's, not the network's), and on a cluster that enforces
// NetworkPolicies (E2E_NETWORK_POLICY=enforced: kube-router, on both of the
// suite's clusters) an unlabelled one cannot connect at all. The exporter's ACL
// user, from the instance's Secret <name>-acl, is served INFO and refused
// keys.
func TestDefaultInstanceIsClosed(t *testing.T) {
	createWithoutStorage(t, "closed", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	waitReady(t, "closed")
	// Both run the server's image, which the node already holds, for its valkey-cli.
	image := getPod(t, "closed-0").Spec.Containers[0].Image
	outsider := startCLIPod(t, "outsider", image, nil)
	startCLIPod(t, "client", image, map[string]string{"uringredis.io/client": "closed"})

	secret := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "closed-auth"}, secret); err != nil {
		t.Fatalf("no generated password Secret: %v", err)
	}
	checkNetworkPolicy(t, "closed", outsider)

	var refused string
	eventually(t, 60*time.Second, func() bool {
		refused = podCLI(t, "client", "-t", "3", "-h", "closed", "set", "k", "v")
		return refused != "" && !strings.Contains(refused, "Could not connect")
	})
	if !strings.Contains(refused, "NOAUTH") {
		t.Fatalf("a client without the password got %q, want NOAUTH", refused)
	}
	if got := podCLI(t, "client", "-h", "closed", "--no-auth-warning", "-a", string(secret.Data["password"]), "ping"); got != "PONG" {
		t.Fatalf("with the generated password the client got %q: the refusal above may not be the server's", got)
	}
	if got := podCLI(t, "client", "-h", "closed", "--no-auth-warning", "-a", "guessed", "ping"); !strings.Contains(got, "WRONGPASS") {
		t.Errorf("a wrong password got %q, want WRONGPASS", got)
	}
	// An enforcer programs a new server's rules a moment after the pod starts
	// (kube-router: seconds on a loaded node), so the refusal is awaited,
	// then must hold.
	if os.Getenv("E2E_NETWORK_POLICY") == "enforced" {
		outsiderPing := func() string {
			return podCLI(t, "outsider", "-t", "2", "-h", "closed", "--no-auth-warning", "-a", string(secret.Data["password"]), "ping")
		}
		var got string
		eventually(t, 60*time.Second, func() bool { got = outsiderPing(); return strings.Contains(got, "Could not connect") })
		for i := 0; i < 3 && strings.Contains(got, "Could not connect"); i++ {
			got = outsiderPing()
		}
		if !strings.Contains(got, "Could not connect") {
			t.Fatalf("an unlabelled pod with the password got %q: the NetworkPolicy is not enforced", got)
		}
	} else {
		t.Log("this cluster enforces no NetworkPolicy (E2E_NETWORK_POLICY unset): the unlabelled pod's exclusion is read from the policy above, not tried")
	}

	// The exporter's ACL user reads INFO and no key.
	acl := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "closed-acl"}, acl); err != nil {
		t.Fatalf("no ACL users' Secret: %v", err)
	}
	exporter := []string{"-h", "closed", "--no-auth-warning", "--user", "uringredis-exporter", "-a", string(acl.Data["exporter"])}
	if got := podCLI(t, "client", append(exporter, "info", "server")...); !strings.Contains(got, "valkey_version:") {
		t.Errorf("the exporter's user got %q for INFO", got)
	}
	if got := podCLI(t, "client", append(exporter, "get", "k")...); !strings.Contains(got, "NOPERM") {
		t.Errorf("the exporter's user got %q for GET, want NOPERM", got)
	}
}

// The ports the NetworkPolicy guards: the server's and the exporter's.
const (
	serverPort   = 6379
	exporterPort = 9121
)

// checkNetworkPolicy reads the NetworkPolicy of instance name against the
// live objects: it selects the server's pod; its server port admits a pod
// labelled uringredis.io/client: <name> and the running operator pod (from
// the namespace the chart runs it in), not the unlabelled outsider; its
// exporter port admits pods labelled as the chart's Prometheus, not the
// outsider.
func checkNetworkPolicy(t *testing.T, name string, outsider *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	np := &networkingv1.NetworkPolicy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, np); err != nil {
		t.Fatalf("no NetworkPolicy: %v", err)
	}
	if !selects(t, &np.Spec.PodSelector, getPod(t, name+"-0").Labels) {
		t.Errorf("the NetworkPolicy's pod selector %v does not select the server's pod", np.Spec.PodSelector)
	}
	labelsOf := func(ns string) map[string]string {
		n := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			t.Fatal(err)
		}
		return n.Labels
	}
	here := labelsOf(namespace)
	if admits(t, np, serverPort, outsider, here) || admits(t, np, exporterPort, outsider, here) {
		t.Errorf("the NetworkPolicy admits the unlabelled outsider: %+v", np.Spec.Ingress)
	}
	labelled := outsider.DeepCopy()
	labelled.Labels = map[string]string{"uringredis.io/client": name}
	if !admits(t, np, serverPort, labelled, here) {
		t.Errorf("the NetworkPolicy does not admit a pod labelled uringredis.io/client=%s to the server port: %+v", name, np.Spec.Ingress)
	}
	operatorNS := envOr("E2E_NAMESPACE", "uring-redis-system")
	operators := &corev1.PodList{}
	if err := k8s.List(ctx, operators, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/name": "uring-redis-operator"}); err != nil {
		t.Fatal(err)
	}
	running := 0
	for i := range operators.Items {
		if pod := &operators.Items[i]; pod.Status.Phase == corev1.PodRunning {
			running++
			if !admits(t, np, serverPort, pod, labelsOf(operatorNS)) {
				t.Errorf("the NetworkPolicy does not admit the operator's pod %s (labels %v) to the server port: %+v", pod.Name, pod.Labels, np.Spec.Ingress)
			}
		}
	}
	if running == 0 {
		t.Errorf("no running operator pod in %s", operatorNS)
	}
	prometheus := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}}
	if !admits(t, np, exporterPort, prometheus, map[string]string{corev1.LabelMetadataName: "monitoring"}) {
		t.Errorf("the NetworkPolicy does not admit the chart's Prometheus pods to the exporter: %+v", np.Spec.Ingress)
	}
}

// admits says whether np lets pod, in a namespace labelled nsLabels, open a
// TCP connection to port of the pods it selects, reading peers as
// NetworkPolicy defines them: a podSelector alone means np's namespace, a
// namespaceSelector alone every pod of the namespaces it selects, both
// together the pods both select. IP blocks are not read.
func admits(t *testing.T, np *networkingv1.NetworkPolicy, port int32, pod *corev1.Pod, nsLabels map[string]string) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		portMatches := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			tcp := p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP
			portMatches = portMatches || tcp && (p.Port == nil || p.Port.IntValue() == int(port))
		}
		if !portMatches {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil {
				continue
			}
			if peer.NamespaceSelector == nil && pod.Namespace != np.Namespace ||
				peer.NamespaceSelector != nil && !selects(t, peer.NamespaceSelector, nsLabels) {
				continue
			}
			if peer.PodSelector == nil || selects(t, peer.PodSelector, pod.Labels) {
				return true
			}
		}
	}
	return false
}

func selects(t *testing.T, selector *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(set))
}

// TestPodSecurityLevels: the suite's namespace enforces the Pod Security
// level restricted — a pod outside it is refused — so every instance,
// Sentinel, volume probe and benchmark runner of the suite ran under it; the
// operator runs in the release namespace, which `make e2e-install` labels
// restricted too; the chart's node agents are ready in the namespace the
// chart made for them, labelled privileged.
func TestPodSecurityLevels(t *testing.T) {
	ctx := context.Background()
	root := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "unused", Command: []string{"true"}}}},
	}
	err := k8s.Create(ctx, root, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
		t.Errorf("a pod without a security context in namespace %s: err = %v, want the restricted level's refusal", namespace, err)
	}

	operatorNS := envOr("E2E_NAMESPACE", "uring-redis-system")
	level := func(ns string) string {
		n := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			t.Fatal(err)
		}
		return n.Labels["pod-security.kubernetes.io/enforce"]
	}
	if got := level(operatorNS); got != "restricted" {
		t.Errorf("the release namespace %s enforces %q, want restricted (make e2e-install labels it)", operatorNS, got)
	}
	agentsNS := operatorNS + "-node"
	if got := level(agentsNS); got != "privileged" {
		t.Errorf("the chart's node agents' namespace %s enforces %q, want privileged", agentsNS, got)
	}
	agents := &appsv1.DaemonSetList{}
	if err := k8s.List(ctx, agents, client.InNamespace(agentsNS)); err != nil {
		t.Fatal(err)
	}
	var ready []string
	for _, ds := range agents.Items {
		if ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled {
			ready = append(ready, ds.Name)
		} else {
			t.Errorf("DaemonSet %s/%s: %d of %d pods ready", agentsNS, ds.Name, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		}
	}
	if !slices.ContainsFunc(ready, func(name string) bool { return strings.HasSuffix(name, "-seccomp-installer") }) {
		t.Errorf("ready node agents in %s: %v, want the seccomp installer among them", agentsNS, ready)
	}
}

// startCLIPod runs a pod named name with labels in the test namespace, a
// restricted container "redis" of image that sleeps; podCLI execs in it.
func startCLIPod(t *testing.T, name, image string, labels map[string]string) *corev1.Pod {
	t.Helper()
	pod := restrictedPod(name, "redis", image, labels, "sleep", "600")
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod) })
	eventually(t, 2*time.Minute, func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), pod) == nil && pod.Status.Phase == corev1.PodRunning
	})
	if pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("the pod %s is %s: %+v", name, pod.Status.Phase, pod.Status.ContainerStatuses)
	}
	return pod
}

// restrictedPod is a pod of one container, of the suite's namespace, that the
// Pod Security level restricted admits: it runs command as the server image's
// user (999), with no token and no grace period.
func restrictedPod(name, container, image string, labels map[string]string, command ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            container,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         command,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](999),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// podCLI runs valkey-cli in a pod of startCLIPod; it returns what the command
// printed, error replies included.
func podCLI(t *testing.T, pod string, args ...string) string {
	t.Helper()
	cmd := append(append([]string{}, kubectl[1:]...), "-n", namespace, "exec", pod, "-c", "redis", "--", "valkey-cli")
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

// operatorLeaseName is the operator's leader election Lease (cmd/operator).
const operatorLeaseName = "uring-redis-operator.uringredis.io"

// scrapeOperator GETs the operator's /metrics through a port-forward to its
// pod, with token as bearer token unless it is empty. The API server's pod
// proxy would not do: it drops the Authorization header. With a standby
// (kind's operator-values.yaml) it scrapes the leader: only the leader runs
// the controllers and exports what they measure, as a Prometheus scraping
// both pods sees.
func scrapeOperator(t *testing.T, token string) (int, string) {
	t.Helper()
	operatorNS := envOr("E2E_NAMESPACE", "uring-redis-system")
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/name": "uring-redis-operator"}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNS, Name: operatorLeaseName}, lease); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	// client-go's leader election holds the Lease as <hostname>_<uuid>, and a pod's hostname is its name.
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	var pod string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if pod == "" || strings.HasPrefix(holder, p.Name+"_") {
			pod = p.Name
		}
	}
	if pod == "" {
		t.Fatalf("no running operator pod in %s", operatorNS)
	}
	local, stop := portForward(t, operatorNS, pod, 8443)
	defer stop()
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

// portForward forwards a local port to port of pod in ns with kubectl
// port-forward and returns the local address and how to stop it.
func portForward(t *testing.T, ns, pod string, port int) (string, func()) {
	t.Helper()
	cmd := exec.Command(kubectl[0], append(kubectl[1:], "-n", ns, "port-forward", "pod/"+pod, fmt.Sprintf(":%d", port))...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	// "Forwarding from 127.0.0.1:40123 -> 8443"
	line, err := bufio.NewReader(stdout).ReadString('\n')
	local, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "Forwarding from "), " ->")
	if err != nil || !ok {
		stop()
		t.Fatalf("kubectl port-forward said %q (%v)", line, err)
	}
	return local, stop
}
