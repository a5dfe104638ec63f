package plugin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// The command line `cli` and the report's INFO run in a pod: no password
// in it (valkey-cli reads REDISCLI_AUTH from the container's environment),
// the instance's TLS flags with spec.tls, the Sentinel's port in a Sentinel
// pod, and the user's arguments after them. Run by sh against a stand-in
// valkey-cli that prints what it got, the arguments arrive as they were
// given (no shell parses them), the session signs in with the container's
// REDISCLI_AUTH and keeps no history, and the report's INFO signs in as
// the exporter's user where the container has it.
func TestCLICommand(t *testing.T) {
	const password = "hunter2-s3cret-XYZ"
	plain := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "cache"}, Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}}
	withTLS := plain.DeepCopy()
	withTLS.Spec.TLS = &v1alpha1.TLSSpec{SecretName: "cache-tls", ClientAuth: true}
	server := cliTarget{pod: "cache-0", container: specs.ContainerRedis, port: specs.RedisPort}
	sentinel := cliTarget{pod: "cache-sentinel-0", container: specs.ContainerSentinel, port: specs.SentinelPort}

	for _, tc := range []struct {
		desc   string
		rp     *v1alpha1.RedisPersistence
		target cliTarget
		want   []string // after sh -c SCRIPT valkey-cli
	}{
		{"a server", plain, server, []string{"-p", "6379", "GET", "k"}},
		{"a server over TLS with a client certificate", withTLS, server,
			[]string{"--tls", "--cacert", specs.TLSCAFile, "--cert", specs.TLSCertFile, "--key", specs.TLSKeyFile, "-p", "6379", "GET", "k"}},
		{"a Sentinel", plain, sentinel, []string{"-p", "26379", "GET", "k"}},
	} {
		for _, user := range []cliUser{asDefault, asMonitor} {
			command := cliCommand(tc.rp, tc.target, user, []string{"GET", "k"})
			if !slices.Equal(command[:4], []string{"sh", "-c", cliScripts[user], "valkey-cli"}) || !slices.Equal(command[4:], tc.want) {
				t.Errorf("%s: %q, want sh -c SCRIPT valkey-cli %q", tc.desc, command, tc.want)
			}
			for _, arg := range command {
				if strings.Contains(arg, password) || arg == "-a" || arg == "--pass" || arg == "--askpass" {
					t.Errorf("%s: the command line holds a password: %q", tc.desc, command)
				}
			}
		}
	}

	bin := t.TempDir()
	stub := "#!/bin/sh\nprintf 'auth=%s\\nhistory=%s\\n' \"$REDISCLI_AUTH\" \"$REDISCLI_HISTFILE\"\nfor a in \"$@\"; do printf 'arg=%s\\n' \"$a\"; done\n"
	if err := os.WriteFile(filepath.Join(bin, "valkey-cli"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	runIn := func(env []string, command []string) string {
		t.Helper()
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin"}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", command, err, out)
		}
		return string(out)
	}
	tricky := []string{"SET", "k", "two words; $(touch /tmp/x) `id` \"q\""}
	got := runIn([]string{"REDISCLI_AUTH=" + password}, cliCommand(plain, server, asDefault, tricky))
	if want := "auth=" + password + "\nhistory=/dev/null\narg=-p\narg=6379\narg=SET\narg=k\narg=" + tricky[2] + "\n"; got != want {
		t.Errorf("a session's valkey-cli got\n%s\nwant\n%s", got, want)
	}
	container := []string{"REDISCLI_AUTH=" + password, "PROBE_USER=" + specs.ExporterUser, "PROBE_PASSWORD=exporter-pass"}
	got = runIn(container, cliCommand(plain, server, asMonitor, []string{"INFO", "everything"}))
	if want := "auth=exporter-pass\nhistory=/dev/null\narg=--user\narg=" + specs.ExporterUser + "\narg=-p\narg=6379\narg=INFO\narg=everything\n"; got != want {
		t.Errorf("the report's valkey-cli in a server with ACL users got\n%s\nwant\n%s", got, want)
	}
	got = runIn([]string{"REDISCLI_AUTH=" + password}, cliCommand(plain, sentinel, asMonitor, []string{"INFO", "everything"}))
	if want := "auth=" + password + "\nhistory=/dev/null\narg=-p\narg=26379\narg=INFO\narg=everything\n"; got != want {
		t.Errorf("the report's valkey-cli in a Sentinel got\n%s\nwant\n%s", got, want)
	}
}

// cli runs on the primary status names, the one server of a single
// instance, or the server or Sentinel --pod names, and refuses a pod of
// another instance, no primary known, and arguments not after --. There is
// no kubelet here: the exec reaches the API server, which says the pod has
// no node, and the plugin names the pod it tried.
func TestCLIFindsItsPod(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	create(t, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Replicas: 2}}, v1alpha1.RedisPersistenceStatus{Primary: "cache-1"})
	create(t, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fresh"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Replicas: 2}}, v1alpha1.RedisPersistenceStatus{})
	create(t, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "single"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}}, v1alpha1.RedisPersistenceStatus{})
	pod := func(name string, labels map[string]string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "redis-uring:test"}}}}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	rpNamed := func(name string) *v1alpha1.RedisPersistence {
		return &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	pod("cache-1", specs.SelectorLabels(rpNamed("cache")))
	pod("cache-sentinel-0", specs.SentinelSelectorLabels(rpNamed("cache")))
	pod("single-0", specs.SelectorLabels(rpNamed("single")))
	pod("other-0", specs.SelectorLabels(rpNamed("other")))

	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"cli", "cache", "--", "GET", "k"}, "valkey-cli in " + ns + "/cache-1: "},
		{[]string{"cli", "single"}, "valkey-cli in " + ns + "/single-0: "},
		{[]string{"cli", "cache", "--pod", "cache-sentinel-0"}, "valkey-cli in " + ns + "/cache-sentinel-0: "},
		{[]string{"cli", "cache", "--pod", "other-0"}, "the pod other-0 is not a server or Sentinel of cache"},
		{[]string{"cli", "cache", "--pod", "cache-9"}, "no pod cache-9 in namespace " + ns},
		{[]string{"cli", "fresh"}, "the primary of fresh is not known (status.primary is empty"},
		{[]string{"cli", "cache", "GET", "k"}, "cli takes NAME, then valkey-cli's arguments after --"},
		{[]string{"cli", "gone"}, `no RedisPersistence "gone"`},
	} {
		if _, _, err := run(t, append([]string{"-n", ns}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("kubectl uring %s: %v, want %q", strings.Join(tc.args, " "), err, tc.wantErr)
		}
	}
}
