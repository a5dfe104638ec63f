//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestUpgradeFromRelease upgrades the release users run today to this tree
// the way docs/upgrading.md says. The release
// (E2E_RELEASED_VERSION) is built from its own commit by `make e2e-upgrade`
// (hack/released.sh) and installed with helm; on it run an instance with the
// default generated password and one opened with spec.auth.disabled, with
// data. Then helm upgrade --reset-then-reuse-values to this tree: each instance rolls
// onto this release's server image, one at a time, and keeps its data, its
// password Secret (the same object and password) or its lack of a password;
// the ACL users appear only where there is a password, and the exporter
// signs in as its user. It needs a cluster with no operator on it (make
// e2e-upgrade brings one up) and says so when run anywhere else.
func TestUpgradeFromRelease(t *testing.T) {
	released := os.Getenv("E2E_RELEASED_VERSION")
	if released == "" {
		t.Skip("E2E_RELEASED_VERSION is not set: the upgrade from the release users run needs a cluster with no operator yet; run it with `make e2e-upgrade`")
	}
	helmBin, release, operatorNS := os.Getenv("E2E_HELM"), os.Getenv("E2E_RELEASE"), os.Getenv("E2E_NAMESPACE")
	chartRef, version := os.Getenv("E2E_CHART"), os.Getenv("E2E_VERSION")
	ctx := context.Background()
	deployments := &appsv1.DeploymentList{}
	if err := k8s.List(ctx, deployments, client.MatchingLabels{"app.kubernetes.io/name": "uring-redis-operator"}); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) > 0 {
		t.Fatalf("an operator runs already (%s/%s): the upgrade starts from a cluster without one (make e2e-down, then make e2e-upgrade)",
			deployments.Items[0].Namespace, deployments.Items[0].Name)
	}
	chart := func(v string) []string { return chartArgs(chartRef, v, operatorNS) }
	helm := func(args ...string) { t.Helper(); runHelm(t, helmBin, args...) }

	// The release, as its users installed it.
	helm(append([]string{"install", release}, append(chart(released), "--create-namespace", "--wait", "--timeout", "5m")...)...)
	releasedImage := operatorRedisImage(t, operatorNS, release)
	create(t, "kept", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}})
	create(t, "open", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Auth: &v1alpha1.AuthSpec{Disabled: true}})
	for _, n := range []string{"kept", "open"} {
		if got := waitReady(t, n).Status.Image; got != releasedImage {
			t.Fatalf("%s on release %s: status.image %q, want %q", n, released, got, releasedImage)
		}
		podExec(t, n+"-0", "SET survivor "+n+"\n", "valkey-cli")
	}
	before := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kept-auth"}, before); err != nil {
		t.Fatalf("release %s generated no password for the default instance: %v", released, err)
	}
	password := string(before.Data["password"])

	// helm upgrade to this tree with the values the release was installed
	// with, as the README says: --reset-then-reuse-values. (--reuse-values
	// would render the new chart with the old chart's defaults, the old
	// image digests among them, and keep running the release's images.)
	helm(append([]string{"upgrade", release}, append(chart(version), "--reset-then-reuse-values", "--wait", "--timeout", "5m")...)...)
	// The release users run was published unsigned; this one is signed.
	verifySignatures(t, operatorNS, release, chartRef, version)
	upgradeImage := operatorRedisImage(t, operatorNS, release)
	if upgradeImage == releasedImage {
		t.Fatalf("the upgrade kept the server image %s", upgradeImage)
	}
	rollout := watchRollout(t, upgradeImage, []string{"kept", "open"}, 10*time.Minute)
	if rollout.maxRolling != 1 {
		t.Errorf("%d instances rolled at once, want one at a time (seen: %+v)", rollout.maxRolling, rollout)
	}
	for _, n := range []string{"kept", "open"} {
		waitFor(t, n, 2*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
			if err := hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")(rp); err != nil {
				return err
			}
			return hasCondition(v1alpha1.ConditionUpToDate, metav1.ConditionTrue, "")(rp)
		})
		if got := cli(t, n, "get", "survivor"); got != n {
			t.Errorf("%s lost its data in the upgrade: survivor = %q", n, got)
		}
	}

	// The password, unchanged: the same Secret, and the server takes it.
	after := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kept-auth"}, after); err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID || string(after.Data["password"]) != password {
		t.Errorf("the upgrade replaced the password Secret kept-auth (UID %s -> %s, password changed: %v)",
			before.UID, after.UID, string(after.Data["password"]) != password)
	}
	if got := podExec(t, "kept-0", "", "sh", "-c", `unset REDISCLI_AUTH; valkey-cli --no-auth-warning -a "$1" ping`, "sh", password); got != "PONG" {
		t.Errorf("the release's password got %q after the upgrade", got)
	}
	// No password, still none.
	if got := podExec(t, "open-0", "", "sh", "-c", "unset REDISCLI_AUTH; valkey-cli ping"); got != "PONG" {
		t.Errorf("the instance without a password got %q for a PING without one after the upgrade", got)
	}

	// The ACL users where there is a password, and the exporter signed in as its own.
	acl := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "kept-acl"}, acl); err != nil {
		fatalDescribed(t, "kept", "no ACL users' Secret after the upgrade: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "open-acl"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the instance without a password got ACL users (err %v)", err)
	}
	metrics := run(t, kubectl[0], append(kubectl[1:], "get", "--raw", "/api/v1/namespaces/"+namespace+"/pods/kept-0:9121/proxy/metrics")...)
	for _, want := range []string{"\nredis_up 1\n", `key="aof_engine_uring"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("kept's exporter, signed in as its user, serves no %q", strings.TrimSpace(want))
		}
	}
	if got := podExec(t, "kept-0", "", "sh", "-c", `unset REDISCLI_AUTH; valkey-cli --no-auth-warning --user uringredis-exporter -a "$1" get survivor`, "sh", string(acl.Data["exporter"])); !strings.Contains(got, "NOPERM") {
		t.Errorf("the exporter's user got %q for a key, want NOPERM", got)
	}
}
