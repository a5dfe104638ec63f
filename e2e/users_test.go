//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestApplicationUserRotates: an application user of spec.users writes its
// keys and is refused others; a new password in its Secret lets a new
// client in while a connected client keeps working, the previous password
// works for spec.passwordGracePeriod and then not, and no pod restarted.
func TestApplicationUserRotates(t *testing.T) {
	const name, grace = "app-users", 30 * time.Second
	ctx := context.Background()
	create(t, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec},
		PasswordGracePeriod: &metav1.Duration{Duration: grace},
		Users:               []v1alpha1.UserSpec{{Name: "orders", Keys: []string{"orders:*"}, Commands: []string{"+@read", "+@write", "+ping"}}},
	})
	waitReady(t, name)
	rp := waitFor(t, name, 2*time.Minute, hasCondition(v1alpha1.ConditionUsersReady, metav1.ConditionTrue, "Applied"))
	restarts := rp.Status.Restarts
	pod := getPod(t, name+"-0")

	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name + "-user-orders"}, secret); err != nil {
		t.Fatal(err)
	}
	oldPassword := string(secret.Data["password"])
	addr, stop := portForward(t, namespace, name+"-0", 6379)
	defer stop()
	connect := func(password string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, Username: "orders", Password: password, DisableIdentity: true, MaxRetries: -1})
	}
	signIn := func(password string) error {
		c := connect(password)
		defer func() { _ = c.Close() }()
		return c.Ping(ctx).Err()
	}
	orders := connect(oldPassword)
	defer func() { _ = orders.Close() }()
	held := orders.Conn()
	defer func() { _ = held.Close() }()
	if err := held.Set(ctx, "orders:1", "v", 0).Err(); err != nil {
		t.Fatalf("orders writes its keys: %v", err)
	}
	if err := held.Set(ctx, "billing:1", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("orders writes billing:1: %v, want NOPERM", err)
	}

	newPassword := fmt.Sprintf("rotated-%d", rand.Int63())
	secret.Data["password"] = []byte(newPassword)
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, time.Minute, func() bool { return signIn(newPassword) == nil })
	if err := signIn(newPassword); err != nil {
		t.Fatalf("the new password, a minute after the rotation: %v", err)
	}
	t.Logf("the new password signed in %s after the Secret changed", time.Since(start).Round(time.Second))
	if err := signIn(oldPassword); err != nil && time.Since(start) < grace-5*time.Second {
		t.Errorf("the previous password is refused within the grace period: %v", err)
	}
	eventually(t, grace+time.Minute, func() bool { return signIn(oldPassword) != nil })
	if err := signIn(oldPassword); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("the previous password %s after the rotation: %v, want WRONGPASS", time.Since(start).Round(time.Second), err)
	}
	if err := held.Set(ctx, "orders:2", "v", 0).Err(); err != nil {
		t.Errorf("the client connected before the rotation: %v", err)
	}

	after := getPod(t, name+"-0")
	rp = waitFor(t, name, time.Minute, func(*v1alpha1.RedisPersistence) error { return nil })
	if after.UID != pod.UID || serverRestarts(after) != serverRestarts(pod) || rp.Status.Restarts != restarts {
		t.Errorf("the pod was replaced or restarted: uid %s -> %s, restarts %d -> %d, status.restarts %d -> %d",
			pod.UID, after.UID, serverRestarts(pod), serverRestarts(after), restarts, rp.Status.Restarts)
	}
}

// TestWatchNamespacesConfinesTheOperator: the chart installed with
// watchNamespaces reconciles an instance in a watched namespace, and its
// ServiceAccount may read Secrets there and not in a third namespace
// (kubectl auth can-i); the release goes back to every namespace after.
func TestWatchNamespacesConfinesTheOperator(t *testing.T) {
	helmBin, release, operatorNS := os.Getenv("E2E_HELM"), os.Getenv("E2E_RELEASE"), os.Getenv("E2E_NAMESPACE")
	chartRef, version := os.Getenv("E2E_CHART"), os.Getenv("E2E_VERSION")
	if helmBin == "" || release == "" || operatorNS == "" || chartRef == "" || version == "" {
		t.Fatal("E2E_HELM, E2E_RELEASE, E2E_NAMESPACE, E2E_CHART and E2E_VERSION name the release to upgrade: run it with `make e2e`")
	}
	ctx := context.Background()
	watched, third := namespace+"-watched", namespace+"-third"
	for _, ns := range []string{watched, third} {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: restrictedLabels}}
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	}
	upgrade := func(set ...string) {
		t.Helper()
		runHelm(t, helmBin, append(append([]string{"upgrade", release}, chartArgs(chartRef, version, operatorNS)...), append([]string{"--reuse-values", "--wait", "--timeout", "5m"}, set...)...)...)
	}
	upgrade("--set-json", fmt.Sprintf(`watchNamespaces=[%q,%q]`, namespace, watched))
	t.Cleanup(func() { upgrade("--set-json", "watchNamespaces=[]") })

	deployments := &appsv1.DeploymentList{}
	if err := k8s.List(ctx, deployments, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil || len(deployments.Items) == 0 {
		t.Fatalf("the operator's Deployment: %v", err)
	}
	sa := "system:serviceaccount:" + operatorNS + ":" + deployments.Items[0].Spec.Template.Spec.ServiceAccountName
	canI := func(verb, resource, ns string) string {
		args := []string{"auth", "can-i", verb, resource, "--as", sa}
		if ns != "" {
			args = append(args, "-n", ns)
		}
		out, _ := execOutput(kubectl[0], append(kubectl[1:], args...)...)
		// The answer is the last line (kubectl may warn before it).
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return strings.TrimSpace(lines[len(lines)-1])
	}
	for _, c := range []struct{ verb, resource, ns, want string }{
		{"get", "secrets", watched, "yes"}, {"list", "secrets", namespace, "yes"}, {"patch", "statefulsets", watched, "yes"},
		{"get", "secrets", third, "no"}, {"list", "secrets", third, "no"}, {"list", "pods", third, "no"},
		{"list", "nodes", "", "yes"},
	} {
		if got := canI(c.verb, c.resource, c.ns); got != c.want {
			t.Errorf("kubectl auth can-i %s %s -n %q as the operator: %q, want %q", c.verb, c.resource, c.ns, got, c.want)
		}
	}

	// An instance in the watched namespace is reconciled; one in the third is not.
	spec := v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone}
	for _, ns := range []string{watched, third} {
		rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "confined", Namespace: ns}, Spec: spec}
		if err := k8s.Create(ctx, rp); err != nil {
			t.Fatal(err)
		}
	}
	var rp v1alpha1.RedisPersistence
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: watched, Name: "confined"}, &rp); err == nil && rp.Status.Phase == v1alpha1.PhaseReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance in the watched namespace is not Ready: phase %q, conditions %+v", rp.Status.Phase, rp.Status.Conditions)
		}
		time.Sleep(2 * time.Second)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: third, Name: "confined"}, &rp); err != nil {
		t.Fatal(err)
	}
	var sts appsv1.StatefulSetList
	if err := k8s.List(ctx, &sts, client.InNamespace(third)); err != nil {
		t.Fatal(err)
	}
	if rp.Status.ObservedGeneration != 0 || len(sts.Items) != 0 {
		t.Errorf("the instance in the unwatched namespace was reconciled: observedGeneration %d, %d StatefulSets", rp.Status.ObservedGeneration, len(sts.Items))
	}
}
