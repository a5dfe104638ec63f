package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func TestSplitByScope(t *testing.T) {
	dir := t.TempDir()
	role := filepath.Join(dir, "role.yaml")
	if err := os.WriteFile(role, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules:
- apiGroups: [""]
  resources: [nodes, secrets]
  verbs: [get, list, watch]
- apiGroups: [example.io]
  resources: [widgets, widgets/status]
  verbs: [patch]
- nonResourceURLs: [/metrics]
  verbs: [get]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(role, dir); err != nil {
		t.Fatal(err)
	}
	read := func(file string) (kind, name string, rules []rbacv1.PolicyRule) {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.UnmarshalStrict(raw, &out); err != nil {
			t.Fatal(err)
		}
		if out.APIVersion != rbacv1.SchemeGroupVersion.String() {
			t.Errorf("%s: apiVersion %q", file, out.APIVersion)
		}
		return out.Kind, out.Metadata.Name, out.Rules
	}
	wantNamespaced := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"example.io"}, Resources: []string{"widgets", "widgets/status"}, Verbs: []string{"patch"}}}
	if kind, name, rules := read("role_namespaced.yaml"); kind != "Role" || name != "manager-role-namespaced" || !reflect.DeepEqual(rules, wantNamespaced) {
		t.Errorf("role_namespaced.yaml: %s %s %+v", kind, name, rules)
	}
	wantCluster := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if kind, name, rules := read("role_cluster_scoped.yaml"); kind != "ClusterRole" || name != "manager-role-cluster-scoped" || !reflect.DeepEqual(rules, wantCluster) {
		t.Errorf("role_cluster_scoped.yaml: %s %s %+v", kind, name, rules)
	}
}
