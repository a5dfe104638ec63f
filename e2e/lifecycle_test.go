//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestOperatorLifecycle walks the ways an operator is installed and removed,
// with a RedisPersistence that must outlive all of them, every chart pulled
// from the node's registry: the previous release (N-1) with instances on its
// server image, helm upgrade of a value, helm upgrade to this release (N),
// whose new default server image restarts the instances one at a time, helm
// uninstall (CRDs and instances kept), kubectl apply and delete of the
// release's install.yaml, and helm install again. After each upgrade to a
// release it verifies the signatures of the chart and the images it
// installed, as a user would (docs/releases.md). It leaves release N
// installed as `make e2e-install` did, for the tests after it (file order).
func TestOperatorLifecycle(t *testing.T) {
	helmBin, release, operatorNS := os.Getenv("E2E_HELM"), os.Getenv("E2E_RELEASE"), os.Getenv("E2E_NAMESPACE")
	installYAML, chartRef := os.Getenv("E2E_INSTALL_YAML"), os.Getenv("E2E_CHART")
	version, previous := os.Getenv("E2E_VERSION"), os.Getenv("E2E_PREVIOUS_VERSION")
	if helmBin == "" || release == "" || operatorNS == "" || installYAML == "" || chartRef == "" || version == "" || previous == "" {
		t.Fatal("E2E_HELM, E2E_RELEASE, E2E_NAMESPACE, E2E_INSTALL_YAML, E2E_CHART, E2E_VERSION and E2E_PREVIOUS_VERSION (two releases in the node's registry) name the chart installs to exercise: run it with `make e2e`")
	}
	chart := func(v string) []string { return chartArgs(chartRef, v, operatorNS) }
	helm := func(args ...string) { t.Helper(); runHelm(t, helmBin, args...) }
	ctx := context.Background()
	phase := phases(t)
	defer phase("")

	// Release N-1, as a user would run it before upgrading.
	phase("helm upgrade to the previous release, three instances Ready")
	helm(append([]string{"upgrade", release}, append(chart(previous), "--reuse-values", "--wait", "--timeout", "5m")...)...)
	verifySignatures(t, operatorNS, release, chartRef, previous)
	const name = "lifecycle"
	rp := create(t, name, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}})
	// Two more for the upgrade of the default server image: one that follows
	// the default like the first, one that pins the image it runs today.
	defaultImage := operatorRedisImage(t, operatorNS, release)
	follower, pinned := name+"-b", name+"-pinned"
	create(t, follower, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}})
	create(t, pinned, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}, Image: defaultImage})
	for _, n := range []string{name, follower, pinned} {
		if got := waitReady(t, n).Status.Image; got != defaultImage {
			t.Fatalf("%s: status.image %q, want the operator's --redis-image %q", n, got, defaultImage)
		}
	}
	podExec(t, name+"-0", "SET survivor yes\n", "valkey-cli")
	// setFsync changes the spec and waits until an operator has reconciled
	// it: that is the proof an operator is running and has the permissions
	// it needs.
	setFsync := func(fsync v1alpha1.AOFFsync) {
		t.Helper()
		updateRP(t, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.AOF.Fsync = fsync })
		waitReady(t, name)
		// Ready is the pod's; the option reaches the running server when the
		// operator can connect to it (status.appliedConfigHash), which an
		// enforcing network plugin allows a new operator pod a moment after
		// it starts.
		var got string
		eventually(t, 2*time.Minute, func() bool {
			got = cli(t, name, "config", "get", "appendfsync")
			return strings.HasSuffix(got, string(fsync))
		})
		if !strings.HasSuffix(got, string(fsync)) {
			t.Fatalf("2 min after the change to %s the server runs appendfsync %q", fsync, got)
		}
	}

	// helm upgrade: a changed value rolls the operator, which keeps working.
	phase("helm upgrade of a value, the operator reconciles")
	helm(append([]string{"upgrade", release}, append(chart(previous), "--reuse-values", "--set", "logLevel=debug", "--wait", "--timeout", "5m")...)...)
	deployments := &appsv1.DeploymentList{}
	if err := k8s.List(ctx, deployments, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 || !strings.Contains(strings.Join(deployments.Items[0].Spec.Template.Spec.Containers[0].Args, " "), "--zap-log-level=debug") {
		t.Fatalf("after helm upgrade --set logLevel=debug the operator Deployments are %+v", deployments.Items)
	}
	setFsync(v1alpha1.FsyncAlways)

	// helm upgrade to release N: a new operator whose default server image
	// is N's. It restarts the instances that follow the default one at a time
	// (--max-concurrent-upgrades 1), in name order, each once the one before
	// is Ready on the new image, and leaves the pinned one alone.
	phase("helm upgrade to this release, the instances rolled one at a time")
	pinnedPod := getPod(t, pinned+"-0")
	helm(append([]string{"upgrade", release}, append(chart(version), "--reuse-values", "--wait", "--timeout", "5m")...)...)
	verifySignatures(t, operatorNS, release, chartRef, version)
	upgradeImage := operatorRedisImage(t, operatorNS, release)
	if !strings.Contains(upgradeImage, "-uring"+version+"@sha256:") || upgradeImage == defaultImage {
		t.Fatalf("after the upgrade to %s the operator's --redis-image is %s (was %s); want release %s's server image by digest", version, upgradeImage, defaultImage, version)
	}
	rollout := watchRollout(t, upgradeImage, []string{name, follower}, 10*time.Minute)
	if rollout.maxRolling != 1 || strings.Join(rollout.order, ",") != name+","+follower || !rollout.waited[follower] {
		t.Errorf("the new default image rolled %v, at most %d at once, %v waited for their turn; want %s then %s, one at a time, %s waiting",
			rollout.order, rollout.maxRolling, rollout.waited, name, follower, follower)
	}
	for _, n := range []string{name, follower} {
		waitFor(t, n, 2*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
			if err := hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")(rp); err != nil {
				return err
			}
			if rp.Status.Image != upgradeImage {
				return fmt.Errorf("status.image %q, want %q", rp.Status.Image, upgradeImage)
			}
			return nil
		})
	}
	if got := cli(t, name, "get", "survivor"); got != "yes" {
		t.Fatalf("the instance lost its data in the upgrade: %q", got)
	}
	if got := waitReady(t, pinned); got.Status.Image != defaultImage || getPod(t, pinned+"-0").UID != pinnedPod.UID {
		t.Errorf("the instance that pins spec.image %s: status.image %q, pod %s (was %s)", defaultImage, got.Status.Image, getPod(t, pinned+"-0").UID, pinnedPod.UID)
	}
	// Only the first instance goes on: the others' volumes go back to the
	// test bed's pool before install.yaml comes and goes.
	for _, n := range []string{follower, pinned} {
		if err := k8s.Delete(ctx, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: namespace}}); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		_ = k8s.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + n + "-0", Namespace: namespace}})
	}

	// helm uninstall: the operator goes, the CRDs (crds.keep) and every
	// instance with its data stay.
	phase("helm uninstall")
	helm("uninstall", release, "--namespace", operatorNS, "--wait", "--timeout", "5m")
	waitGone(t, "the chart's operator Deployment", func() error {
		return k8s.List(ctx, deployments, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/instance": release})
	}, func() bool { return len(deployments.Items) == 0 })
	for _, crd := range []string{"redispersistences.persistence.uringredis.io", "redisbenchmarks.persistence.uringredis.io"} {
		if err := k8s.Get(ctx, client.ObjectKey{Name: crd}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Fatalf("CRD %s after helm uninstall: %v", crd, err)
		}
	}
	if got := cli(t, name, "get", "survivor"); got != "yes" {
		t.Fatalf("the instance lost its data when the operator was uninstalled: %q", got)
	}

	// dist/install.yaml: kubectl apply brings up an operator that takes the
	// existing instance over.
	phase("install.yaml applied, the operator reconciles")
	run(t, kubectl[0], append(kubectl[1:], "apply", "--server-side", "--force-conflicts", "-f", installYAML)...)
	run(t, kubectl[0], append(kubectl[1:], "-n", operatorNS, "rollout", "status", "deployment/uring-redis-controller-manager", "--timeout", "3m")...)
	setFsync(v1alpha1.FsyncEverySec)
	phase("install.yaml deleted, its namespace gone")
	// Deleting install.yaml deletes its CRDs and with them every instance:
	// remove ours first (and its claim) so nothing waits on a volume.
	if err := k8s.Delete(ctx, rp); err != nil {
		t.Fatal(err)
	}
	_ = k8s.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name + "-0", Namespace: namespace}})
	run(t, kubectl[0], append(kubectl[1:], "delete", "--wait", "--timeout", "5m", "-f", installYAML)...)
	ns := &corev1.Namespace{}
	waitGone(t, "namespace "+operatorNS, func() error {
		return k8s.Get(ctx, client.ObjectKey{Name: operatorNS}, ns)
	}, nil)

	// helm install again: the chart creates the CRDs and the operator anew.
	phase("helm install again, a new instance Ready")
	helm(append([]string{"install", release}, append(chart(version), "--create-namespace", "--wait", "--timeout", "5m")...)...)
	create(t, name+"-again", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}})
	waitReady(t, name+"-again")
}

// operatorRedisImage is the server image the chart's operator runs by
// default: the value of its --redis-image flag.
func operatorRedisImage(t *testing.T, operatorNS, release string) string {
	t.Helper()
	return operatorFlag(t, operatorNS, release, "--redis-image")
}

// operatorFlag is the value of flag in the operator Deployment's arguments.
func operatorFlag(t *testing.T, operatorNS, release, flag string) string {
	t.Helper()
	deployments := &appsv1.DeploymentList{}
	if err := k8s.List(context.Background(), deployments, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil {
		t.Fatal(err)
	}
	for _, d := range deployments.Items {
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(arg, flag+"="); ok {
				return v
			}
		}
	}
	t.Fatalf("no operator Deployment of release %s passes %s", release, flag)
	return ""
}

// rolloutSeen is what watchRollout saw of instances moving to a new image.
type rolloutSeen struct {
	// order in which the instances' StatefulSets took the image.
	order []string
	// maxRolling is the most instances seen on the image and not rolled out at once.
	maxRolling int
	// waited are the instances seen waiting for their turn (UpToDate UpgradePending).
	waited map[string]bool
}

// watchRollout polls the instances until each one's StatefulSet runs image
// and has rolled out, the pod Ready on it.
func watchRollout(t *testing.T, image string, names []string, timeout time.Duration) rolloutSeen {
	t.Helper()
	seen := rolloutSeen{waited: map[string]bool{}}
	taken := map[string]bool{}
	deadline := time.Now().Add(timeout)
	for {
		rolling, done := 0, 0
		for _, n := range names {
			sts := &appsv1.StatefulSet{}
			rp := &v1alpha1.RedisPersistence{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: n}, sts); err != nil {
				t.Fatal(err)
			}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: n}, rp); err != nil {
				t.Fatal(err)
			}
			if c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionUpToDate); c != nil && c.Reason == "UpgradePending" {
				seen.waited[n] = true
			}
			if serverImage(sts) != image {
				continue
			}
			if !taken[n] {
				taken[n] = true
				seen.order = append(seen.order, n)
			}
			s := sts.Status
			if s.ObservedGeneration >= sts.Generation && s.CurrentRevision == s.UpdateRevision && s.UpdatedReplicas == 1 && s.ReadyReplicas == 1 {
				done++
			} else {
				rolling++
			}
		}
		seen.maxRolling = max(seen.maxRolling, rolling)
		if done == len(names) {
			return seen
		}
		if time.Now().After(deadline) {
			fatalDescribed(t, names[len(names)-1], "after %s, %d of %v run %s and rolled out (seen: %+v)", timeout, done, names, image, seen)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func serverImage(sts *appsv1.StatefulSet) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name == "redis" {
			return c.Image
		}
	}
	return ""
}

// run runs a command and returns its output; failing, it fails the test with it.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitGone polls get until it returns NotFound, or until gone reports true
// when get succeeds with a list.
func waitGone(t *testing.T, what string, get func() error, gone func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, 5*time.Minute, true, func(context.Context) (bool, error) {
		switch err := get(); {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, fmt.Errorf("waiting for %s to go: %w", what, err)
		}
		return gone != nil && gone(), nil
	})
	if wait.Interrupted(err) {
		err = fmt.Errorf("%s still there after 5m", what)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// chartArgs name release v of the chart from the registry, with the test
// bed's values, for helm install and upgrade.
func chartArgs(chartRef, v, operatorNS string) []string {
	args := []string{chartRef, "--version", v, "--plain-http", "--namespace", operatorNS, "--values", "../charts/uring-redis-operator/ci/e2e-values.yaml"}
	return append(args, strings.Fields(os.Getenv("E2E_HELM_ARGS"))...)
}

// runHelm runs helm against the test cluster.
func runHelm(t *testing.T, helmBin string, args ...string) {
	t.Helper()
	run(t, helmBin, append([]string{"--kubeconfig", os.Getenv("KUBECONFIG")}, args...)...)
}
