package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestPrepareScript runs the prepare container's script with sh, the server
// build's storage probe on its PATH: it must report the filesystem of a mount
// point and the probe's measurement of the data directory within the probe's
// bound, and render a password the real server parses back exactly, quotes
// and backslashes included.
func TestPrepareScript(t *testing.T) {
	dir := t.TempDir()
	// The filesystem reported is the root's: the test's directory need not be a mount point.
	script := strings.NewReplacer(
		`-v dir="$DATA_DIR"`, "-v dir=/",
		"/dev/termination-log", filepath.Join(dir, "termination-log"),
	).Replace(specs.PrepareScript)
	password, exporterPassword, benchPassword, appPassword := `p"a\ss word$1`, `e"x\p ort`, "bench", "app pass"
	// spec.users with a key pattern the configuration parser must take whole.
	appRP := &v1alpha1.RedisPersistence{Spec: v1alpha1.RedisPersistenceSpec{Users: []v1alpha1.UserSpec{
		{Name: "app", Keys: []string{`app:"quoted"*`}, Commands: []string{"+set", "+get"}},
	}}}
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "DATA_DIR="+dir, "RUN_DIR="+dir, "FSPROBE_MILLIS="+specs.FsprobeMillis, "REDIS_PASSWORD="+password, "PATH="+filepath.Dir(fsprobeBin())+":"+os.Getenv("PATH"),
		"EXPORTER_USER="+specs.ExporterUser, "EXPORTER_PASSWORD="+exporterPassword, "EXPORTER_ACL="+specs.ExporterACLRules,
		"BENCHMARK_USER="+bench.User, "BENCHMARK_PASSWORD="+benchPassword, "BENCHMARK_ACL="+bench.ACLRules(false, false),
		"USERS_ACL="+specs.UsersACL(appRP, specs.UsersState{"app": {Current: specs.PasswordHash(appPassword)}}))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prepare script: %v\n%s", err, out)
	}

	message, err := os.ReadFile(filepath.Join(dir, "termination-log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(message) > 4096 {
		t.Errorf("termination message of %d bytes, the kubelet keeps 4096", len(message))
	}
	report := parseStorageReport(string(message))
	if !strings.HasPrefix(string(message), "filesystem=") || report.filesystem == "" || report.filesystem == "unknown" {
		t.Fatalf("termination message %q does not name the root filesystem", message)
	}
	if !report.measured() || report.mountOptions == "" || report.writeCache == "" {
		t.Fatalf("termination message %q carries no measurement of %s", message, dir)
	}
	// The script hands the probe its bound (TestFsprobe checks the probe keeps it).
	if budget, _ := strconv.Atoi(specs.FsprobeMillis); probeFigure(string(message), "probeMillis") < int64(budget)-1 {
		t.Errorf("termination message %q: the probe did not measure for its bound of %d ms", message, budget)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("the data directory holds %v: the probe must remove its scratch file", entries)
	}

	auth, err := os.ReadFile(filepath.Join(dir, "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(dir, "auth.conf")); info.Mode().Perm() != 0o600 {
		t.Errorf("auth.conf mode %v, want 0600", info.Mode().Perm())
	}
	users, err := os.ReadFile(filepath.Join(dir, "users.conf"))
	if err != nil {
		t.Fatal(err)
	}
	addr := testenv.StartServer(t, "save \"\"\n"+string(auth)+string(users))
	ctx := context.Background()
	good := redis.NewClient(&redis.Options{Addr: addr, Password: password})
	defer func() { _ = good.Close() }()
	if err := good.Ping(ctx).Err(); err != nil {
		t.Fatalf("the password did not survive rendering: %v (auth.conf %q)", err, auth)
	}
	bad := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = bad.Close() }()
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("a client without the password got %v, want NOAUTH", err)
	}

	// The ACL users, with their passwords and rules.
	for _, c := range []struct {
		user, password string
		allowed        [][]any
		refused        [][]any
	}{
		{specs.ExporterUser, exporterPassword, [][]any{{"INFO", "persistence"}, {"EVAL", "return redis.call('INFO', 'server') ~= nil", 0}},
			[][]any{{"GET", "k"}, {"SET", "k", "v"}, {"CONFIG", "GET", "requirepass"}, {"EVAL", "return redis.call('GET', 'k')", 0}}},
		{bench.User, benchPassword, [][]any{{"SET", "key:1", "v"}, {"INFO"}},
			[][]any{{"SET", "orders:1", "v"}, {"FLUSHALL"}}},
		{"app", appPassword, [][]any{{"SET", `app:"quoted"x`, "v"}},
			[][]any{{"SET", "app:plain", "v"}, {"DEL", `app:"quoted"x`}}},
	} {
		c2 := redis.NewClient(&redis.Options{Addr: addr, Username: c.user, Password: c.password})
		for _, cmd := range c.allowed {
			if err := c2.Do(ctx, cmd...).Err(); err != nil && !errors.Is(err, redis.Nil) {
				t.Errorf("%s: %v: %v", c.user, cmd, err)
			}
		}
		for _, cmd := range c.refused {
			if err := c2.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(strings.ToLower(err.Error()), "no permissions") {
				t.Errorf("%s: %v: %v, want a refusal for want of permissions", c.user, cmd, err)
			}
		}
		_ = c2.Close()
	}
	// Without the crash check the benchmark user may not kill the server.
	if got := good.Do(ctx, "ACL", "DRYRUN", bench.User, "DEBUG", "SEGFAULT").Val(); !strings.Contains(fmt.Sprint(got), "no permissions") {
		t.Errorf("ACL DRYRUN %s DEBUG SEGFAULT: %v, want a refusal", bench.User, got)
	}
}

// renderAuth runs the auth part of the prepare container's script (the
// volume measurement left out) with the environment the instance's
// StatefulSet gives that container, its Secrets resolved, and returns the
// auth include file it writes ("" without a password).
func renderAuth(t *testing.T, ns, name string) string {
	t.Helper()
	auth, _ := renderIncludes(t, ns, name)
	return auth
}

// renderIncludes is renderAuth that also returns the users include file.
func renderIncludes(t *testing.T, ns, name string) (auth, users string) {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, name); err != nil {
		t.Fatal(err)
	}
	prepare := specstest.ContainerNamed(t, sts, specs.ContainerPrepare)
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", specs.RenderAuthScript)
	cmd.Env = append(append(os.Environ(), resolveEnv(t, ns, prepare.Env)...), "RUN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("prepare script: %v\n%s", err, out)
	}
	usersFile, err := os.ReadFile(filepath.Join(dir, "users.conf"))
	if err != nil {
		t.Fatalf("the prepare script wrote no users include file: %v", err)
	}
	authFile, err := os.ReadFile(filepath.Join(dir, "auth.conf"))
	if os.IsNotExist(err) {
		return "", string(usersFile)
	} else if err != nil {
		t.Fatal(err)
	}
	return string(authFile), string(usersFile)
}

// resolveEnv is env as NAME=value, with values from Secrets read as the
// kubelet would; a Secret or key that is missing fails the test.
func resolveEnv(t *testing.T, ns string, env []corev1.EnvVar) []string {
	t.Helper()
	var out []string
	for _, e := range env {
		value := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			out = append(out, e.Name+"="+ns)
			continue
		}
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := &corev1.ConfigMap{}
			if err := get(t, cm, ns, ref.Name); err != nil {
				t.Fatalf("env %s: %v", e.Name, err)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				t.Fatalf("env %s: the ConfigMap %s has no key %q", e.Name, ref.Name, ref.Key)
			}
			out = append(out, e.Name+"="+v)
			continue
		}
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				t.Fatalf("env %s: only Secret and ConfigMap references and the namespace are resolved here", e.Name)
			}
			secret := &corev1.Secret{}
			err := get(t, secret, ns, ref.Name)
			v, ok := secret.Data[ref.Key]
			if ref.Optional != nil && *ref.Optional && !ok {
				continue // as the kubelet does
			}
			if err != nil {
				t.Fatalf("env %s: %v", e.Name, err)
			}
			if !ok {
				t.Fatalf("env %s: the Secret %s has no key %q", e.Name, ref.Name, ref.Key)
			}
			value = string(v)
		}
		out = append(out, e.Name+"="+value)
	}
	return out
}

// envValue is the value of name in env (NAME=value lines), "" if absent.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}
