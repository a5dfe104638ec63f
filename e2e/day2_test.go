//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Day-2 operations on a running instance, as a user does them: change the
// mode, protect it with a password, survive a crash, tune it.

func specFor(mode v1alpha1.PersistenceMode) v1alpha1.RedisPersistenceSpec {
	switch mode {
	case v1alpha1.ModeRDB:
		return v1alpha1.RedisPersistenceSpec{Mode: mode, RDB: &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 3600, Changes: 1}}}}
	case v1alpha1.ModeAOF:
		return v1alpha1.RedisPersistenceSpec{Mode: mode, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}}
	case v1alpha1.ModeUring:
		return v1alpha1.RedisPersistenceSpec{Mode: mode, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}}
	}
	return v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone}
}

func getPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func writeStep(t *testing.T, name, step string, n int) {
	t.Helper()
	var script strings.Builder
	for i := range n {
		fmt.Fprintf(&script, "SET %s:%d %s-%d\n", step, i, step, i)
	}
	podExec(t, name+"-0", script.String(), "valkey-cli")
}

func checkSteps(t *testing.T, name string, steps []string, n int) {
	t.Helper()
	if got, want := cli(t, name, "dbsize"), strconv.Itoa(len(steps)*n); got != want {
		t.Fatalf("DBSIZE %s, want %s (%d keys from each of %v)", got, want, n, steps)
	}
	for _, step := range steps {
		key := fmt.Sprintf("%s:%d", step, n-1)
		if v := cli(t, name, "get", key); v != fmt.Sprintf("%s-%d", step, n-1) {
			t.Fatalf("%s is %q", key, v)
		}
	}
}

// modeTour walks every ordered pair of modes once (an Eulerian circuit of the
// complete graph on none, rdb, aof, uring).
var modeTour = []v1alpha1.PersistenceMode{
	v1alpha1.ModeNone, v1alpha1.ModeRDB, v1alpha1.ModeAOF, v1alpha1.ModeUring, v1alpha1.ModeNone, v1alpha1.ModeAOF,
	v1alpha1.ModeRDB, v1alpha1.ModeUring, v1alpha1.ModeAOF, v1alpha1.ModeNone, v1alpha1.ModeUring, v1alpha1.ModeRDB, v1alpha1.ModeNone,
}

// quickTour is the ci tier's: every mode's conversion in and out once.
var quickTour = []v1alpha1.PersistenceMode{v1alpha1.ModeRDB, v1alpha1.ModeAOF, v1alpha1.ModeUring, v1alpha1.ModeRDB}

// TestModeChangesKeepTheData writes keys, changes the mode, waits for the
// instance to be Ready in the new mode (the pod rolled where the template
// changed), and checks every key written so far, through every mode pair.
func TestModeChangesKeepTheData(t *testing.T) {
	tour := modeTour
	if ciForm(t) {
		tour = quickTour
	}
	const name, perStep = "tour", 300
	spec := specFor(tour[0])
	spec.Exporter.Enabled = ptr.To(false)
	rp := create(t, name, spec)
	waitReady(t, name)
	var steps []string
	for i, to := range tour[1:] {
		from := tour[i]
		step := fmt.Sprintf("step%d-%s", i, from)
		writeStep(t, name, step, perStep)
		steps = append(steps, step)
		started := time.Now()
		next := specFor(to)
		rp = updateRP(t, rp.Name, func(rp *v1alpha1.RedisPersistence) {
			rp.Spec.Mode, rp.Spec.RDB, rp.Spec.AOF, rp.Spec.Uring = next.Mode, next.RDB, next.AOF, next.Uring
		})
		waitFor(t, name, 4*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
			if err := hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")(rp); err != nil {
				return err
			}
			cm := &corev1.ConfigMap{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name + "-config"}, cm); err != nil {
				return err
			}
			if cm.Annotations["uringredis.io/mode"] != string(to) {
				return fmt.Errorf("the ConfigMap is in mode %q", cm.Annotations["uringredis.io/mode"])
			}
			return nil
		})
		wantAOF := map[bool]string{true: "1", false: "0"}[to == v1alpha1.ModeAOF || to == v1alpha1.ModeUring]
		if got := infoField(cli(t, name, "info", "persistence"), "aof_enabled"); got != wantAOF {
			t.Fatalf("%s -> %s: aof_enabled %s", from, to, got)
		}
		checkSteps(t, name, steps, perStep)
		t.Logf("%s -> %s: Ready with all %d keys after %s", from, to, len(steps)*perStep, time.Since(started).Round(time.Second))
	}
	// A last restart in the final mode keeps the data too. The instance
	// is Ready from before the deletion until the operator sees the new
	// pod: its server must be Ready too.
	deleted := getPod(t, name+"-0")
	if err := k8s.Delete(context.Background(), deleted); err != nil {
		t.Fatal(err)
	}
	ready := hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	waitFor(t, name, 4*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		pod := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name + "-0"}, pod); err != nil {
			return err
		}
		if pod.UID == deleted.UID || !podReady(pod) {
			return fmt.Errorf("%s-0 is not a new Ready pod yet", name)
		}
		return ready(rp)
	})
	// mode none too: it restarts from the snapshot taken when it became none,
	// and nothing was written since.
	checkSteps(t, name, steps, perStep)
}

// TestAuthInstanceDoesNotStallOthers: an instance with a password becomes
// Ready, twelve more created after it all become Ready, and a new password
// reaches the server.
func TestAuthInstanceDoesNotStallOthers(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "guarded-auth", Namespace: namespace}, StringData: map[string]string{"password": "first-password"}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// mode none without storage: no volume, so the twelve fit on the test bed.
	ephemeral := func() v1alpha1.RedisPersistenceSpec {
		return v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, Storage: nil, Exporter: v1alpha1.ExporterSpec{Enabled: ptr.To(false)}}
	}
	guarded := ephemeral()
	guarded.Auth = &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "guarded-auth"}}
	guarded.Exporter.Enabled = ptr.To(true)
	guarded.PasswordGracePeriod = &metav1.Duration{Duration: 20 * time.Second}
	createWithoutStorage(t, "guarded", guarded)
	waitReady(t, "guarded")
	if out := cli(t, "guarded", "--no-auth-warning", "-a", "first-password", "ping"); out != "PONG" {
		t.Fatalf("ping with the password: %q", out)
	}

	started := time.Now()
	for i := range 12 {
		createWithoutStorage(t, fmt.Sprintf("neighbour-%d", i), ephemeral())
	}
	for i := range 12 {
		name := fmt.Sprintf("neighbour-%d", i)
		waitReady(t, name)
		var claims corev1.PersistentVolumeClaimList
		if err := k8s.List(ctx, &claims, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil || len(claims.Items) != 0 {
			t.Fatalf("%s: claims %d (err %v); mode none without storage claims nothing", name, len(claims.Items), err)
		}
	}
	t.Logf("12 instances created after the auth instance all Ready in %s", time.Since(started).Round(time.Second))

	// A new password is rotated on the running server: the new one works at
	// once, the previous one for the 20 s grace period, the pod is neither
	// replaced nor restarted and stays Ready (its probe signs in as the
	// exporter's user, not with the password it started with).
	before := getPod(t, "guarded-0")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["password"] = []byte("second-password")
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	ping := func(password string) string {
		out, _ := tryPodExec("guarded-0", "valkey-cli", "--no-auth-warning", "-a", password, "ping")
		return out
	}
	start := time.Now()
	eventually(t, time.Minute, func() bool { return ping("second-password") == "PONG" })
	if out := ping("second-password"); out != "PONG" {
		t.Fatalf("ping with the new password a minute after the change: %q", out)
	}
	t.Logf("the new password worked %s after the Secret changed", time.Since(start).Round(time.Second))
	eventually(t, 2*time.Minute, func() bool { return ping("first-password") != "PONG" })
	if out := ping("first-password"); !strings.Contains(out, "WRONGPASS") && !strings.Contains(out, "NOAUTH") {
		t.Errorf("ping with the previous password %s after the change: %q", time.Since(start).Round(time.Second), out)
	}
	time.Sleep(15 * time.Second) // three readiness probes after the previous password went
	after := getPod(t, "guarded-0")
	if after.UID != before.UID || serverRestarts(after) != serverRestarts(before) {
		t.Errorf("the rotation replaced or restarted the pod: uid %s -> %s, restarts %d -> %d", before.UID, after.UID, serverRestarts(before), serverRestarts(after))
	}
	waitFor(t, "guarded", time.Minute, hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready"))
	for _, c := range after.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			t.Errorf("the pod is not Ready after the previous password went: %s", c.Message)
		}
	}
}

// createWithoutStorage is create for an instance without spec.storage.
func createWithoutStorage(t *testing.T, name string, spec v1alpha1.RedisPersistenceSpec) {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: spec}
	if err := k8s.Create(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			_ = k8s.Delete(context.Background(), rp)
		}
	})
}

// TestNoneSampleRunsWithoutAClaim applies the sample as a user would.
func TestNoneSampleRunsWithoutAClaim(t *testing.T) {
	run(t, kubectl[0], append(kubectl[1:], "-n", namespace, "apply", "-f", "../config/samples/persistence_v1alpha1_redispersistence_none.yaml")...)
	t.Cleanup(func() {
		if !t.Failed() {
			_ = exec.Command(kubectl[0], append(kubectl[1:], "-n", namespace, "delete", "-f", "../config/samples/persistence_v1alpha1_redispersistence_none.yaml")...).Run()
		}
	})
	waitReady(t, "cache-none")
	if volume := getPod(t, "cache-none-0").Spec.Volumes; !hasEmptyDirData(volume) {
		t.Errorf("the data volume is not an emptyDir: %+v", volume)
	}
}

func hasEmptyDirData(volumes []corev1.Volume) bool {
	for _, v := range volumes {
		if v.Name == "data" {
			return v.EmptyDir != nil
		}
	}
	return false
}

// TestCrashReported crashes a uring durable server with a signal and expects
// the RedisPersistence to say so within a minute.
func TestCrashReported(t *testing.T) {
	spec := specFor(v1alpha1.ModeUring)
	// DEBUG is off unless the instance allows a benchmark's crash check.
	spec.Benchmark = &v1alpha1.BenchmarkAccessSpec{CrashCheck: true}
	create(t, "crash", spec)
	waitReady(t, "crash")
	// DEBUG SEGFAULT faults for real; a container's PID 1 ignores kill -SEGV
	// from inside its namespace. The exec fails with the connection.
	crashed := time.Now()
	_ = exec.Command(kubectl[0], append(kubectl[1:], "-n", namespace, "exec", "crash-0", "-c", "redis", "--", "valkey-cli", "debug", "segfault")...).Run()
	rp := waitFor(t, "crash", time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		last := rp.Status.LastTermination
		if rp.Status.Restarts < 1 || last == nil {
			return fmt.Errorf("restarts %d, last termination %+v", rp.Status.Restarts, last)
		}
		if !meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionDegraded) {
			return fmt.Errorf("not Degraded")
		}
		return nil
	})
	last := rp.Status.LastTermination
	if last.Signal != 11 && last.ExitCode != 139 {
		t.Errorf("last termination %+v, want SIGSEGV", last)
	}
	t.Logf("reported %s after the crash: %s", time.Since(crashed).Round(time.Second), meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionDegraded).Message)
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || e.InvolvedObject.Name == "crash" && e.Reason == "Restarted" && e.Type == corev1.EventTypeWarning
	}
	if !found {
		t.Error("no Restarted warning event on the RedisPersistence")
	}
	out := run(t, kubectl[0], append(kubectl[1:], "-n", namespace, "get", "rp", "crash")...)
	if !strings.Contains(out, "RESTARTS") {
		t.Errorf("kubectl get rp has no RESTARTS column:\n%s", out)
	}
	// It serves again.
	waitReady(t, "crash")
}

// TestTuningWithoutRestart changes the ring's queue depth: the server takes
// it with CONFIG SET, the pod does not restart.
func TestTuningWithoutRestart(t *testing.T) {
	spec := specFor(v1alpha1.ModeUring)
	spec.Uring.QueueDepth = 256
	create(t, "tuned", spec)
	waitReady(t, "tuned")
	before := getPod(t, "tuned-0")
	restarts := serverRestarts(before)
	updateRP(t, "tuned", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Uring.QueueDepth = 512 })
	waitFor(t, "tuned", 2*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "tuned-config"}, cm); err != nil {
			return err
		}
		if want := cm.Annotations["uringredis.io/runtime-config-hash"]; rp.Status.AppliedConfigHash != want || rp.Status.ObservedGeneration != rp.Generation {
			return fmt.Errorf("appliedConfigHash %q, the ConfigMap's %q", rp.Status.AppliedConfigHash, want)
		}
		return nil
	})
	if got := cli(t, "tuned", "config", "get", "aof-uring-queue-depth"); !strings.HasSuffix(got, "512") {
		t.Errorf("CONFIG GET aof-uring-queue-depth: %q", got)
	}
	after := getPod(t, "tuned-0")
	if after.UID != before.UID || serverRestarts(after) != restarts {
		t.Errorf("the pod restarted for a queue depth change: uid %s -> %s, restarts %d -> %d",
			before.UID, after.UID, restarts, serverRestarts(after))
	}
	if active := infoField(cli(t, "tuned", "info", "persistence"), "aof_uring_active"); active != "1" {
		t.Errorf("aof_uring_active %q after the live change", active)
	}
	waitFor(t, "tuned", time.Minute, hasCondition(v1alpha1.ConditionConfigApplied, metav1.ConditionTrue, "Applied"))

	// A value the server refuses is said in ConfigApplied, with the server's
	// error; the server keeps the value it had, and taking it back clears it.
	updateRP(t, "tuned", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Config = map[string]v1alpha1.ServerOptionValue{"maxmemory-policy": "keep-everything"}
	})
	waitFor(t, "tuned", 2*time.Minute, hasCondition(v1alpha1.ConditionConfigApplied, metav1.ConditionFalse, "ConfigRefused"))
	if got := cli(t, "tuned", "config", "get", "maxmemory-policy"); !strings.HasSuffix(got, "noeviction") {
		t.Errorf("CONFIG GET maxmemory-policy after a refused value: %q", got)
	}
	updateRP(t, "tuned", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Config = nil })
	waitFor(t, "tuned", 2*time.Minute, hasCondition(v1alpha1.ConditionConfigApplied, metav1.ConditionTrue, "Applied"))
	if after := getPod(t, "tuned-0"); after.UID != before.UID || serverRestarts(after) != restarts {
		t.Errorf("a refused option restarted the pod: restarts %d -> %d", restarts, serverRestarts(after))
	}
}

func serverRestarts(pod *corev1.Pod) int32 {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "redis" {
			return cs.RestartCount
		}
	}
	return -1
}
