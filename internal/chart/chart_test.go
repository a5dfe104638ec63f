package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

var env *testenv.Env

// servedAPIVersions is what the envtest API server serves, as Helm's
// .Capabilities.APIVersions lists it: group/version and group/version/Kind.
var servedAPIVersions []string

const spoAPIVersion = "security-profiles-operator.x-k8s.io/v1beta1/SeccompProfile"

func TestMain(m *testing.M) {
	crds := os.Getenv("PROMETHEUS_OPERATOR_CRDS")
	if crds == "" {
		println("PROMETHEUS_OPERATOR_CRDS is not set: run the tests with `make test`, which fetches the Prometheus Operator CRDs")
		os.Exit(1)
	}
	env = testenv.Start(m, crds)
	code := func() int {
		if err := setup(); err != nil {
			println(err.Error())
			return 1
		}
		return m.Run()
	}()
	env.Stop(code != 0)
	os.Exit(code)
}

func setup() error {
	// The node agents' namespace is one the chart creates, but a dry run
	// persists nothing: the objects in it need it to exist.
	for _, name := range []string{Namespace, nodeAgentsNamespace} {
		if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return err
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		return err
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		return err
	}
	for _, list := range lists {
		servedAPIVersions = append(servedAPIVersions, list.GroupVersion)
		for _, r := range list.APIResources {
			servedAPIVersions = append(servedAPIVersions, list.GroupVersion+"/"+r.Kind)
		}
	}
	return nil
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// testRegistry is the registry tests render with: the chart in git names none.
const testRegistry = "registry.example.com/uring-redis"

// render renders the chart with vals, in testRegistry unless vals name a registry.
func render(t *testing.T, vals map[string]any, apiVersions ...string) []*unstructured.Unstructured {
	t.Helper()
	vals = maps.Clone(vals)
	if vals == nil {
		vals = map[string]any{}
	}
	if _, ok := vals["global"]; !ok {
		vals["global"] = map[string]any{"imageRegistry": testRegistry}
	}
	objs, err := Render(loadChart(t), vals, apiVersions...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func values(t *testing.T, doc string) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValues([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func ciValues(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(Dir(), "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ci/*-values.yaml: %v", err)
	}
	out := map[string]map[string]any{}
	for _, f := range files {
		vals, err := chartutil.ReadValuesFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = vals
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, nameSuffix string) []*unstructured.Unstructured {
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), nameSuffix) {
			found = append(found, o)
		}
	}
	return found
}

func one(t *testing.T, objs []*unstructured.Unstructured, kind, nameSuffix string) *unstructured.Unstructured {
	t.Helper()
	found := find(objs, kind, nameSuffix)
	if len(found) != 1 {
		t.Fatalf("want one %s named *%s, found %d", kind, nameSuffix, len(found))
	}
	return found[0]
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// dryRunApply server-side applies every object with DryRunAll: the real API
// server validates it (schemas, CEL, defaulting) and persists nothing.
// Kinds the server does not serve are reported, not skipped silently.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		err := env.Client.Patch(ctx, o.DeepCopy(), client.Apply, client.DryRunAll,
			client.FieldOwner("chart-test"), client.ForceOwnership)
		if meta.IsNoMatchError(err) && o.GetAPIVersion()+"/"+o.GetKind() == spoAPIVersion {
			t.Logf("%s %s not dry-run: the Security Profiles Operator CRD is not installed in envtest", o.GetKind(), o.GetName())
			continue
		}
		if err != nil {
			t.Errorf("server-side dry run of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
}

func TestCIValuesPassServerSideDryRun(t *testing.T) {
	for name, vals := range ciValues(t) {
		t.Run(name, func(t *testing.T) {
			objs := render(t, vals, append(slices.Clone(servedAPIVersions), spoAPIVersion)...)
			if len(objs) == 0 {
				t.Fatal("nothing rendered")
			}
			dryRunApply(t, objs)
		})
	}
}

func TestHelmLint(t *testing.T) {
	for name, vals := range ciValues(t) {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.KubeVersion = &chartutil.KubeVersion{Version: "v1.31.4", Major: "1", Minor: "31"}
			result := lint.Run([]string{Dir()}, vals)
			for _, msg := range result.Messages {
				t.Log(msg)
			}
			for _, err := range result.Errors {
				t.Error(err)
			}
		})
	}
}

func TestInstallYAMLPassesServerSideDryRun(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(testenv.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(string(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if len(find(objs, "Deployment", "")) != 1 || len(find(objs, "CustomResourceDefinition", "")) == 0 {
		t.Fatalf("config/default lacks the operator Deployment or the CRDs")
	}
	dryRunApply(t, objs)
}

func TestCRDsAreConfigsCRDsKeptOnUninstall(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	for _, keep := range []bool{true, false} {
		objs := render(t, values(t, fmt.Sprintf("crds: {keep: %v}", keep)))
		crds := find(objs, "CustomResourceDefinition", "")
		if len(crds) != len(files) {
			t.Fatalf("keep=%v: %d CRDs rendered, %d in config/crd/bases (run `make generate`)", keep, len(crds), len(files))
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want unstructured.Unstructured
			if err := sigsyaml.Unmarshal(raw, &want.Object); err != nil {
				t.Fatal(err)
			}
			got := one(t, objs, "CustomResourceDefinition", want.GetName())
			if !reflect.DeepEqual(got.Object["spec"], want.Object["spec"]) {
				t.Errorf("the chart's %s differs from %s (run `make generate`)", want.GetName(), f)
			}
			policy, set := got.GetAnnotations()["helm.sh/resource-policy"]
			if keep != set || (set && policy != "keep") {
				t.Errorf("keep=%v: %s has resource-policy %q (set=%v)", keep, got.GetName(), policy, set)
			}
			if got.GetLabels()["app.kubernetes.io/part-of"] != "uring-redis-operator" {
				t.Errorf("%s lacks the part-of label that the README's cleanup selects on", got.GetName())
			}
		}
	}
	if crds := find(render(t, values(t, "crds: {enabled: false}")), "CustomResourceDefinition", ""); len(crds) != 0 {
		t.Errorf("crds.enabled=false rendered %d CRDs", len(crds))
	}
}

func TestClusterRoleHasConfigRules(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Rules []map[string]any `json:"rules"`
	}
	if err := sigsyaml.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	role := one(t, render(t, nil), "ClusterRole", "uring-redis-operator")
	got, _, _ := unstructured.NestedSlice(role.Object, "rules")
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want.Rules)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("the chart's ClusterRole differs from config/rbac/role.yaml (run `make generate`):\n got %s\nwant %s", gotJSON, wantJSON)
	}
}

func operatorArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	d := convert[struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}](t, one(t, objs, "Deployment", "uring-redis-operator"))
	return d.Spec.Template.Spec.Containers[0].Args
}

func TestOperatorDeploymentIsLockedDown(t *testing.T) {
	d := convert[struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}](t, one(t, render(t, nil), "Deployment", "uring-redis-operator"))
	pod := d.Spec.Template.Spec
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v: want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v: want a read-only root, no privilege escalation, drop ALL", sc)
	}
	for _, arg := range []string{"--leader-elect", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081",
		"--uring-seccomp-profile=uring-redis/io_uring.json", "--local-nvme-storage-class=uring-local-nvme",
		"--gp3-storage-class=uring-gp3", "--redis-image=" + testRegistry + "/redis-uring:8.1.1-uring0.2.0",
		"--bench-image=" + testRegistry + "/uring-redis-bench:0.2.0",
		"--exporter-image=" + testRegistry + "/oliver006/redis_exporter:v1.74.0", "--image-pull-policy=IfNotPresent"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("operator args %q lack %s", c.Args, arg)
		}
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes: liveness %+v readiness %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if c.Image != testRegistry+"/uring-redis-operator:0.2.0" || c.ImagePullPolicy != corev1.PullIfNotPresent || len(pod.ImagePullSecrets) != 0 {
		t.Errorf("image %s, pull policy %s, pull secrets %v: want the appVersion tag in the global registry, IfNotPresent, none", c.Image, c.ImagePullPolicy, pod.ImagePullSecrets)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--image-pull-secrets") }) {
		t.Errorf("operator args %q pass --image-pull-secrets without any", c.Args)
	}
}

func TestSeccompInstallerMountsOnlyTheProfileDirectory(t *testing.T) {
	objs := render(t, nil)
	ds := convert[struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}](t, one(t, objs, "DaemonSet", "seccomp-installer"))
	pod := ds.Spec.Template.Spec
	var hostPaths []string
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	if !reflect.DeepEqual(hostPaths, []string{"/var/lib/kubelet/seccomp/uring-redis"}) {
		t.Errorf("host paths %q: want only the profile's directory in the kubelet's seccomp directory", hostPaths)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the installer needs no API access, yet mounts a service account token")
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.Privileged != nil {
		t.Errorf("installer security context %+v", sc)
	}
	if !slices.Contains(c.Command, "--target=/host/seccomp/io_uring.json") {
		t.Errorf("installer command %q", c.Command)
	}

	cm := convert[corev1.ConfigMap](t, one(t, objs, "ConfigMap", "seccomp-profile"))
	want, err := os.ReadFile(filepath.Join(Dir(), "files", "io_uring.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["io_uring.json"]; strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
		t.Error("the ConfigMap's profile differs from files/io_uring.json")
	}
	var profile struct {
		DefaultAction string `json:"defaultAction"`
		Syscalls      []struct {
			Names  []string `json:"names"`
			Action string   `json:"action"`
		} `json:"syscalls"`
	}
	if err := json.Unmarshal(want, &profile); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, s := range profile.Syscalls {
		for _, n := range s.Names {
			allowed[n] = s.Action == "SCMP_ACT_ALLOW"
		}
	}
	for _, n := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "fdatasync", "epoll_wait"} {
		if !allowed[n] {
			t.Errorf("the profile does not allow %s", n)
		}
	}
	if profile.DefaultAction != "SCMP_ACT_ERRNO" || allowed["kexec_load"] {
		t.Errorf("the profile is not RuntimeDefault-strict: default %s, kexec_load allowed %v", profile.DefaultAction, allowed["kexec_load"])
	}
}

func TestSecurityProfilesOperatorProvider(t *testing.T) {
	vals := values(t, "seccomp: {provider: spo}")
	objs := render(t, vals, spoAPIVersion)
	if ds := find(objs, "DaemonSet", ""); len(ds) != 0 {
		t.Errorf("provider spo still renders %d DaemonSets", len(ds))
	}
	sp := one(t, objs, "SeccompProfile", "uring-redis-operator-io-uring")
	if action, _, _ := unstructured.NestedString(sp.Object, "spec", "defaultAction"); action != "SCMP_ACT_ERRNO" {
		t.Errorf("SeccompProfile defaultAction %q", action)
	}
	if args := operatorArgs(t, objs); !slices.Contains(args, "--uring-seccomp-profile=operator/"+sp.GetName()+".json") {
		t.Errorf("operator args %q do not point at the SPO profile", args)
	}

	_, err := Render(loadChart(t), vals)
	if err == nil || !strings.Contains(err.Error(), "needs the Security Profiles Operator") {
		t.Errorf("provider spo without the SeccompProfile kind: err = %v, want a message naming the Security Profiles Operator", err)
	}
}

func TestProfileInstalledElsewhere(t *testing.T) {
	objs := render(t, values(t, "seccomp: {provider: none, localhostProfile: profiles/uring.json}"))
	if n := len(find(objs, "DaemonSet", "")) + len(find(objs, "SeccompProfile", "")) + len(find(objs, "ConfigMap", "seccomp-profile")); n != 0 {
		t.Errorf("provider none rendered %d profile installers", n)
	}
	if args := operatorArgs(t, objs); !slices.Contains(args, "--uring-seccomp-profile=profiles/uring.json") {
		t.Errorf("operator args %q", args)
	}
}

func TestStorageClassPresets(t *testing.T) {
	if scs := find(render(t, nil), "StorageClass", ""); len(scs) != 0 {
		t.Errorf("presets are opt-in, yet %d StorageClasses rendered by default", len(scs))
	}
	objs := render(t, ciValues(t)["presets-values.yaml"])
	gp3 := one(t, objs, "StorageClass", "uring-gp3")
	wantParams := map[string]any{"type": "gp3", "iops": "6000", "throughput": "250", "encrypted": "true", "csi.storage.k8s.io/fstype": "ext4"}
	if gp3.Object["provisioner"] != "ebs.csi.aws.com" || !reflect.DeepEqual(gp3.Object["parameters"], wantParams) ||
		gp3.Object["volumeBindingMode"] != "WaitForFirstConsumer" || gp3.Object["allowVolumeExpansion"] != true {
		t.Errorf("gp3 class: %v", gp3.Object)
	}
	local := one(t, objs, "StorageClass", "uring-local-nvme")
	if local.Object["provisioner"] != "kubernetes.io/no-provisioner" || local.Object["volumeBindingMode"] != "WaitForFirstConsumer" {
		t.Errorf("local-nvme class: %v", local.Object)
	}
	cm := convert[corev1.ConfigMap](t, one(t, objs, "ConfigMap", "local-static-provisioner"))
	var classMap map[string]map[string]string
	if err := sigsyaml.Unmarshal([]byte(cm.Data["storageClassMap"]), &classMap); err != nil {
		t.Fatal(err)
	}
	if c := classMap["uring-local-nvme"]; c["fsType"] != "ext4" || c["hostDir"] != "/mnt/disks/nvme" || c["volumeMode"] != "Filesystem" {
		t.Errorf("provisioner class map %v", classMap)
	}
	one(t, objs, "DaemonSet", "local-static-provisioner")
}

func TestMonitoringOnlyWhereTheCRDsAreServed(t *testing.T) {
	vals := ciValues(t)["monitoring-values.yaml"]
	without := render(t, vals)
	if n := len(find(without, "ServiceMonitor", "")) + len(find(without, "PrometheusRule", "")); n != 0 {
		t.Errorf("%d monitoring objects rendered for a cluster without the Prometheus Operator", n)
	}
	with := render(t, vals, servedAPIVersions...)
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		o := one(t, with, kind, "uring-redis-operator")
		if o.GetLabels()["release"] != "monitoring" {
			t.Errorf("%s labels %v lack release=monitoring", kind, o.GetLabels())
		}
	}
	// The PrometheusRule carries the chart's alert groups (promtool-tested) and the extra ones.
	raw, err := os.ReadFile(filepath.Join(Dir(), "files", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name string `json:"name"`
		} `json:"groups"`
	}
	if err := sigsyaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	var wantGroups []string
	for _, g := range file.Groups {
		wantGroups = append(wantGroups, g.Name)
	}
	wantGroups = append(wantGroups, "uring-redis-operator")
	groups, _, _ := unstructured.NestedSlice(one(t, with, "PrometheusRule", "uring-redis-operator").Object, "spec", "groups")
	var gotGroups []string
	for _, g := range groups {
		gotGroups = append(gotGroups, g.(map[string]any)["name"].(string))
	}
	if len(file.Groups) == 0 || !reflect.DeepEqual(gotGroups, wantGroups) {
		t.Errorf("PrometheusRule groups %q, want %q", gotGroups, wantGroups)
	}
	// Every chart alert links its runbook under runbookBaseURL, the extra groups' are left as given.
	runbooks := func(rule *unstructured.Unstructured) map[string]string {
		out := map[string]string{}
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				r := r.(map[string]any)
				url, _, _ := unstructured.NestedString(r, "annotations", "runbook_url")
				out[r["alert"].(string)] = url
			}
		}
		return out
	}
	for base, want := range map[string]string{
		"":                                "https://github.com/uring-redis/uring-redis-operator/blob/main/docs/runbooks/",
		"https://wiki.example.com/redis/": "https://wiki.example.com/redis/",
	} {
		v := maps.Clone(vals)
		if base != "" {
			v = values(t, "prometheus: {prometheusRule: {enabled: true, runbookBaseURL: "+base+"}}\nglobal: {imageRegistry: "+testRegistry+"}")
		}
		for alert, url := range runbooks(one(t, render(t, v, servedAPIVersions...), "PrometheusRule", "uring-redis-operator")) {
			switch {
			case alert == "UringRedisOperatorDown":
				if url != "" {
					t.Errorf("the extra group's alert got runbook_url %q", url)
				}
			case !strings.HasPrefix(url, want) || !strings.Contains(url, ".md#"+strings.ToLower(alert)):
				t.Errorf("runbookBaseURL %q: %s links %q", base, alert, url)
			}
		}
	}

	// The ServiceMonitor selects the metrics Service, which selects the operator pods.
	sm := one(t, with, "ServiceMonitor", "uring-redis-operator")
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	svc := one(t, with, "Service", "metrics")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s; the Service has %v", k, v, svc.GetLabels())
		}
	}
	// The benchmark metrics carry the benchmark's namespace label, which the
	// dashboards filter on: Prometheus must not rename it to exported_namespace.
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["honorLabels"] != true {
		t.Errorf("ServiceMonitor endpoints %v, want one with honorLabels", endpoints)
	}
}

func TestDashboardConfigMaps(t *testing.T) {
	ch := loadChart(t)
	ch.Files = append(ch.Files, &chart.File{Name: "dashboards/modes.json", Data: []byte(`{"title": "modes"}`)})
	objs, err := Render(ch, values(t, "grafana: {dashboards: {enabled: true}}\nglobal: {imageRegistry: "+testRegistry+"}"))
	if err != nil {
		t.Fatal(err)
	}
	cm := convert[corev1.ConfigMap](t, one(t, objs, "ConfigMap", "dashboard-modes"))
	if cm.Labels["grafana_dashboard"] != "1" || strings.TrimSpace(cm.Data["modes.json"]) != `{"title": "modes"}` {
		t.Errorf("dashboard ConfigMap %+v", cm)
	}
}

func TestSchemaRejectsUnknownKeys(t *testing.T) {
	for doc, want := range map[string]string{
		"replicas: 2":                                                   "Additional property replicas is not allowed",
		"image: {tagg: v1}":                                             "Additional property tagg is not allowed",
		"seccomp: {provider: apparmor}":                                 "seccomp.provider must be one of",
		"storageClasses: {gp3: {iops: fast}}":                           "Invalid type",
		"prometheus: {serviceMonitor: {lables: {}}}":                    "Additional property lables is not allowed",
		"prometheus: {prometheusRule: {runbookBaseURL: docs/runbooks}}": "runbookBaseURL: Does not match pattern",
	} {
		_, err := Render(loadChart(t), values(t, doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", doc, err, want)
		}
	}
}

func TestValidateValuesReportsEveryProblemAtOnce(t *testing.T) {
	_, err := Render(loadChart(t), values(t, `
seccomp: {localhostProfile: /etc/io_uring.json}
storageClasses: {gp3: {create: true, iops: 100, throughput: 5000}}`))
	if err == nil {
		t.Fatal("invalid values rendered")
	}
	for _, want := range []string{"seccomp.localhostProfile", "storageClasses.gp3.iops", "storageClasses.gp3.throughput"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// permissions expands RBAC rules into "group resource verb" lines, so a table
// may group them differently from the rules.
func permissions(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+" "+res+" "+v)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readmePermissions reads the README's Permissions table, by scope.
func readmePermissions(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(Dir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Permissions\n")
	if !ok {
		t.Fatal("the chart README has no Permissions section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	byScope := map[string][]rbacv1.PolicyRule{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "|") || len(cells) != 5 || strings.TrimSpace(cells[0]) == "Scope" || strings.HasPrefix(cells[0], "---") {
			continue
		}
		list := func(cell string) []string {
			var out []string
			for _, f := range strings.Split(cell, ",") {
				out = append(out, strings.Trim(strings.TrimSpace(f), "`"))
			}
			return out
		}
		group := strings.TrimSpace(cells[1])
		if group == "core" {
			group = ""
		}
		if strings.TrimSpace(cells[4]) == "" {
			t.Errorf("the README gives no reason for %s", line)
		}
		scope := strings.TrimSpace(cells[0])
		byScope[scope] = append(byScope[scope], rbacv1.PolicyRule{APIGroups: []string{group}, Resources: list(cells[2]), Verbs: list(cells[3])})
	}
	out := map[string][]string{}
	for scope, rules := range byScope {
		out[scope] = permissions(rules)
	}
	return out
}

// TestREADMEListsEveryPermission: the chart README's Permissions table holds
// exactly what config/rbac/role.yaml grants, split as watchNamespaces splits
// it (TestWatchNamespacesRBAC checks that the halves make the whole), what
// the node labeler's role adds and what the leader-election Role grants, each
// with a reason.
func TestREADMEListsEveryPermission(t *testing.T) {
	objs := render(t, nil)
	want := map[string][]string{
		"cluster":                     permissions(chartRBAC(t, "role_cluster_scoped.yaml")),
		"cluster, or watchNamespaces": permissions(chartRBAC(t, "role_namespaced.yaml")),
		"cluster, labelNodes":         permissions(fileRules(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "node_labeler_role.yaml"))),
		"namespace":                   permissions(convert[rbacv1.Role](t, one(t, objs, "Role", "leader-election")).Rules),
	}
	got := readmePermissions(t)
	for scope, perms := range want {
		if !slices.Equal(got[scope], perms) {
			t.Errorf("the README's %q permissions differ from what the chart grants:\n got %q\nwant %q", scope, got[scope], perms)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the README lists scopes %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if labeler := convert[rbacv1.ClusterRole](t, one(t, objs, "ClusterRole", "node-labeler")); !slices.Equal(permissions(labeler.Rules), want["cluster, labelNodes"]) {
		t.Errorf("the chart's node labeler ClusterRole grants %q", permissions(labeler.Rules))
	}
}

// TestLeastPrivilege: no rule the chart renders lets the operator exec into
// pods or mint RBAC, and nodes are patched only where the labeler runs.
func TestLeastPrivilege(t *testing.T) {
	for _, labelNodes := range []bool{true, false} {
		objs := render(t, values(t, fmt.Sprintf("labelNodes: %v", labelNodes)))
		var granted []string
		for _, o := range objs {
			switch o.GetKind() {
			case "ClusterRole":
				granted = append(granted, permissions(convert[rbacv1.ClusterRole](t, o).Rules)...)
			case "Role":
				granted = append(granted, permissions(convert[rbacv1.Role](t, o).Rules)...)
			}
		}
		for _, p := range granted {
			if strings.Contains(p, "pods/exec") || strings.HasPrefix(p, "rbac.authorization.k8s.io ") || strings.Contains(p, "serviceaccounts") || strings.Contains(p, "*") {
				t.Errorf("labelNodes=%v: the chart grants %q", labelNodes, p)
			}
		}
		if got := slices.Contains(granted, " nodes patch"); got != labelNodes {
			t.Errorf("labelNodes=%v: nodes patch granted: %v", labelNodes, got)
		}
		if args := strings.Join(operatorArgs(t, objs), " "); !strings.Contains(args, fmt.Sprintf("--label-nodes=%v", labelNodes)) {
			t.Errorf("labelNodes=%v: operator args %s", labelNodes, args)
		}
	}
}

// TestImageReferences: every image reference is built from registry,
// repository, tag and digest, and the pull policy and secrets reach the
// chart's pods and, through the operator's flags, the pods it creates.
func TestImageReferences(t *testing.T) {
	objs := render(t, values(t, `
global:
  imageRegistry: mirror.example.com:5000/team/
  imagePullPolicy: Always
  imagePullSecrets: [{name: pull-a}, {name: pull-b}]
podSecurity: {nodeAgents: {createNamespace: false, namespace: `+nodeAgentsNamespace+`}}
image: {tag: "1.2.3", digest: "sha256:`+strings.Repeat("a", 64)+`"}
redisImage: {registry: other.example.com, repository: valkey/redis-uring}
exporterImage: {tag: v9}
storageClasses: {localNvme: {create: true}}`))
	operator := convert[struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}](t, one(t, objs, "Deployment", "uring-redis-operator")).Spec.Template.Spec
	c := operator.Containers[0]
	if want := "mirror.example.com:5000/team/uring-redis-operator:1.2.3@sha256:" + strings.Repeat("a", 64); c.Image != want {
		t.Errorf("operator image %s, want %s", c.Image, want)
	}
	for _, arg := range []string{"--redis-image=other.example.com/valkey/redis-uring:8.1.1-uring0.2.0",
		"--exporter-image=mirror.example.com:5000/team/oliver006/redis_exporter:v9",
		"--bench-image=mirror.example.com:5000/team/uring-redis-bench:0.2.0",
		"--image-pull-policy=Always", "--image-pull-secrets=pull-a,pull-b"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("operator args %q lack %s", c.Args, arg)
		}
	}
	wantSecrets := []corev1.LocalObjectReference{{Name: "pull-a"}, {Name: "pull-b"}}
	for _, d := range []struct{ kind, name string }{{"Deployment", "uring-redis-operator"}, {"DaemonSet", "seccomp-installer"}, {"DaemonSet", "local-static-provisioner"}} {
		pod := convert[struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}](t, one(t, objs, d.kind, d.name)).Spec.Template.Spec
		if !reflect.DeepEqual(pod.ImagePullSecrets, wantSecrets) {
			t.Errorf("%s %s pull secrets %v, want %v", d.kind, d.name, pod.ImagePullSecrets, wantSecrets)
		}
		if d.name != "local-static-provisioner" && pod.Containers[0].ImagePullPolicy != corev1.PullAlways {
			t.Errorf("%s %s pull policy %s, want Always", d.kind, d.name, pod.Containers[0].ImagePullPolicy)
		}
	}
	dryRunApply(t, objs)

	byDigest := convert[struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}](t, one(t, render(t, values(t, "exporterImage: {tag: '', digest: sha256:"+strings.Repeat("b", 64)+"}")), "Deployment", "uring-redis-operator"))
	if want := "--exporter-image=" + testRegistry + "/oliver006/redis_exporter@sha256:" + strings.Repeat("b", 64); !slices.Contains(byDigest.Spec.Template.Spec.Containers[0].Args, want) {
		t.Errorf("operator args %q lack %s", byDigest.Spec.Template.Spec.Containers[0].Args, want)
	}
}

func TestBadImageValuesFailWithAMessage(t *testing.T) {
	for doc, want := range map[string]string{
		"global: {imageRegistry: ''}":                               "global.imageRegistry is empty and benchImage, image, redisImage name no registry of their own",
		"global: {imageRegistry: ''}\nimage: {registry: r.io}":      "global.imageRegistry is empty and benchImage, redisImage name no registry",
		"global: {imageRegistry: 'https://r.io'}":                   "global.imageRegistry: Does not match pattern",
		"image: {digest: 'sha256:abc'}":                             "image.digest: Does not match pattern",
		"redisImage: {tag: 'a tag'}":                                "redisImage.tag: Does not match pattern",
		"redisImage: redis-uring:8.1.1":                             "redisImage: Invalid type. Expected: object",
		"global: {imagePullPolicy: Sometimes}":                      "global.imagePullPolicy must be one of",
		"global: {imageRegistry: r.io, imagePullSecrets: [pull-a]}": "global.imagePullSecrets[0] pull-a must be a map with a name",
		"exporterImage: {tag: ''}":                                  "exporterImage needs a tag or a digest",
	} {
		vals := values(t, doc)
		if _, ok := vals["global"]; !ok {
			vals["global"] = map[string]any{"imageRegistry": testRegistry}
		}
		_, err := Render(loadChart(t), vals)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", doc, err, want)
		}
	}
}

// TestChartIsTheReleaseVersion: VERSION is the one place the release
// version is set; `make generate` writes it into Chart.yaml.
func TestChartIsTheReleaseVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(Dir(), "..", "..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	md := loadChart(t).Metadata
	if md.Version != version || md.AppVersion != version {
		t.Errorf("Chart.yaml version %s, appVersion %s; VERSION says %s: run `make generate`", md.Version, md.AppVersion, version)
	}
}

// The operator's NetworkPolicy flags: the peer it builds for itself selects
// the operator's own pods in the release namespace, and the Prometheus
// selectors follow the values.
func TestNetworkPolicyFlags(t *testing.T) {
	objs := render(t, nil)
	d := convert[struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}](t, one(t, objs, "Deployment", "uring-redis-operator"))
	flags := map[string]string{}
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		if name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "="); ok {
			flags[name] = value
		}
	}
	opts, err := specs.ParseNetworkPolicyOptions(flags["network-policy"] == "true", flags["operator-namespace"],
		flags["operator-pod-labels"], flags["prometheus-namespace-labels"], flags["prometheus-pod-labels"])
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Enabled || opts.Operator == nil {
		t.Fatalf("flags %v: NetworkPolicies off or the operator not admitted", flags)
	}
	if ns := opts.Operator.NamespaceSelector.MatchLabels[corev1.LabelMetadataName]; ns != d.Metadata.Namespace {
		t.Errorf("the operator is admitted from namespace %q, it runs in %q", ns, d.Metadata.Namespace)
	}
	if sel := labels.SelectorFromSet(opts.Operator.PodSelector.MatchLabels); !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the operator's peer %v does not select its pods %v", sel, d.Spec.Template.Labels)
	}
	if got := opts.Prometheus[0].PodSelector.MatchLabels; !maps.Equal(got, map[string]string{"app.kubernetes.io/name": "prometheus"}) {
		t.Errorf("Prometheus pods %v", got)
	}

	args := strings.Join(operatorArgs(t, render(t, values(t, `
networkPolicy:
  enabled: false
  prometheus:
    namespaceLabels: {team: observability, kubernetes.io/metadata.name: monitoring}
    podLabels: {app.kubernetes.io/name: null, app: prometheus}
`))), " ")
	for _, want := range []string{"--network-policy=false", "--prometheus-namespace-labels=kubernetes.io/metadata.name=monitoring,team=observability", "--prometheus-pod-labels=app=prometheus "} {
		if !strings.Contains(args+" ", want) {
			t.Errorf("operator args %s lack %q", args, want)
		}
	}
}

// The ServiceMonitor scrapes the operator as it serves its metrics: HTTPS with
// Prometheus's ServiceAccount token by default, plain HTTP on 8080 when
// prometheus.secureMetrics is false; the Service's port follows.
func TestServiceMonitorFollowsSecureMetrics(t *testing.T) {
	vals := ciValues(t)["monitoring-values.yaml"]
	for _, secure := range []bool{true, false} {
		v := maps.Clone(vals)
		prom := maps.Clone(v["prometheus"].(map[string]any))
		prom["secureMetrics"] = secure
		v["prometheus"] = prom
		objs := render(t, v, servedAPIVersions...)
		// The Prometheus Operator deprecates bearerTokenFile for authorization,
		// which needs a Secret; the ServiceAccount's own token is what fits here.
		sm := convert[struct {
			Spec struct {
				Endpoints []struct {
					Scheme          string         `json:"scheme"`
					BearerTokenFile string         `json:"bearerTokenFile"`
					TLSConfig       map[string]any `json:"tlsConfig"`
				} `json:"endpoints"`
			} `json:"spec"`
		}](t, one(t, objs, "ServiceMonitor", "uring-redis-operator"))
		ep := sm.Spec.Endpoints[0]
		svc := convert[corev1.Service](t, one(t, objs, "Service", "uring-redis-operator-metrics"))
		args := strings.Join(operatorArgs(t, objs), " ")
		if secure {
			if ep.Scheme != "https" || ep.BearerTokenFile == "" || ep.TLSConfig == nil || svc.Spec.Ports[0].Port != 8443 ||
				!strings.Contains(args, "--metrics-secure=true") || !strings.Contains(args, "--metrics-bind-address=:8443") {
				t.Errorf("secure: endpoint %+v, Service port %d, args %s", ep, svc.Spec.Ports[0].Port, args)
			}
		} else if ep.Scheme != "" || ep.BearerTokenFile != "" || svc.Spec.Ports[0].Port != 8080 ||
			!strings.Contains(args, "--metrics-secure=false") || !strings.Contains(args, "--metrics-bind-address=:8080") {
			t.Errorf("plain: endpoint %+v, Service port %d, args %s", ep, svc.Spec.Ports[0].Port, args)
		}
	}
	reader := convert[rbacv1.ClusterRole](t, one(t, render(t, nil), "ClusterRole", "uring-redis-operator-metrics-reader"))
	if len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("metrics-reader rules %+v", reader.Rules)
	}
}

// TestOperatorStandbyByDefault: two operator replicas that prefer different
// nodes and a PodDisruptionBudget that evicts one at a time; one replica has
// no anti-affinity to ask for, and affinity given by the user replaces ours.
func TestOperatorStandbyByDefault(t *testing.T) {
	type deployment struct {
		Spec struct {
			Replicas *int32                 `json:"replicas"`
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	objs := render(t, nil)
	d := convert[deployment](t, one(t, objs, "Deployment", "uring-redis-operator"))
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("operator replicas %v, want 2", d.Spec.Replicas)
	}
	aff := d.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("operator affinity %+v: want one preferred pod anti-affinity", aff)
	}
	term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if term.TopologyKey != "kubernetes.io/hostname" || term.LabelSelector == nil || !selects(term.LabelSelector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("anti-affinity term %+v does not keep the operator's own pods apart by host (pod labels %v)", term, d.Spec.Template.Labels)
	}
	pdb := convert[policyv1.PodDisruptionBudget](t, one(t, objs, "PodDisruptionBudget", "uring-redis-operator"))
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil ||
		!selects(pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("operator PodDisruptionBudget %+v: want maxUnavailable 1 selecting the operator's pods %v", pdb.Spec, d.Spec.Template.Labels)
	}

	single := convert[deployment](t, one(t, render(t, map[string]any{"replicaCount": 1}), "Deployment", "uring-redis-operator"))
	if single.Spec.Template.Spec.Affinity != nil {
		t.Errorf("one replica: affinity %+v, want none", single.Spec.Template.Spec.Affinity)
	}
	own := map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"system"}}}}}}}}
	mine := convert[deployment](t, one(t, render(t, map[string]any{"affinity": own}), "Deployment", "uring-redis-operator"))
	if a := mine.Spec.Template.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.PodAntiAffinity != nil {
		t.Errorf("the user's affinity: rendered %+v, want theirs alone", a)
	}
	for _, o := range render(t, map[string]any{"podDisruptionBudget": map[string]any{"enabled": false}}) {
		if o.GetKind() == "PodDisruptionBudget" {
			t.Errorf("podDisruptionBudget.enabled=false rendered %s", o.GetName())
		}
	}
}

// selects says whether every label of selector is on labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}
