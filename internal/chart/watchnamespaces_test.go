package chart

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// fileRules reads the rules of a ClusterRole or Role file.
func fileRules(t *testing.T, path string) []rbacv1.PolicyRule {
	t.Helper()
	rules, err := FileRules(path)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

func chartRBAC(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	return fileRules(t, filepath.Join(Dir(), "files", "rbac", file))
}

// TestWatchNamespacesRBAC: by default the operator's ClusterRole holds every
// generated rule and no Role grants it anything outside its own namespace;
// with watchNamespaces the namespaced rules move to a Role in each watched
// namespace, bound to the operator's ServiceAccount, the ClusterRole keeps
// only the cluster-scoped ones, and the operator is told the namespaces.
func TestWatchNamespacesRBAC(t *testing.T) {
	all := permissions(fileRules(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml")))
	namespaced := permissions(chartRBAC(t, "role_namespaced.yaml"))
	clusterScoped := permissions(chartRBAC(t, "role_cluster_scoped.yaml"))
	if union := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(namespaced), clusterScoped...)))); !slices.Equal(union, all) {
		t.Fatalf("the split rules grant %q, config/rbac/role.yaml %q (run `make generate`)", union, all)
	}

	objs := render(t, nil)
	if roles := find(objs, "Role", ""); len(roles) != 1 || roles[0].GetNamespace() != Namespace {
		t.Errorf("cluster-wide mode renders %d Roles; want only the leader election's in %s", len(roles), Namespace)
	}
	if got := permissions(convert[rbacv1.ClusterRole](t, one(t, objs, "ClusterRole", "uring-redis-operator")).Rules); !slices.Contains(got, " secrets list") {
		t.Errorf("cluster-wide mode: the ClusterRole grants %q, without listing Secrets", got)
	}
	if args := strings.Join(operatorArgs(t, objs), " "); strings.Contains(args, "--watch-namespaces") {
		t.Errorf("cluster-wide mode passes %s", args)
	}

	watched := []string{"team-a", "team-b"}
	objs = render(t, values(t, "watchNamespaces: [team-a, team-b]"))
	cluster := convert[rbacv1.ClusterRole](t, one(t, objs, "ClusterRole", "uring-redis-operator"))
	if got := permissions(cluster.Rules); !slices.Equal(got, clusterScoped) {
		t.Errorf("the ClusterRole grants %q, want only the cluster-scoped %q", got, clusterScoped)
	}
	for _, p := range permissions(cluster.Rules) {
		for _, resource := range []string{"secrets", "pods", "configmaps", "statefulsets", "redispersistences"} {
			if strings.Contains(p, " "+resource+" ") {
				t.Errorf("the ClusterRole grants %q cluster-wide", p)
			}
		}
	}
	sa := convert[corev1.ServiceAccount](t, one(t, objs, "ServiceAccount", "uring-redis-operator"))
	for _, ns := range watched {
		var role *rbacv1.Role
		for _, o := range find(objs, "Role", "uring-redis-operator") {
			if o.GetNamespace() == ns {
				role = convert[rbacv1.Role](t, o)
			}
		}
		if role == nil {
			t.Fatalf("no Role in %s", ns)
		}
		if got := permissions(role.Rules); !slices.Equal(got, namespaced) {
			t.Errorf("the Role in %s grants %q, want %q", ns, got, namespaced)
		}
		var binding *rbacv1.RoleBinding
		for _, o := range find(objs, "RoleBinding", role.Name) {
			if o.GetNamespace() == ns {
				binding = convert[rbacv1.RoleBinding](t, o)
			}
		}
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: Namespace}}
		if binding == nil || binding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}) || !slices.Equal(binding.Subjects, want) {
			t.Errorf("the RoleBinding in %s is %+v; want the Role %s bound to %v", ns, binding, role.Name, want)
		}
	}
	if n := len(find(objs, "Role", "")); n != len(watched)+1 {
		t.Errorf("%d Roles rendered, want one per watched namespace and the leader election's", n)
	}
	if args := operatorArgs(t, objs); !slices.Contains(args, "--watch-namespaces=team-a,team-b") {
		t.Errorf("operator args %q lack --watch-namespaces=team-a,team-b", args)
	}
	for _, ns := range watched {
		if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	dryRunApply(t, objs)
}

func TestBadWatchNamespacesFailWithAMessage(t *testing.T) {
	for doc, want := range map[string]string{
		"watchNamespaces: [Team_A]":                          `watchNamespaces[0] "Team_A" is not a namespace name`,
		"watchNamespaces: [a, -b]":                           `watchNamespaces[1] "-b" is not a namespace name`,
		"watchNamespaces: [a, '']":                           `watchNamespaces[1] "" is not a namespace name`,
		"watchNamespaces: [1]":                               `watchNamespaces[0] "1" is not a namespace name`,
		"watchNamespaces: [" + strings.Repeat("a", 64) + "]": `is not a namespace name: at most 63`,
		"watchNamespaces: [a, b, a]":                         `watchNamespaces[2] "a" is already listed`,
		"watchNamespaces: team-a":                            "watchNamespaces: Invalid type. Expected: array",
	} {
		vals := values(t, doc)
		vals["global"] = map[string]any{"imageRegistry": testRegistry}
		_, err := Render(loadChart(t), vals)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", doc, err, want)
		}
	}
}

// TestRBACSplitFollowsTheAPIServer: hack/chart-rbac decides scope from a
// table; the API server's discovery says what each resource really is. A
// namespaced resource granted by the ClusterRole would be granted in no
// watched namespace, a cluster-scoped one in the Role nowhere at all.
func TestRBACSplitFollowsTheAPIServer(t *testing.T) {
	if err := env.InstallCRDs(testenv.CertManagerCRD(t, "certificates")); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	isNamespaced := map[string]bool{}
	for _, list := range lists {
		group, _, _ := strings.Cut(list.GroupVersion, "/")
		if !strings.Contains(list.GroupVersion, "/") {
			group = ""
		}
		for _, r := range list.APIResources {
			isNamespaced[group+" "+r.Name] = r.Namespaced
		}
	}
	for file, namespaced := range map[string]bool{"role_namespaced.yaml": true, "role_cluster_scoped.yaml": false} {
		for _, rule := range chartRBAC(t, file) {
			for _, group := range rule.APIGroups {
				for _, resource := range rule.Resources {
					scope, served := isNamespaced[group+" "+resource]
					if !served {
						t.Errorf("%s: the API server serves no %q in group %q", file, resource, group)
					} else if scope != namespaced {
						t.Errorf("%s grants %q of group %q, which the API server says is namespaced=%v", file, resource, group, scope)
					}
				}
			}
		}
	}
}

// TestWatchNamespacesRBACAuthorizes creates the RBAC the chart renders for
// two watched namespaces in the real API server and asks its authorizer
// (RBAC, as envtest runs it) what the operator's ServiceAccount may do.
func TestWatchNamespacesRBACAuthorizes(t *testing.T) {
	ctx := context.Background()
	watched, unwatched := []string{"watched-a", "watched-b"}, "unwatched"
	for _, ns := range append(slices.Clone(watched), unwatched) {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	objs := render(t, values(t, fmt.Sprintf("watchNamespaces: [%s]", strings.Join(watched, ", "))))
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatalf("creating %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
			t.Cleanup(func() {
				if err := env.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
					t.Error(err)
				}
			})
		}
	}
	sa := one(t, objs, "ServiceAccount", "uring-redis-operator").GetName()
	user := "system:serviceaccount:" + Namespace + ":" + sa
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace, "system:authenticated"}
	allowed := func(ns, verb, group, resource string) bool {
		t.Helper()
		resource, subresource, _ := strings.Cut(resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Subresource: subresource},
		}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, c := range []struct {
		namespaces      []string
		verbs           []string
		group, resource string
		want            bool
	}{
		{watched, []string{"get", "list", "watch"}, "", "secrets", true},
		{[]string{unwatched, Namespace}, []string{"get", "list", "watch"}, "", "secrets", false},
		{[]string{""}, []string{"list", "watch"}, "", "secrets", false}, // every namespace at once
		{watched, []string{"list", "watch", "patch"}, "", "pods", true},
		{[]string{unwatched}, []string{"list", "watch"}, "", "pods", false},
		{watched, []string{"create", "patch", "delete"}, "apps", "statefulsets", true},
		{[]string{unwatched}, []string{"create", "list"}, "apps", "statefulsets", false},
		{watched, []string{"list", "watch"}, "persistence.uringredis.io", "redispersistences", true},
		{watched, []string{"patch"}, "persistence.uringredis.io", "redispersistences/status", true},
		{[]string{unwatched}, []string{"list"}, "persistence.uringredis.io", "redispersistences", false},
		{watched, []string{"create"}, "", "events", true},
		{[]string{""}, []string{"get", "list", "watch"}, "", "nodes", true},
		{[]string{""}, []string{"get"}, "storage.k8s.io", "storageclasses", true},
		{[]string{""}, []string{"patch"}, "", "nodes", true}, // labelNodes, on by default
		{[]string{""}, []string{"create"}, "authorization.k8s.io", "subjectaccessreviews", true},
		{[]string{Namespace}, []string{"create", "update"}, "coordination.k8s.io", "leases", true},
		{[]string{unwatched}, []string{"create"}, "coordination.k8s.io", "leases", false},
	} {
		for _, ns := range c.namespaces {
			for _, verb := range c.verbs {
				if got := allowed(ns, verb, c.group, c.resource); got != c.want {
					t.Errorf("%s %s.%s in namespace %q: allowed=%v, want %v", verb, c.resource, c.group, ns, got, c.want)
				}
			}
		}
	}
}
