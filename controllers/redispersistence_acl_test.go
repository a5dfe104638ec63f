package controllers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/promtest"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestACLUsers: an instance with a password gets the Secret <name>-acl,
// owned, with two random passwords; the prepare container's script renders
// the exporter's and the benchmark's users into the real server; the real
// redis_exporter, run with the exporter container's arguments and resolved
// environment, serves everything the dashboards read while the server's
// ACL LOG stays empty, and the exporter's user is refused keys and CONFIG.
// A new Secret reaches the pod template. An instance without a password has
// no users, and its exporter signs in as default.
func TestACLUsers(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createRP(t, ns, "users", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring})
	waitCondition(t, ns, "users", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)

	secret := &corev1.Secret{}
	eventually(t, 30*time.Second, func() error { return get(t, secret, ns, "users-acl") })
	if owner := metav1.GetControllerOf(secret); owner == nil || owner.Kind != "RedisPersistence" || owner.Name != "users" {
		t.Errorf("the Secret users-acl is controlled by %v, want the RedisPersistence", owner)
	}
	exporterPassword, benchPassword := string(secret.Data[specs.ACLExporterKey]), string(secret.Data[specs.ACLBenchmarkKey])
	if len(exporterPassword) != 43 || len(benchPassword) != 43 || exporterPassword == benchPassword {
		t.Errorf("passwords %q and %q, want two distinct 43-character ones", exporterPassword, benchPassword)
	}

	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "users"); err != nil {
		t.Fatal(err)
	}
	hash := sts.Spec.Template.Annotations[specs.AnnotationACLHash]
	if hash == "" {
		t.Errorf("the pod template has no %s", specs.AnnotationACLHash)
	}
	exporter := specstest.ContainerNamed(t, sts, specs.ContainerExporter)
	env := resolveEnv(t, ns, exporter.Env)
	if envValue(env, "REDIS_USER") != specs.ExporterUser || envValue(env, "REDIS_PASSWORD") != exporterPassword {
		t.Errorf("the exporter signs in with %q: want %s and the Secret's password", env, specs.ExporterUser)
	}

	addr := testenv.StartServer(t, renderedConfig(t, ns, "users"))
	if !slices.Contains(exporter.Args, "--config-command=-") {
		t.Errorf("the exporter's args %q ask for CONFIG, which its user may not send", exporter.Args)
	}
	metrics := scrapeExporter(t, ns, sts, addr)
	admin := newClient(addr, instancePassword(t, ns, "users"))
	defer func() { _ = admin.Close() }()
	for _, want := range []string{"\nredis_up 1\n", `key="aof_engine_uring"} 1`, "redis_aof_last_write_status", "redis_commands_processed_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the exporter's metrics lack %q", want)
		}
	}
	if refused := testenv.ACLRefusals(t, admin); len(refused) > 0 {
		t.Errorf("the server refused the exporter: %q", refused)
	}
	for _, cmd := range [][]any{{"GET", "k"}, {"SET", "k", "v"}, {"CONFIG", "GET", "requirepass"}, {"FLUSHALL"}, {"KEYS", "*"}} {
		got := admin.Do(ctx, append([]any{"ACL", "DRYRUN", specs.ExporterUser}, cmd...)...).Val()
		if !strings.Contains(fmt.Sprint(got), "no permissions") {
			t.Errorf("ACL DRYRUN %s %v: %v, want a refusal", specs.ExporterUser, cmd, got)
		}
	}

	if got := admin.Do(ctx, "ACL", "DRYRUN", backup.BackupUser, "PSYNC", "?", "-1").Val(); got != "OK" {
		t.Errorf("ACL DRYRUN %s PSYNC ? -1: %v, want OK", backup.BackupUser, got)
	}
	for _, cmd := range [][]any{{"GET", "k"}, {"SET", "k", "v"}, {"CONFIG", "SET", "save", ""}, {"FLUSHALL"}, {"REPLICAOF", "NO", "ONE"}} {
		got := admin.Do(ctx, append([]any{"ACL", "DRYRUN", backup.BackupUser}, cmd...)...).Val()
		if !strings.Contains(fmt.Sprint(got), "no permissions") {
			t.Errorf("ACL DRYRUN %s %v: %v, want a refusal", backup.BackupUser, cmd, got)
		}
	}

	// A Secret made before the backup user gets its password, and the pods
	// restart with it.
	patch := client.MergeFrom(secret.DeepCopy())
	delete(secret.Data, specs.ACLBackupKey)
	if err := k8s.Patch(ctx, secret, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, secret, ns, "users-acl"); err != nil {
			return err
		}
		if len(secret.Data[specs.ACLBackupKey]) != 43 || string(secret.Data[specs.ACLExporterKey]) != exporterPassword {
			return fmt.Errorf("the Secret has backup password %q and exporter password %q, want a new 43-character one and the same", secret.Data[specs.ACLBackupKey], secret.Data[specs.ACLExporterKey])
		}
		if err := get(t, sts, ns, "users"); err != nil {
			return err
		}
		if sts.Spec.Template.Annotations[specs.AnnotationACLHash] == hash {
			return fmt.Errorf("the pod template keeps %s %s", specs.AnnotationACLHash, hash)
		}
		return nil
	})
	hash = sts.Spec.Template.Annotations[specs.AnnotationACLHash]

	// A new Secret: new passwords, and the pods restart with them.
	if err := k8s.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		renewed := &corev1.Secret{}
		if err := get(t, renewed, ns, "users-acl"); err != nil {
			return err
		}
		if string(renewed.Data[specs.ACLExporterKey]) == exporterPassword {
			return fmt.Errorf("the Secret was made again with the old password")
		}
		if err := get(t, sts, ns, "users"); err != nil {
			return err
		}
		if sts.Spec.Template.Annotations[specs.AnnotationACLHash] == hash {
			return fmt.Errorf("the pod template keeps %s %s", specs.AnnotationACLHash, hash)
		}
		return nil
	})

	// Without a password, no users.
	createRP(t, ns, "open", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Auth: &v1alpha1.AuthSpec{Disabled: true}})
	waitCondition(t, ns, "open", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	if err := get(t, sts, ns, "open"); err != nil {
		t.Fatal(err)
	}
	if err := get(t, &corev1.Secret{}, ns, "open-acl"); !apierrors.IsNotFound(err) {
		t.Errorf("an instance without a password has the Secret open-acl (err %v)", err)
	}
	if env := specstest.ContainerNamed(t, sts, specs.ContainerExporter).Env; len(env) > 0 {
		t.Errorf("the exporter of an instance without a password has env %v", env)
	}
	if args := specstest.ContainerNamed(t, sts, specs.ContainerExporter).Args; slices.Contains(args, "--config-command=-") {
		t.Errorf("the exporter of an instance without a password skips CONFIG: %q", args)
	}
	if auth := renderAuth(t, ns, "open"); auth != "" {
		t.Errorf("the prepare script renders %q for an instance without a password", auth)
	}
}

// scrapeExporter runs the real redis_exporter as sts's exporter container
// would (its arguments and its environment, Secrets resolved) against the
// server at addr, and returns its third scrape.
func scrapeExporter(t *testing.T, ns string, sts *appsv1.StatefulSet, addr string) string {
	t.Helper()
	exporter := specstest.ContainerNamed(t, sts, specs.ContainerExporter)
	var args []string
	for _, arg := range exporter.Args {
		switch {
		case strings.HasPrefix(arg, "--redis.addr="):
			arg = "--redis.addr=redis://" + addr
		case strings.HasPrefix(arg, "--web.listen-address="):
			continue
		case strings.HasPrefix(arg, "--script="):
			arg = "--script=" + filepath.Join(testenv.RepoRoot(), "internal", "specs", specs.ExporterScriptFile)
		}
		args = append(args, arg)
	}
	metricsAddr := promtest.ExporterWith(t, args, resolveEnv(t, ns, exporter.Env))
	var metrics string
	for range 3 {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		metrics = string(body)
	}
	return metrics
}
