//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// verifySignatures checks what a helm install or upgrade to chart version v
// installed the way docs/releases.md tells a user to: the chart in the node's
// registry and the four images the operator Deployment runs and passes on
// (operator, server, exporter, benchmark runner), each with the public key of
// the release that make release wrote (E2E_DIST/<v>/cosign.pub), and each
// image's signed SPDX SBOM. The node's registry has no transparency log
// beside it: --insecure-ignore-tlog, as the release was signed.
func verifySignatures(t *testing.T, operatorNS, release, chartRef, v string) {
	t.Helper()
	cosign, dist := os.Getenv("E2E_COSIGN"), os.Getenv("E2E_DIST")
	if cosign == "" || dist == "" {
		t.Fatal("E2E_COSIGN (cosign) and E2E_DIST (where make release wrote each version's cosign.pub) are not set: run it with `make e2e`")
	}
	pub := filepath.Join(dist, v, "cosign.pub")
	images := []string{operatorImage(t, operatorNS, release)}
	for _, flag := range []string{"--redis-image", "--exporter-image", "--bench-image"} {
		images = append(images, operatorFlag(t, operatorNS, release, flag))
	}
	cosignVerify := func(command string, args ...string) {
		t.Helper()
		cmd := exec.Command(cosign, append([]string{command, "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("release %s: cosign %s: %v\n%s", v, strings.Join(cmd.Args[1:], " "), err, out)
		}
	}
	cosignVerify("verify", strings.TrimPrefix(chartRef, "oci://")+":"+v)
	for _, image := range images {
		if !strings.Contains(image, "@sha256:") {
			t.Fatalf("release %s runs %s, not an image by digest", v, image)
		}
		cosignVerify("verify", image)
		cosignVerify("verify-attestation", "--type", "spdxjson", image)
	}
}

// operatorImage is the image of the chart's operator Deployment.
func operatorImage(t *testing.T, operatorNS, release string) string {
	t.Helper()
	deployments := &appsv1.DeploymentList{}
	if err := k8s.List(context.Background(), deployments, client.InNamespace(operatorNS), client.MatchingLabels{"app.kubernetes.io/instance": release}); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 {
		t.Fatalf("%d operator Deployments of release %s, want 1", len(deployments.Items), release)
	}
	return deployments.Items[0].Spec.Template.Spec.Containers[0].Image
}
