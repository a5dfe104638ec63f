package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/chart"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

func TestParseWatchNamespaces(t *testing.T) {
	for _, c := range []struct {
		flag    string
		want    []string
		wantErr string
	}{
		{flag: "", want: nil},
		{flag: "team-a", want: []string{"team-a"}},
		{flag: "team-a, team-b", want: []string{"team-a", "team-b"}},
		{flag: "team-a,,team-b", wantErr: `"" is not a namespace name`},
		{flag: "Team_A", wantErr: `"Team_A" is not a namespace name`},
		{flag: "team-a,team-b,team-a", wantErr: `"team-a" is named twice`},
	} {
		got, err := ParseWatchNamespaces(c.flag)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: err = %v, want %q", c.flag, err, c.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, %v; want %q", c.flag, got, err, c.want)
		}
	}
}

// TestWatchNamespacesConfineTheOperator runs an operator with the cache of
// --watch-namespaces=<one namespace>, as a user that holds only what the
// chart grants in that mode: the generated cluster-scoped ClusterRole and the
// node labeler's, and the generated namespaced Role in the watched namespace.
// Its controllers, the node labeler's included, start (a watch the RBAC did not
// allow would never sync), it reconciles an instance of the watched namespace,
// and it leaves one of another namespace alone.
func TestWatchNamespacesConfineTheOperator(t *testing.T) {
	ctx := context.Background()
	watched, unwatched := newNamespace(t), newNamespace(t)
	user := "uring-redis-operator-" + watched
	bindChartRBAC(t, user, watched)

	mgr, err := ctrl.NewManager(env.UserConfig(user), ctrl.Options{
		Scheme: scheme.Scheme,
		// The instances of this test carry the label that keeps the suite's
		// operator off them; this operator takes them, in its namespace.
		Cache:                  withRedisPersistenceSelector(CacheOptions([]string{watched}), labels.SelectorFromSet(labels.Set{upgradeTestOperator: watched})),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&RedisPersistenceReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Options:                 specstest.Options,
		MaxConcurrentReconciles: 4,
		Recorder:                mgr.GetEventRecorderFor("uring-redis-operator"),
		ServerAddress:           func(*corev1.Pod) string { return "127.0.0.1:1" },
	}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&NodeLabeler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&RedisBenchmarkReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Options:                 specs.BenchmarkOptions{Image: "uring-redis-bench:test"},
		MaxConcurrentReconciles: 4,
		Recorder:                mgr.GetEventRecorderFor("uring-redis-operator"),
	}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
	})

	for _, ns := range []string{unwatched, watched} {
		if err := k8s.Create(ctx, &v1alpha1.RedisPersistence{
			ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns, Labels: map[string]string{upgradeTestOperator: watched}},
			Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone},
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, func() error {
		if err := get(t, &appsv1.StatefulSet{}, watched, "cache"); err != nil {
			return err
		}
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, watched, "cache"); err != nil {
			return err
		}
		if rp.Status.ObservedGeneration != rp.Generation {
			return fmt.Errorf("the watched instance's status is of generation %d, want %d", rp.Status.ObservedGeneration, rp.Generation)
		}
		return get(t, &corev1.ConfigMap{}, watched, specs.ConfigMapName(rp))
	})

	// Every instance the suite's other operators do not take was reconciled
	// by now if this operator reconciled it at all: it saw both at once.
	time.Sleep(2 * time.Second)
	rp := &v1alpha1.RedisPersistence{}
	if err := get(t, rp, unwatched, "cache"); err != nil {
		t.Fatal(err)
	}
	if rp.Status.ObservedGeneration != 0 || len(rp.Status.Conditions) != 0 {
		t.Errorf("the instance of the unwatched namespace has a status: %+v", rp.Status)
	}
	for _, list := range []client.ObjectList{&appsv1.StatefulSetList{}, &corev1.ConfigMapList{}, &corev1.ServiceList{}, &corev1.SecretList{}} {
		if err := k8s.List(ctx, list, client.InNamespace(unwatched)); err != nil {
			t.Fatal(err)
		}
		if items, err := meta.ExtractList(list); err != nil || len(items) != 0 {
			t.Errorf("the unwatched namespace holds %d objects of %T (%v), want none", len(items), list, err)
		}
	}
}

// bindChartRBAC grants user what the chart grants the operator with
// watchNamespaces: [ns]: the generated rule files the chart renders, bound
// the way it binds them.
func bindChartRBAC(t *testing.T, user, ns string) {
	t.Helper()
	ctx := context.Background()
	rules := func(file string) []rbacv1.PolicyRule {
		rules, err := chart.RBACRules(file)
		if err != nil {
			t.Fatal(err)
		}
		return rules
	}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	for _, obj := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules("role_cluster_scoped.yaml")},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
			Subjects:   subjects,
		},
		// The node labeler's ClusterRole, which TestMain installed.
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-node-labeler"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-labeler-role"},
			Subjects:   subjects,
		},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "uring-redis-operator", Namespace: ns}, Rules: rules("role_namespaced.yaml")},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "uring-redis-operator", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "uring-redis-operator"},
			Subjects:   subjects,
		},
	} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}
