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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestOperatorLifecycle walks the ways an operator is installed and removed,
// with a RedisPersistence that must outlive all of them: helm upgrade, helm
// uninstall (CRDs and instances kept), kubectl apply and delete of
// dist/install.yaml, and helm install again. It runs last (file order) and
// leaves the chart installed as `make e2e-install` did.
func TestOperatorLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("the operator lifecycle reinstalls the operator; it runs in the full suite only")
	}
	helmBin, release, operatorNS := os.Getenv("E2E_HELM"), os.Getenv("E2E_RELEASE"), os.Getenv("E2E_NAMESPACE")
	installYAML := os.Getenv("E2E_INSTALL_YAML")
	if helmBin == "" || release == "" || operatorNS == "" || installYAML == "" {
		t.Fatal("E2E_HELM, E2E_RELEASE, E2E_NAMESPACE and E2E_INSTALL_YAML name the chart install to exercise: run it with `make e2e`")
	}
	chart := []string{"../charts/uring-redis-operator", "--namespace", operatorNS, "--values", "../charts/uring-redis-operator/ci/e2e-values.yaml"}
	chart = append(chart, strings.Fields(os.Getenv("E2E_HELM_ARGS"))...)
	helm := func(args ...string) {
		t.Helper()
		run(t, helmBin, append([]string{"--kubeconfig", os.Getenv("KUBECONFIG")}, args...)...)
	}
	ctx := context.Background()

	const name = "lifecycle"
	rp := create(t, name, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}})
	waitReady(t, name)
	podExec(t, name+"-0", "SET survivor yes\n", "valkey-cli")
	// setFsync changes the spec and waits until an operator has reconciled
	// it: that is the proof an operator is running and has the permissions
	// it needs.
	setFsync := func(fsync v1alpha1.AOFFsync) {
		t.Helper()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(rp), rp); err != nil {
			t.Fatal(err)
		}
		rp.Spec.AOF.Fsync = fsync
		if err := k8s.Update(ctx, rp); err != nil {
			t.Fatal(err)
		}
		waitReady(t, name)
		if got := cli(t, name, "config", "get", "appendfsync"); !strings.HasSuffix(got, string(fsync)) {
			t.Fatalf("after the change to %s the server runs appendfsync %q", fsync, got)
		}
	}

	// helm upgrade: a changed value rolls the operator, which keeps working.
	helm(append([]string{"upgrade", release}, append(chart, "--reuse-values", "--set", "logLevel=debug", "--wait", "--timeout", "5m")...)...)
	deployments := &appsv1.DeploymentList{}
	if err := k8s.List(ctx, deployments, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 || !strings.Contains(strings.Join(deployments.Items[0].Spec.Template.Spec.Containers[0].Args, " "), "--zap-log-level=debug") {
		t.Fatalf("after helm upgrade --set logLevel=debug the operator Deployments are %+v", deployments.Items)
	}
	setFsync(v1alpha1.FsyncAlways)

	// helm uninstall: the operator goes, the CRDs (crds.keep) and every
	// instance with its data stay.
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
	run(t, kubectl[0], append(kubectl[1:], "apply", "--server-side", "--force-conflicts", "-f", installYAML)...)
	run(t, kubectl[0], append(kubectl[1:], "-n", operatorNS, "rollout", "status", "deployment/uring-redis-controller-manager", "--timeout", "3m")...)
	setFsync(v1alpha1.FsyncEverySec)
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
	helm(append([]string{"install", release}, append(chart, "--create-namespace", "--wait", "--timeout", "5m")...)...)
	create(t, name+"-again", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}})
	waitReady(t, name+"-again")
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
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := get()
		switch {
		case apierrors.IsNotFound(err):
			return
		case err == nil && gone != nil && gone():
			return
		case err != nil && !apierrors.IsNotFound(err):
			t.Fatalf("waiting for %s to go: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("%s still there after 5m", what))
		}
		time.Sleep(2 * time.Second)
	}
}
