package specs_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func renderGolden(t *testing.T, spec v1alpha1.RedisPersistenceSpec) (config, statefulSet []byte) {
	t.Helper()
	rp := specstest.NewRedisPersistence(spec)
	conf := specs.RenderConfig(rp)
	out, err := yaml.Marshal(specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, specstest.Password(rp))))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(conf), out
}

func TestGoldenFiles(t *testing.T) {
	for name, spec := range specstest.GoldenCases {
		t.Run(name, func(t *testing.T) {
			config, sts := renderGolden(t, spec)
			config2, sts2 := renderGolden(t, spec)
			if !bytes.Equal(config, config2) || !bytes.Equal(sts, sts2) {
				t.Fatal("rendering the same spec twice gave different output")
			}
			compareGolden(t, filepath.Join("testdata", name+".redis.conf"), config)
			compareGolden(t, filepath.Join("testdata", name+".statefulset.yaml"), sts)
		})
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./internal/specs -run TestGoldenFiles -update` to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendered output; if the change is intended, rerun with -update.\n--- got ---\n%s", path, got)
	}
}

func TestRenderConfigUsesServerOptionNames(t *testing.T) {
	config, _ := renderGolden(t, specstest.GoldenCases["uring-sqpoll"])
	for _, want := range []string{
		"appendonly yes", "appendfsync-engine uring", "aof-uring-ack durable", "aof-uring-queue-depth 256",
		"aof-uring-sqpoll yes", "aof-uring-sqpoll-idle-ms 50", "aof-uring-sqpoll-cpu 1", "aof-uring-max-workers 2",
	} {
		if !strings.Contains(string(config), want+"\n") {
			t.Errorf("redis.conf lacks %q:\n%s", want, config)
		}
	}
	fast, _ := renderGolden(t, specstest.GoldenCases["uring-fast"])
	if !strings.Contains(string(fast), "aof-uring-max-inflight-bytes 4194304\n") {
		t.Errorf("fast mode must bound in-flight bytes:\n%s", fast)
	}
}

// The auth hash follows where the password comes from, not the password:
// a new password is rotated on the running servers, a new Secret key
// restarts them.
func TestAuthHashFollowsTheSecretKey(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.GoldenCases["uring-durable"])
	hash := func(rp *v1alpha1.RedisPersistence, password string) string {
		return specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, password)).Spec.Template.Annotations[specs.AnnotationAuthHash]
	}
	first, second := hash(rp, "first"), hash(rp, "second")
	if first == "" || first != second {
		t.Fatalf("auth hashes %q and %q: a new password in the same Secret must not restart the pods", first, second)
	}
	moved := rp.DeepCopy()
	moved.Spec.Auth = &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "elsewhere", Key: "pw"}}
	if hash(moved, "first") == first {
		t.Error("a password from another Secret key keeps the auth hash")
	}
	other := rp.DeepCopy()
	other.UID = "0a1b2c3d-0000-4000-8000-000000000002"
	if hash(other, "first") == first {
		t.Error("the hash is not salted per RedisPersistence")
	}
	if got := hash(specstest.NewRedisPersistence(specstest.GoldenCases["none"]), ""); got != "" {
		t.Errorf("a server without auth has auth hash %q", got)
	}
}

func TestSeccompProfilePerMode(t *testing.T) {
	for name, spec := range specstest.GoldenCases {
		rp := specstest.NewRedisPersistence(spec)
		sc := specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, "")).Spec.Template.Spec.SecurityContext.SeccompProfile
		wantLocalhost := spec.Mode == v1alpha1.ModeUring
		if (sc.Type == corev1.SeccompProfileTypeLocalhost) != wantLocalhost {
			t.Errorf("%s: seccomp %s, want Localhost=%v", name, sc.Type, wantLocalhost)
		}
		if wantLocalhost && ptr.Deref(sc.LocalhostProfile, "") != specstest.Options.UringSeccompProfile {
			t.Errorf("%s: localhost profile %v", name, sc.LocalhostProfile)
		}
	}
	spo := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{LocalhostProfile: "operator/apps/io-uring.json"}})
	if got := specs.StatefulSet(spo, specstest.Options, specs.NewPodInputs(spo, "")).Spec.Template.Spec.SecurityContext.SeccompProfile.LocalhostProfile; ptr.Deref(got, "") != "operator/apps/io-uring.json" {
		t.Errorf("spec.uring.localhostProfile not honoured: %v", got)
	}
}

func TestExistingVolumeKeepsItsClass(t *testing.T) {
	rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Storage: &v1alpha1.StorageSpec{Profile: v1alpha1.StorageLocalNVMe}})
	existing := specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, ""))
	moved := specstest.Options
	moved.LocalNVMeStorageClass = "renamed-nvme"
	sts := specs.StatefulSet(rp, moved, specs.NewPodInputs(rp, ""))

	kept, wanted, differ := specs.KeepClaimClass(sts, existing)
	if !differ || kept != "uring-local-nvme" || wanted != "renamed-nvme" {
		t.Errorf("keepClaimClass = %q, %q, %v; want the old class kept over the new one", kept, wanted, differ)
	}
	if got := ptr.Deref(sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName, ""); got != "uring-local-nvme" {
		t.Errorf("the claim template asks for %q; an existing volume cannot change class", got)
	}
	if _, _, differ := specs.KeepClaimClass(specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, "")), existing); differ {
		t.Error("an unchanged class is reported as changed")
	}
}

// TestImagePullIsAnOperatorDefault: the pull policy and secrets reach every
// container and the pod, and changing them is the operator's change (staged
// like a new default image), not the user's.
func TestImagePullIsAnOperatorDefault(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.GoldenCases["uring-durable"])
	spec := specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, specstest.Password(rp))).Spec.Template.Spec
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("container %s pull policy %q, want IfNotPresent", c.Name, c.ImagePullPolicy)
		}
	}
	if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "registry-pull" {
		t.Errorf("pull secrets %v, want registry-pull", spec.ImagePullSecrets)
	}
	if unset := specs.StatefulSet(rp, specs.Options{}, specs.NewPodInputs(rp, "")).Spec.Template.Spec; unset.ImagePullSecrets != nil || unset.Containers[0].ImagePullPolicy != "" {
		t.Errorf("without --image-pull-* the pod has pull secrets %v and policy %q; want the API server's defaults", unset.ImagePullSecrets, unset.Containers[0].ImagePullPolicy)
	}

	in := specs.NewPodInputs(rp, "")
	changed := specstest.Options
	changed.ImagePull = specs.ImagePull{Policy: corev1.PullAlways, Secrets: []string{"other"}}
	before := specs.RolloutAnnotations(rp, specstest.Options, in, specs.PodTemplate(rp, specstest.Options, in))
	after := specs.RolloutAnnotations(rp, changed, in, specs.PodTemplate(rp, changed, in))
	if before[specs.AnnotationTemplateHash] == after[specs.AnnotationTemplateHash] || before[specs.AnnotationSpecTemplateHash] != after[specs.AnnotationSpecTemplateHash] {
		t.Errorf("new pull settings: template hash %s -> %s, spec template hash %s -> %s; want a new template with the same spec hash (an operator upgrade)",
			before[specs.AnnotationTemplateHash], after[specs.AnnotationTemplateHash], before[specs.AnnotationSpecTemplateHash], after[specs.AnnotationSpecTemplateHash])
	}
}

func TestNetworkPolicyGolden(t *testing.T) {
	for name, spec := range map[string]v1alpha1.RedisPersistenceSpec{
		"default": {Mode: v1alpha1.ModeAOF},
		"clients": {Mode: v1alpha1.ModeNone, Exporter: v1alpha1.ExporterSpec{Enabled: ptr.To(false)},
			NetworkPolicy: &v1alpha1.NetworkPolicySpec{Clients: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "checkout"}}, PodSelector: &metav1.LabelSelector{}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16"}},
			}}},
	} {
		t.Run(name, func(t *testing.T) {
			render := func() []byte {
				out, err := yaml.Marshal(specs.NetworkPolicy(specstest.NewRedisPersistence(spec), specstest.NetworkPolicyOptions))
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			got := render()
			if !bytes.Equal(got, render()) {
				t.Fatal("rendering the same spec twice gave different output")
			}
			compareGolden(t, filepath.Join("testdata", "networkpolicy-"+name+".yaml"), got)
		})
	}
}

func TestNetworkPolicyEnabled(t *testing.T) {
	on, off := specs.NetworkPolicyOptions{Enabled: true}, specs.NetworkPolicyOptions{}
	predates := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	predates.Annotations = map[string]string{specs.AnnotationPredatesClosedDefaults: "password,networkPolicy"}
	explicit := predates.DeepCopy()
	explicit.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}
	optOut := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, NetworkPolicy: &v1alpha1.NetworkPolicySpec{Enabled: ptr.To(false)}})
	for _, c := range []struct {
		desc string
		rp   *v1alpha1.RedisPersistence
		opts specs.NetworkPolicyOptions
		want bool
	}{
		{"the operator's default on", specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone}), on, true},
		{"the operator's default off", specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone}), off, false},
		{"an instance from before NetworkPolicies", predates, on, false},
		{"its owner turned it on", explicit, off, true},
		{"opted out", optOut, on, false},
	} {
		if got := specs.NetworkPolicyEnabled(c.rp, c.opts); got != c.want {
			t.Errorf("%s: %v, want %v", c.desc, got, c.want)
		}
	}
}

// renderReplicated renders every object of a replicated instance that
// differs from a single server's, in the order the reconciler applies them,
// with the servers kept apart by a required anti-affinity.
func renderReplicated(t *testing.T, spec v1alpha1.RedisPersistenceSpec) []byte {
	t.Helper()
	rp := specstest.NewRedisPersistence(spec)
	in := specs.NewPodInputs(rp, specstest.Password(rp))
	in.AntiAffinity = v1alpha1.AntiAffinityRequired
	objects := []any{
		specs.HeadlessService(rp), specs.ClientService(rp), specs.ReplicasService(rp), specs.SentinelService(rp),
		specs.NetworkPolicy(rp, specstest.NetworkPolicyOptions), specs.SentinelNetworkPolicy(rp, specstest.NetworkPolicyOptions),
	}
	for _, pdb := range specs.PodDisruptionBudgets(rp) {
		objects = append(objects, pdb)
	}
	objects = append(objects, specs.SentinelStatefulSet(rp, specstest.Options, in), specs.StatefulSet(rp, specstest.Options, in))
	return documents(t, objects...)
}

// documents renders objects as one YAML stream, each after "---".
func documents(t *testing.T, objects ...any) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, obj := range objects {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes()
}

func TestReplicatedGolden(t *testing.T) {
	got := renderReplicated(t, specstest.ReplicatedSpec)
	if !bytes.Equal(got, renderReplicated(t, specstest.ReplicatedSpec)) {
		t.Fatal("rendering the same spec twice gave different output")
	}
	compareGolden(t, filepath.Join("testdata", "replicated-uring-durable.yaml"), got)

	// The servers' redis.conf is a single server's: what differs is decided at start.
	single := specstest.ReplicatedSpec
	single.Replicas, single.Sentinel = 1, nil
	if a, b := specs.RenderConfig(specstest.NewRedisPersistence(specstest.ReplicatedSpec)), specs.RenderConfig(specstest.NewRedisPersistence(single)); a != b {
		t.Errorf("redis.conf of a replicated instance differs from a single server's:\n%s\n---\n%s", a, b)
	}

	// uring.ackReplicas reaches every server's redis.conf (a replica ignores
	// it until promoted); 0 is left out, so an image without it still starts.
	if conf := specs.RenderConfig(specstest.NewRedisPersistence(specstest.ReplicatedSpec)); strings.Contains(conf, "aof-uring-ack-replicas") {
		t.Errorf("ackReplicas 0 rendered:\n%s", conf)
	}
	acks := specstest.ReplicatedSpec
	acks.Uring = &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, QueueDepth: 256, MaxWorkers: 2, AckReplicas: 1}
	if conf := specs.RenderConfig(specstest.NewRedisPersistence(acks)); !strings.Contains(conf, "\naof-uring-ack-replicas 1\n") {
		t.Errorf("ackReplicas 1 not rendered:\n%s", conf)
	}

	// Durable mode's batches: the server's defaults (one in flight, direct
	// writes) are left out, so an older uring image still starts; anything
	// else is rendered.
	if conf := specs.RenderConfig(specstest.NewRedisPersistence(acks)); strings.Contains(conf, "aof-uring-fsyncs-in-flight") ||
		strings.Contains(conf, "aof-uring-direct-writes") {
		t.Errorf("the server's defaults for batches in flight or direct writes rendered:\n%s", conf)
	}
	batches := acks
	batches.Uring = &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, QueueDepth: 256, MaxWorkers: 2, BatchesInFlight: 2, DirectWrites: ptr.To(false)}
	if conf := specs.RenderConfig(specstest.NewRedisPersistence(batches)); !strings.Contains(conf, "\naof-uring-fsyncs-in-flight 2\n") ||
		!strings.Contains(conf, "\naof-uring-direct-writes no\n") {
		t.Errorf("batchesInFlight 2 or directWrites false not rendered:\n%s", conf)
	}
}

// A single server (spec.replicas 1, or unset) renders exactly what it did
// before replication existed: the golden files above are unchanged, and an
// explicit 1 is the same as the default.
func TestOneReplicaIsASingleServer(t *testing.T) {
	for name, spec := range specstest.GoldenCases {
		explicit := spec
		explicit.Replicas = 1
		_, a := renderGolden(t, spec)
		_, b := renderGolden(t, explicit)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: replicas: 1 renders another StatefulSet than no replicas", name)
		}
		rp := specstest.NewRedisPersistence(explicit)
		if sel := specs.ClientService(rp).Spec.Selector; sel[specs.LabelRole] != "" {
			t.Errorf("%s: the client Service of a single server selects a role: %v", name, sel)
		}
	}
}

func TestPodAntiAffinityFor(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	with := func(replicas int32, how v1alpha1.PodAntiAffinity) *appsv1.StatefulSet {
		r := rp.DeepCopy()
		r.Spec.Replicas = replicas
		in := specs.NewPodInputs(r, "")
		in.AntiAffinity = how
		return specs.StatefulSet(r, specstest.Options, in)
	}
	for _, tc := range []struct {
		desc     string
		eligible int
		existing *appsv1.StatefulSet
		want     v1alpha1.PodAntiAffinity
	}{
		{"new, nodes enough", 3, nil, v1alpha1.AntiAffinityRequired},
		{"new, one node", 1, nil, v1alpha1.AntiAffinityPreferred},
		{"preferred stays when a node joins", 5, with(3, v1alpha1.AntiAffinityPreferred), v1alpha1.AntiAffinityPreferred},
		{"required stays", 3, with(3, v1alpha1.AntiAffinityRequired), v1alpha1.AntiAffinityRequired},
		{"required gives way when a node is lost", 2, with(3, v1alpha1.AntiAffinityRequired), v1alpha1.AntiAffinityPreferred},
		// A scale restarts no server.
		{"preferred stays through a scale", 5, with(2, v1alpha1.AntiAffinityPreferred), v1alpha1.AntiAffinityPreferred},
		{"required stays through a scale the nodes hold", 3, with(2, v1alpha1.AntiAffinityRequired), v1alpha1.AntiAffinityRequired},
		{"required gives way to a scale beyond the nodes", 2, with(2, v1alpha1.AntiAffinityRequired), v1alpha1.AntiAffinityPreferred},
	} {
		if got := specs.PodAntiAffinityFor(rp, tc.eligible, tc.existing); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.desc, got, tc.want)
		}
	}
	if got := specs.PodAntiAffinityFor(specstest.NewRedisPersistence(specstest.GoldenCases["aof-always"]), 5, nil); got != "" {
		t.Errorf("a single server got anti-affinity %q", got)
	}
}

// The start scripts run under the image's /bin/sh (dash): they must at least parse there.
func TestStartScriptsParse(t *testing.T) {
	for name, script := range map[string]string{"server": specs.ServerStartScript, "sentinel": specs.SentinelStartScript} {
		cmd := exec.Command("dash", "-n", "-c", script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s start script: %v\n%s", name, err, out)
		}
	}
}

// No container the operator runs for an instance is BestEffort: every one,
// server, sidecars, init containers and Sentinels, requests CPU and memory
// when the RedisPersistence leaves resources out.
func TestNoContainerIsBestEffort(t *testing.T) {
	check := func(name string, pod corev1.PodSpec) {
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s: container %s requests no CPU or memory: %v", name, c.Name, c.Resources)
			}
		}
	}
	for name, spec := range specstest.GoldenCases {
		// TestServerResourcesAreTheUsers covers a server with spec.resources.
		spec.Resources = nil
		rp := specstest.NewRedisPersistence(spec)
		check(name, specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, specstest.Password(rp))).Spec.Template.Spec)
	}
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	in := specs.NewPodInputs(rp, specstest.Password(rp))
	check("replicated", specs.StatefulSet(rp, specstest.Options, in).Spec.Template.Spec)
	check("replicated Sentinels", specs.SentinelStatefulSet(rp, specstest.Options, in).Spec.Template.Spec)
}

// The server's defaults apply only without spec.resources: what the user
// wrote is the container's resources as written, a limit alone included
// (Kubernetes then requests the limit).
func TestServerResourcesAreTheUsers(t *testing.T) {
	server := func(spec v1alpha1.RedisPersistenceSpec) corev1.ResourceRequirements {
		rp := specstest.NewRedisPersistence(spec)
		c := specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, "")).Spec.Template.Spec.Containers[0]
		if c.Name != specs.ContainerRedis {
			t.Fatalf("first container is %s", c.Name)
		}
		return c.Resources
	}
	defaults := server(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF})
	if defaults.Requests.Cpu().String() != "100m" || defaults.Requests.Memory().String() != "128Mi" || len(defaults.Limits) != 0 {
		t.Errorf("default server resources: %v, want requests cpu 100m, memory 128Mi and no limit", defaults)
	}
	for _, user := range []corev1.ResourceRequirements{
		{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
		{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
		{},
	} {
		if got := server(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Resources: &user}); !equality.Semantic.DeepEqual(got, user) {
			t.Errorf("spec.resources %v rendered as %v", user, got)
		}
	}
}

// A memory limit sets maxmemory to 70% of it, 64Mi (the least the API
// server accepts) included; spec.config.maxmemory wins; the default
// resources, which have no limit, set none.
func TestMaxmemoryFollowsTheMemoryLimit(t *testing.T) {
	limit := func(q string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}
	}
	for _, c := range []struct {
		desc string
		spec v1alpha1.RedisPersistenceSpec
		want string
	}{
		{"1Gi limit", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Resources: limit("1Gi")}, "\nmaxmemory 751619276\n"},
		{"64Mi limit", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Resources: limit("64Mi")}, "\nmaxmemory 46976204\n"},
		{"explicit maxmemory", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Resources: limit("32Mi"),
			Config: map[string]v1alpha1.ServerOptionValue{"maxmemory": "8mb"}}, "\nmaxmemory 8mb\n"},
		{"default resources", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF}, ""},
	} {
		conf := specs.RenderConfig(specstest.NewRedisPersistence(c.spec))
		if got := strings.Count(conf, "\nmaxmemory "); c.want == "" && got != 0 || c.want != "" && (got != 1 || !strings.Contains(conf, c.want)) {
			t.Errorf("%s: want %q once (or no maxmemory for \"\") in:\n%s", c.desc, c.want, conf)
		}
	}
}

// PodInputs.Partition reaches the servers' StatefulSet only, and not the
// template hashes: moving the partition rolls a server, it is no new template.
func TestPartitionHoldsTheServersBelowIt(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	in := specs.NewPodInputs(rp, specstest.Password(rp))
	free := specs.StatefulSet(rp, specstest.Options, in)
	if free.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("without a partition the StatefulSet has %+v", free.Spec.UpdateStrategy.RollingUpdate)
	}
	in.Partition = ptr.To[int32](2)
	held := specs.StatefulSet(rp, specstest.Options, in)
	if u := held.Spec.UpdateStrategy; u.Type != appsv1.RollingUpdateStatefulSetStrategyType || u.RollingUpdate == nil || ptr.Deref(u.RollingUpdate.Partition, -1) != 2 {
		t.Errorf("partition 2: update strategy %+v", u)
	}
	if held.Annotations[specs.AnnotationTemplateHash] != free.Annotations[specs.AnnotationTemplateHash] ||
		held.Annotations[specs.AnnotationSpecTemplateHash] != free.Annotations[specs.AnnotationSpecTemplateHash] {
		t.Error("the partition changed the template hashes")
	}
	if s := specs.SentinelStatefulSet(rp, specstest.Options, in); s.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("the Sentinels' StatefulSet took the servers' partition: %+v", s.Spec.UpdateStrategy.RollingUpdate)
	}
}

// AnnotationRestartedAt on the instance reaches the servers' pod template,
// so that a new value is a new template (and a new template hash), and only
// the servers': the Sentinels keep theirs.
func TestRestartedAtRollsTheServers(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	in := specs.NewPodInputs(rp, specstest.Password(rp))
	before := specs.StatefulSet(rp, specstest.Options, in)
	sentinelsBefore := specs.SentinelStatefulSet(rp, specstest.Options, in)
	if _, ok := before.Spec.Template.Annotations[specs.AnnotationRestartedAt]; ok {
		t.Fatal("a template without a restart asked for carries the annotation")
	}
	if rp.Annotations == nil {
		rp.Annotations = map[string]string{}
	}
	rp.Annotations[specs.AnnotationRestartedAt] = "2026-11-29T01:30:00Z"
	after := specs.StatefulSet(rp, specstest.Options, in)
	if got := after.Spec.Template.Annotations[specs.AnnotationRestartedAt]; got != "2026-11-29T01:30:00Z" {
		t.Errorf("the servers' template carries %q", got)
	}
	if after.Annotations[specs.AnnotationTemplateHash] == before.Annotations[specs.AnnotationTemplateHash] ||
		after.Annotations[specs.AnnotationSpecTemplateHash] == before.Annotations[specs.AnnotationSpecTemplateHash] {
		t.Error("a restart asked for left the template hashes as they were")
	}
	if sentinels := specs.SentinelStatefulSet(rp, specstest.Options, in); !equality.Semantic.DeepEqual(sentinels.Spec.Template, sentinelsBefore.Spec.Template) {
		t.Error("a restart of the servers changed the Sentinels' template")
	}
}
