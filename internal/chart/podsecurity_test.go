package chart

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// nodeAgentsNamespace is where the chart rendered with default values puts
// the seccomp installer and the local-nvme provisioner.
const nodeAgentsNamespace = Namespace + "-node"

// podSecurityRefusal evaluates a pod template at a Pod Security level, with
// the checks of the Pod Security admission library the API server runs, and
// says why the level refuses it ("" when it admits it).
func podSecurityRefusal(t *testing.T, level psaapi.Level, pod corev1.PodTemplateSpec) string {
	t.Helper()
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		t.Fatal(err)
	}
	result := policy.AggregateCheckResults(evaluator.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec))
	if result.Allowed {
		return ""
	}
	return result.ForbiddenDetail()
}

// podTemplate is the pod template of a Deployment, DaemonSet, StatefulSet or
// Job; ok is false for other kinds.
func podTemplate(t *testing.T, o *unstructured.Unstructured) (corev1.PodTemplateSpec, bool) {
	t.Helper()
	if _, found, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec"); !found {
		return corev1.PodTemplateSpec{}, false
	}
	return convert[struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}](t, o).Spec.Template, true
}

// TestPodSecurityLevels: every pod the chart runs in the release namespace
// passes `restricted`, so that namespace may enforce it; the node agents do
// not pass `baseline` and run in a namespace of their own, which the chart
// creates labelled `privileged` for every mode. Where nothing needs it, no
// such namespace is made.
func TestPodSecurityLevels(t *testing.T) {
	cases := map[string]map[string]any{"defaults": nil, "seccomp.provider=none": values(t, "seccomp: {provider: none}")}
	for name, vals := range ciValues(t) {
		cases[name] = vals
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			objs := render(t, vals, append(slices.Clone(servedAPIVersions), spoAPIVersion)...)
			levels := map[string]map[string]string{}
			for _, ns := range find(objs, "Namespace", "") {
				levels[ns.GetName()] = ns.GetLabels()
			}
			agents := 0
			for _, o := range objs {
				pod, ok := podTemplate(t, o)
				if !ok {
					continue
				}
				switch ns := o.GetNamespace(); ns {
				case Namespace:
					if why := podSecurityRefusal(t, psaapi.LevelRestricted, pod); why != "" {
						t.Errorf("%s %s in the release namespace does not pass restricted: %s", o.GetKind(), o.GetName(), why)
					}
				case nodeAgentsNamespace:
					agents++
					if why := podSecurityRefusal(t, psaapi.LevelBaseline, pod); why == "" {
						t.Errorf("%s %s passes baseline: it needs no privileged namespace of its own", o.GetKind(), o.GetName())
					}
					for _, mode := range []string{"enforce", "audit", "warn"} {
						if got := levels[ns]["pod-security.kubernetes.io/"+mode]; got != "privileged" {
							t.Errorf("namespace %s: %s level %q, want privileged", ns, mode, got)
						}
					}
				default:
					t.Errorf("%s %s rendered into namespace %q", o.GetKind(), o.GetName(), ns)
				}
			}
			if _, made := levels[nodeAgentsNamespace]; made != (agents > 0) {
				t.Errorf("%d node agents, namespace %s rendered: %v", agents, nodeAgentsNamespace, made)
			}
		})
	}
	if agents := find(render(t, values(t, "seccomp: {provider: none}")), "DaemonSet", ""); len(agents) != 0 {
		t.Errorf("seccomp.provider=none without the local-nvme preset rendered %d DaemonSets", len(agents))
	}
}

// TestNodeAgentsInANamespaceOfYourOwn: with createNamespace=false the agents
// go to the namespace named and the chart makes none; the values that cannot
// work fail with a message: the release namespace to be created, pull
// Secrets for a namespace that does not exist yet, and (looked up on the API
// server at install) a namespace that enforces a level refusing the agents.
func TestNodeAgentsInANamespaceOfYourOwn(t *testing.T) {
	objs := render(t, values(t, "podSecurity: {nodeAgents: {createNamespace: false, namespace: kube-system}}"))
	if ns := find(objs, "Namespace", ""); len(ns) != 0 {
		t.Errorf("createNamespace=false rendered namespace %s", ns[0].GetName())
	}
	for _, o := range append(find(objs, "DaemonSet", "seccomp-installer"), find(objs, "ConfigMap", "seccomp-profile")...) {
		if o.GetNamespace() != "kube-system" {
			t.Errorf("%s %s in namespace %s, want kube-system", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}

	for doc, want := range map[string]string{
		"podSecurity: {nodeAgents: {namespace: " + Namespace + "}}":       `podSecurity.nodeAgents.namespace "` + Namespace + `" is the release namespace`,
		"global: {imageRegistry: r.io, imagePullSecrets: [{name: pull}]}": `global.imagePullSecrets name Secrets that the node agents' namespace "` + nodeAgentsNamespace + `"`,
	} {
		if _, err := Render(loadChart(t), values(t, doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", doc, err, want)
		}
	}
	if _, err := Render(loadChart(t), values(t, "global: {imageRegistry: r.io, imagePullSecrets: [{name: pull}]}\nseccomp: {provider: none}")); err != nil {
		t.Errorf("pull Secrets without node agents: %v", err)
	}

	ctx := context.Background()
	for name, level := range map[string]string{"agents-restricted": "restricted", "agents-baseline": "baseline", "agents-privileged": "privileged"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}}}
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, ns) })
		err := installDryRunOnServer(t, values(t, "global: {imageRegistry: r.io}\ncrds: {enabled: false}\npodSecurity: {nodeAgents: {createNamespace: false, namespace: "+name+"}}"))
		if level == "privileged" {
			if err != nil {
				t.Errorf("into a privileged namespace: %v", err)
			}
		} else if want := `namespace "` + name + `" enforces the Pod Security level "` + level + `"`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("into a %s namespace: err = %v, want %q", level, err, want)
		}
	}
}

// installDryRunOnServer runs `helm install --dry-run=server` against the
// envtest API server, where the chart's lookups see the cluster.
func installDryRunOnServer(t *testing.T, vals map[string]any) error {
	t.Helper()
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kubeconfig.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	kubeconfig.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kubeconfig.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &path
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, Namespace, "memory", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.DryRun = true
	install.DryRunOption = "server"
	install.ReleaseName = ReleaseName
	install.Namespace = Namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.31.4", Major: "1", Minor: "31"}
	_, err := install.Run(loadChart(t), maps.Clone(vals))
	return err
}

// TestUpgradeReusingValuesOfAnOlderChart: `helm upgrade --reuse-values`
// renders with the previous chart's values, which lack podSecurity; the node
// agents still get their privileged namespace.
func TestUpgradeReusingValuesOfAnOlderChart(t *testing.T) {
	ch := loadChart(t)
	delete(ch.Values, "podSecurity")
	objs, err := Render(ch, map[string]any{"global": map[string]any{"imageRegistry": testRegistry}})
	if err != nil {
		t.Fatal(err)
	}
	if ns := one(t, objs, "Namespace", nodeAgentsNamespace); ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace %s labels %v", ns.GetName(), ns.GetLabels())
	}
	if ds := one(t, objs, "DaemonSet", "seccomp-installer"); ds.GetNamespace() != nodeAgentsNamespace {
		t.Errorf("the seccomp installer in namespace %s", ds.GetNamespace())
	}
}
