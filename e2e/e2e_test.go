//go:build e2e

// Package e2e drives the operator on a real cluster: pods really run, volumes
// are ext4, io_uring runs under the seccomp profile the chart installs. `make
// e2e` brings the cluster up (e2e/cluster, or kind with E2E_CLUSTER=kind),
// builds and loads the images, installs the chart and runs this suite's full
// tier; E2E_TIER=ci runs the tier .ci/run runs (tiers_test.go).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

var (
	k8s       client.Client
	namespace string
	// nodeNamespace holds the test bed's own privileged pods (profile
	// installs, remounts): the suite's namespace enforces restricted.
	nodeNamespace string
	kubectl       []string
)

// restrictedLabels make a namespace enforce (and warn and audit at) the Pod
// Security level restricted, as a user may label the namespaces of their
// RedisPersistences; privilegedLabels admit anything.
var (
	restrictedLabels = podSecurityLabels("restricted")
	privilegedLabels = podSecurityLabels("privileged")
)

func podSecurityLabels(level string) map[string]string {
	return map[string]string{
		"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/warn": level, "pod-security.kubernetes.io/audit": level,
	}
}

func TestMain(m *testing.M) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		fmt.Println("KUBECONFIG is not set: run the suite with `make e2e`, which brings up a cluster and installs the operator")
		os.Exit(1)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme.Scheme); err != nil {
		panic(err)
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		panic(err)
	}
	kubectl = []string{envOr("KUBECTL", "kubectl"), "--kubeconfig", kubeconfig}
	if err := selectTier(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}

	// Every instance, benchmark and client pod of the suite runs under the
	// Pod Security level restricted.
	namespace = fmt.Sprintf("e2e-%d", rand.Intn(1_000_000))
	nodeNamespace = namespace + "-node"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: restrictedLabels}}
	nodeNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodeNamespace, Labels: privilegedLabels}}
	for _, n := range []*corev1.Namespace{ns, nodeNS} {
		if err := k8s.Create(context.Background(), n); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	if code == 0 || os.Getenv("E2E_KEEP") == "" {
		_ = k8s.Delete(context.Background(), ns)
		_ = k8s.Delete(context.Background(), nodeNS)
		if storeNamespace != "" {
			_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storeNamespace}})
		}
	} else {
		fmt.Printf("namespaces %s and %s kept for inspection (E2E_KEEP set)\n", namespace, nodeNamespace)
		if storeNamespace != "" {
			fmt.Printf("the object store's namespace %s kept too\n", storeNamespace)
		}
	}
	os.Exit(code)
}

// selectTier leaves the full tier's scenarios out of a ci run (with -skip,
// beside any the caller gave), and prints which and why.
func selectTier() error {
	current, err := suiteTier()
	if err != nil || current != tierCI {
		return err
	}
	flag.Parse()
	lines, skip := fullOnly()
	if given := flag.Lookup("test.skip").Value.String(); given != "" {
		skip += "|" + given
	}
	if err := flag.Set("test.skip", skip); err != nil {
		return err
	}
	fmt.Println("E2E_TIER=ci: the scenarios of the full tier are left out (make e2e runs them):")
	for _, l := range lines {
		fmt.Println("  " + l)
	}
	return nil
}

// phases logs how long each phase of a long scenario took: phase(name)
// ends the one before and begins name; phase("") ends the last.
func phases(t *testing.T) func(name string) {
	var current string
	var began time.Time
	return func(name string) {
		t.Helper()
		if current != "" {
			t.Logf("phase %q took %s", current, time.Since(began).Round(100*time.Millisecond))
		}
		current, began = name, time.Now()
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// localNVMe is the storage every scenario uses: the chart's localNvme preset,
// ext4 on the node's local disks (2G loop devices on the offline test bed).
var localNVMe = v1alpha1.StorageSpec{Profile: v1alpha1.StorageLocalNVMe, Size: ptr.To(resource.MustParse("1Gi"))}

// updateRP applies change to the latest version of the RedisPersistence
// name and updates it, again on a conflict: the operator writes its status
// (a new resourceVersion) at any moment.
func updateRP(t *testing.T, name string, change func(*v1alpha1.RedisPersistence)) *v1alpha1.RedisPersistence {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, rp); err != nil {
			return err
		}
		change(rp)
		return k8s.Update(context.Background(), rp)
	}); err != nil {
		t.Fatalf("updating RedisPersistence %s: %v", name, err)
	}
	return rp
}

func create(t *testing.T, name string, spec v1alpha1.RedisPersistenceSpec) *v1alpha1.RedisPersistence {
	t.Helper()
	return createIn(t, namespace, name, spec)
}

// createIn is create in the namespace ns.
func createIn(t *testing.T, ns, name string, spec v1alpha1.RedisPersistenceSpec) *v1alpha1.RedisPersistence {
	t.Helper()
	if spec.Storage == nil {
		storage := localNVMe
		spec.Storage = &storage
	}
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	if err := k8s.Create(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		// Claims outlive a RedisPersistence by design; give the volume back
		// to the test bed's small pool of local disks.
		_ = k8s.Delete(context.Background(), rp)
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name + "-0", Namespace: ns}}
		_ = k8s.Delete(context.Background(), pvc)
	})
	return rp
}

// deleteReplicaClaimsAtEnd gives the claims of a replicated instance's
// servers -1 and -2 back to the test bed's pool of local disks when the test
// passes (createIn does -0's); a failed test keeps them for a look.
func deleteReplicaClaimsAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		for _, ordinal := range []string{"1", "2"} {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name + "-" + ordinal, Namespace: namespace}}
			_ = k8s.Delete(context.Background(), pvc)
		}
	})
}

// waitFor polls the RedisPersistence until check passes.
func waitFor(t *testing.T, name string, timeout time.Duration, check func(*v1alpha1.RedisPersistence) error) *v1alpha1.RedisPersistence {
	t.Helper()
	return waitForIn(t, namespace, name, timeout, check)
}

// waitForIn is waitFor in the namespace ns.
func waitForIn(t *testing.T, ns, name string, timeout time.Duration, check func(*v1alpha1.RedisPersistence) error) *v1alpha1.RedisPersistence {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	var last error
	if wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(context.Context) (bool, error) {
		last = k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rp)
		if last == nil {
			last = check(rp)
		}
		return last == nil, nil
	}) != nil {
		t.Log(describeIn(ns, name))
		t.Fatalf("%s/%s after %s: %v", ns, name, timeout, last)
	}
	return rp
}

func hasCondition(condType string, status metav1.ConditionStatus, reason string) func(*v1alpha1.RedisPersistence) error {
	return func(rp *v1alpha1.RedisPersistence) error {
		c := meta.FindStatusCondition(rp.Status.Conditions, condType)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) || rp.Status.ObservedGeneration != rp.Generation {
			return fmt.Errorf("%s is %+v, want %s %s", condType, c, status, reason)
		}
		return nil
	}
}

func waitReady(t *testing.T, name string) *v1alpha1.RedisPersistence {
	t.Helper()
	return waitFor(t, name, 4*time.Minute, hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready"))
}

// describe gathers what a person would look at when a wait fails.
func describe(name string) string {
	return describeIn(namespace, name)
}

// describeIn is describe in the namespace ns.
func describeIn(ns, name string) string {
	var out bytes.Buffer
	run := func(args ...string) {
		fmt.Fprintf(&out, "$ kubectl %s\n", strings.Join(args, " "))
		cmd := exec.Command(kubectl[0], append(append(kubectl[1:], "-n", ns), args...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		_ = cmd.Run()
	}
	run("get", "redispersistence", name, "-o", "yaml")
	run("get", "pods,pvc", "-o", "wide")
	run("get", "events", "--sort-by=.lastTimestamp")
	var pods corev1.PodList
	_ = k8s.List(context.Background(), &pods, client.InNamespace(ns))
	for _, pod := range pods.Items {
		if !strings.HasPrefix(pod.Name, name+"-") {
			continue
		}
		for _, c := range pod.Spec.Containers {
			run("logs", pod.Name, "-c", c.Name, "--tail", "40")
		}
	}
	return out.String()
}

// fatalDescribed fails t with the message last, after what describe(name)
// shows, so that the reason is the end of a long log, not its middle.
func fatalDescribed(t *testing.T, name, format string, args ...any) {
	t.Helper()
	t.Log(describe(name))
	t.Fatalf(format, args...)
}

// cli runs valkey-cli inside the server pod and returns its output.
func cli(t *testing.T, name string, args ...string) string {
	t.Helper()
	return podExec(t, name+"-0", "", append([]string{"valkey-cli"}, args...)...)
}

func podExec(t *testing.T, pod, stdin string, command ...string) string {
	t.Helper()
	return podExecIn(t, namespace, pod, stdin, command...)
}

// podExecIn is podExec in the namespace ns.
func podExecIn(t *testing.T, ns, pod, stdin string, command ...string) string {
	t.Helper()
	out, err := tryPodExecIn(ns, pod, stdin, command...)
	if err != nil {
		t.Fatalf("exec %v in %s/%s: %v", command, ns, pod, err)
	}
	return out
}

// tryPodExec runs command in pod's server container and returns its output,
// or an error that carries what it printed.
func tryPodExec(pod string, command ...string) (string, error) {
	return tryPodExecIn(namespace, pod, "", command...)
}

// tryPodExecIn is tryPodExec in the namespace ns.
func tryPodExecIn(ns, pod, stdin string, command ...string) (string, error) {
	args := append(append([]string{}, kubectl[1:]...), "-n", ns, "exec", "-i", pod, "-c", "redis", "--")
	cmd := exec.Command(kubectl[0], append(args, command...)...)
	cmd.Stdin = strings.NewReader(stdin)
	// kubectl's own warnings ("Unknown stream id 1, discarding message") go
	// to stderr; only the command's output is the answer.
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w\n%s%s", err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

type modeCase struct {
	name   string
	spec   v1alpha1.RedisPersistenceSpec
	engine string // status.engine once Ready
}

var everyMode = []modeCase{
	{"none", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone}, ""},
	{"rdb", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeRDB, RDB: &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 60, Changes: 1}}}}, ""},
	{"aof-always", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}}, "posix"},
	{"aof-everysec", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}}, "posix"},
	{"aof-no", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncNo}}, "posix"},
	{"uring-durable", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}}, "uring"},
	{"uring-fast", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckFast}}, "uring"},
	{"uring-sqpoll", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{SQPoll: &v1alpha1.SQPollSpec{Enabled: true}}}, "uring"},
}

func TestEveryModeBecomesReady(t *testing.T) {
	for _, c := range everyMode {
		create(t, "mode-"+c.name, c.spec)
	}
	for _, c := range everyMode {
		t.Run(c.name, func(t *testing.T) {
			rp := waitReady(t, "mode-"+c.name)
			st := rp.Status
			if st.Node == "" || st.KernelVersion == "" || st.Filesystem != "ext4" || st.Engine != c.engine {
				t.Errorf("status node=%q kernel=%q filesystem=%q engine=%q; want a node, its kernel, ext4 and engine %q",
					st.Node, st.KernelVersion, st.Filesystem, st.Engine, c.engine)
			}
			info := cli(t, "mode-"+c.name, "info", "persistence")
			if c.engine == "uring" && infoField(info, "aof_uring_active") != "1" {
				t.Errorf("aof_uring_active is %q:\n%s", infoField(info, "aof_uring_active"), info)
			}
		})
	}
}

func TestUringPodRunsUnderLocalhostSeccomp(t *testing.T) {
	create(t, "seccomp", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	waitReady(t, "seccomp")
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "seccomp-0"}, pod); err != nil {
		t.Fatal(err)
	}
	profile := pod.Spec.SecurityContext.SeccompProfile
	if profile == nil || profile.Type != corev1.SeccompProfileTypeLocalhost {
		t.Fatalf("pod seccomp profile %+v, want Localhost", profile)
	}
	// The kernel says which filter the server runs under: mode 2 is a filter.
	if status := podExec(t, "seccomp-0", "", "grep", "^Seccomp:", "/proc/1/status"); !strings.HasSuffix(status, "2") {
		t.Errorf("the server does not run under a seccomp filter: %q", status)
	}
	if active := infoField(cli(t, "seccomp", "info", "persistence"), "aof_uring_active"); active != "1" {
		t.Errorf("aof_uring_active %q under the installed profile", active)
	}
}

func TestDataSurvivesPodDeletion(t *testing.T) {
	modes := []modeCase{everyMode[2], everyMode[5]} // aof always, uring durable
	if ciForm(t) {
		modes = modes[1:]
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			name := "survive-" + mode.name
			create(t, name, mode.spec)
			waitReady(t, name)
			var script strings.Builder
			for i := 0; i < 2000; i++ {
				fmt.Fprintf(&script, "SET key:%d value:%d\n", i, i)
			}
			podExec(t, name+"-0", script.String(), "valkey-cli")
			before := &corev1.Pod{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name + "-0"}, before); err != nil {
				t.Fatal(err)
			}
			if err := k8s.Delete(context.Background(), before); err != nil {
				t.Fatal(err)
			}
			waitFor(t, name, 4*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
				pod := &corev1.Pod{}
				if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name + "-0"}, pod); err != nil {
					return err
				}
				if pod.UID == before.UID {
					return fmt.Errorf("the old pod is still there")
				}
				return hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")(rp)
			})
			if n := cli(t, name, "dbsize"); n != "2000" {
				t.Fatalf("after the restart DBSIZE is %s, want 2000", n)
			}
			if v := cli(t, name, "get", "key:1999"); v != "value:1999" {
				t.Fatalf("key:1999 is %q after the restart", v)
			}
		})
	}
}

func TestModeChangeRollsThePod(t *testing.T) {
	create(t, "switch", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}})
	waitReady(t, "switch")
	updateRP(t, "switch", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Mode, rp.Spec.AOF, rp.Spec.Uring = v1alpha1.ModeUring, nil, &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}
	})
	got := waitFor(t, "switch", 4*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if err := hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")(rp); err != nil {
			return err
		}
		if rp.Status.Engine != "uring" {
			return fmt.Errorf("engine %q", rp.Status.Engine)
		}
		return nil
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUringActive); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("UringActive %+v after switching to uring", c)
	}
	if fsync := cli(t, "switch", "config", "get", "appendfsync-engine"); !strings.Contains(fsync, "uring") {
		t.Errorf("the running server's engine: %q", fsync)
	}
}

func TestInvalidSpecRejected(t *testing.T) {
	manifest := fmt.Sprintf(`apiVersion: persistence.uringredis.io/v1alpha1
kind: RedisPersistence
metadata: {name: invalid, namespace: %s}
spec: {mode: uring, uring: {queueDepth: 100}}
`, namespace)
	cmd := exec.Command(kubectl[0], append(kubectl[1:], "apply", "-f", "-")...)
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "uring.queueDepth must be a power of two between 8 and 32768") {
		t.Fatalf("kubectl apply of an invalid spec: err %v, output %s", err, out)
	}
}

func TestNoEligibleNode(t *testing.T) {
	create(t, "future-kernel", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Placement: v1alpha1.PlacementSpec{MinKernelVersion: "99.0"}})
	rp := waitFor(t, "future-kernel", time.Minute, hasCondition(v1alpha1.ConditionScheduled, metav1.ConditionFalse, "NoEligibleNodes"))
	if msg := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionScheduled).Message; !strings.Contains(msg, "kernel >= 99.0") {
		t.Errorf("message %q does not name the requirement", msg)
	}
}

// denyProfile is the chart's io_uring profile without the io_uring system
// calls, so they fail with EPERM as under containerd 2's RuntimeDefault.
const denyProfile = "uring-redis/e2e-deny-io-uring.json"

// installDenyProfile writes denyProfile into every schedulable node's kubelet
// seccomp directory, from a pod on each.
func installDenyProfile(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "charts", "uring-redis-operator", "files", "io_uring.json"))
	if err != nil {
		t.Fatal(err)
	}
	var profile struct {
		DefaultAction string           `json:"defaultAction"`
		Architectures []string         `json:"architectures,omitempty"`
		Syscalls      []map[string]any `json:"syscalls"`
	}
	if err := json.Unmarshal(raw, &profile); err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, rule := range profile.Syscalls {
		var kept []any
		for _, name := range rule["names"].([]any) {
			if strings.HasPrefix(name.(string), "io_uring_") {
				removed++
				continue
			}
			kept = append(kept, name)
		}
		rule["names"] = kept
	}
	if removed != 3 {
		t.Fatalf("expected the chart's profile to allow 3 io_uring calls, removed %d", removed)
	}
	deny, err := json.Marshal(profile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "deny-io-uring", Namespace: nodeNamespace}, Data: map[string]string{"profile.json": string(deny)}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	for i, node := range schedulableNodeNames(t) {
		installOnNode(t, fmt.Sprintf("install-deny-profile-%d", i), node, cm.Name)
	}
}

func installOnNode(t *testing.T, name, node, configMap string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nodeNamespace},
		Spec: corev1.PodSpec{
			NodeName:      node,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            "install",
				Image:           operatorRedisImage(t, os.Getenv("E2E_NAMESPACE"), os.Getenv("E2E_RELEASE")),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", "mkdir -p /seccomp/uring-redis && cp /profile/profile.json /seccomp/" + denyProfile},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false)},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "profile", MountPath: "/profile"},
					{Name: "seccomp", MountPath: "/seccomp"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "profile", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}},
				{Name: "seccomp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: envOr("E2E_KUBELET_DIR", "/var/lib/kubelet") + "/seccomp"}}},
			},
		},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, false, func(context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil && !wait.Interrupted(err) {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("installing the deny profile on %s: pod phase %s", node, pod.Status.Phase)
	}
}

// TestFallbackUnderDenyingProfile: a uring server whose profile lacks
// io_uring falls back to the posix engine, keeps serving, and says why.
func TestFallbackUnderDenyingProfile(t *testing.T) {
	installDenyProfile(t)
	create(t, "denied", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{LocalhostProfile: denyProfile}})
	rp := waitFor(t, "denied", 4*time.Minute, hasCondition(v1alpha1.ConditionUringActive, metav1.ConditionFalse, "FellBackToPosix"))
	msg := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionUringActive).Message
	if !strings.Contains(strings.ToLower(msg), "eperm") {
		t.Errorf("UringActive message %q does not carry the server's EPERM reason", msg)
	}
	rp = waitReady(t, "denied")
	if rp.Status.Engine != "posix" {
		t.Errorf("engine %q after the fallback, want posix", rp.Status.Engine)
	}
}
