// Package chart renders the Helm chart in charts/uring-redis-operator with
// the Helm SDK, as `helm template` and `helm install` do, for its tests.
package chart

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

const (
	// ReleaseName and Namespace are the release the tests render.
	ReleaseName = "uring-redis"
	Namespace   = "uring-redis-system"
)

// Dir is the chart's directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "charts", "uring-redis-operator")
}

// FileRules reads the rules of a ClusterRole or Role file, such as the
// chart's files/rbac/*.yaml.
func FileRules(path string) ([]rbacv1.PolicyRule, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := sigsyaml.Unmarshal(raw, role); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return role.Rules, nil
}

// RBACRules are the rules of the chart's files/rbac/<file>.
func RBACRules(file string) ([]rbacv1.PolicyRule, error) {
	return FileRules(filepath.Join(Dir(), "files", "rbac", file))
}

// Load reads the chart from Dir.
func Load() (*chart.Chart, error) { return loader.Load(Dir()) }

// Render renders ch with vals the way `helm template --api-versions` does
// for a Kubernetes v1.31 cluster serving apiVersions (group/version/Kind)
// besides the built-in kinds, and returns the objects in order.
func Render(ch *chart.Chart, vals map[string]any, apiVersions ...string) ([]*unstructured.Unstructured, error) {
	cfg := &action.Configuration{
		Releases:   storage.Init(driver.NewMemory()),
		KubeClient: &kubefake.PrintingKubeClient{Out: io.Discard},
		Log:        func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = ReleaseName
	install.Namespace = Namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.31.4", Major: "1", Minor: "31"}
	install.APIVersions = apiVersions
	rel, err := install.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	return Decode(rel.Manifest)
}

// Decode splits a multi-document YAML manifest into objects. It is strict:
// a duplicated key, which some clients reject and others resolve silently,
// is an error.
func Decode(manifest string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	reader := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading the rendered manifest: %w", err)
		}
		raw, err := sigsyaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("decoding the rendered manifest: %w\n%s", err, doc)
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, err
		}
		if obj == nil {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
}
