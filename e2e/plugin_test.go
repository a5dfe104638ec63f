//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestPluginOnAReplicatedInstance runs the kubectl plugin as a user runs it
// (`kubectl uring`, found on the PATH) against a two-server uring durable
// instance with its Sentinels: `cli` SETs on the primary through the
// kubelet's exec and GETs on the replica and the primary, reads a session's
// commands from standard input, asks a Sentinel for the primary; `report`
// holds every server's and Sentinel's INFO; `switchover --to` the replica
// --wait hands the primary role over through the Sentinels (which name the
// servers by host name, unlike envtest's) and `cli` then reaches the new
// primary with the key. The generated password is in no output and no
// file of the report.
func TestPluginOnAReplicatedInstance(t *testing.T) {
	const name = "plugin"
	phase := phases(t)
	defer phase("")
	phase("build the plugin")
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-uring"), "../cmd/kubectl-uring")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	uring := func(stdin string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(kubectl[0], append(append([]string{"uring"}, kubectl[1:]...), append([]string{"-n", namespace}, args...)...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("kubectl uring %s: %w\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
		}
		return strings.TrimSpace(stdout.String()), err
	}
	mustUring := func(stdin string, args ...string) string {
		t.Helper()
		out, err := uring(stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	phase("replicated instance")
	create(t, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, AckReplicas: 1}, Replicas: 2,
	})
	t.Cleanup(func() {
		if !t.Failed() {
			_ = k8s.Delete(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name + "-1", Namespace: namespace}})
		}
	})
	rp := waitFor(t, name, 6*time.Minute, hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating"))
	if rp.Status.Primary != name+"-0" {
		t.Fatalf("status.primary %q, want %s-0", rp.Status.Primary, name)
	}
	secret := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name + "-auth"}, secret); err != nil {
		t.Fatalf("no generated password Secret: %v", err)
	}
	password := string(secret.Data["password"])
	var printed []string
	check := func(what, got, want string) {
		t.Helper()
		printed = append(printed, got)
		if got != want {
			t.Errorf("%s printed %q, want %q", what, got, want)
		}
	}

	phase("cli")
	// ackReplicas 1: the SET is acknowledged once the replica holds it.
	check("cli SET", mustUring("", "cli", name, "--", "SET", "plugin:key", "through the plugin"), "OK")
	check("cli GET on the primary", mustUring("", "cli", name, "--", "GET", "plugin:key"), "through the plugin")
	check("cli GET on the replica", mustUring("", "cli", name, "--pod", name+"-1", "--", "GET", "plugin:key"), "through the plugin")
	check("a session from standard input", mustUring("SET plugin:session 1\nINCR plugin:session\n", "cli", name), "OK\n2")
	sentinel := mustUring("", "cli", name, "--pod", name+"-sentinel-0", "--", "SENTINEL", "get-master-addr-by-name", name)
	printed = append(printed, sentinel)
	if !strings.HasPrefix(sentinel, name+"-0.") {
		t.Errorf("the Sentinel names %q primary, want %s-0", sentinel, name)
	}

	phase("report")
	file := filepath.Join(t.TempDir(), "report.tar.gz")
	printed = append(printed, mustUring("", "report", name, "-f", file))
	files := reportFiles(t, file)
	for pod, want := range map[string]string{name + "-0": "role:master", name + "-1": "role:slave", name + "-sentinel-0": "# Sentinel"} {
		if info := files["info/"+pod+".txt"]; !strings.Contains(info, want) || !strings.Contains(info, "# Server") {
			t.Errorf("the report's INFO of %s lacks %q:\n%.400s", pod, want, info)
		}
	}
	if readme := files["README.txt"]; strings.Contains(readme, "the INFO of") {
		t.Errorf("the report could not read every INFO:\n%s", readme)
	}
	for file, body := range files {
		if strings.Contains(body, password) {
			t.Errorf("the report's %s holds the password", file)
		}
	}

	phase("switchover")
	out := mustUring("", "switchover", name, "--to", name+"-1", "--wait")
	printed = append(printed, out)
	if !strings.Contains(out, name+": "+name+"-1 is the primary: the Sentinels promoted "+name+"-1") {
		t.Errorf("switchover --wait printed %q", out)
	}
	waitFor(t, name, time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if rp.Status.Primary != name+"-1" {
			return fmt.Errorf("status.primary %q", rp.Status.Primary)
		}
		return nil
	})
	check("cli GET on the new primary", mustUring("", "cli", name, "--", "GET", "plugin:key"), "through the plugin")
	check("cli INFO on the new primary", infoField(mustUring("", "cli", name, "--", "INFO", "replication"), "role"), "master")
	if _, err := uring("", "switchover", name, "--to", name+"-1"); err == nil || !strings.Contains(err.Error(), "is the primary of "+name+" already") {
		t.Errorf("a switchover to the primary: %v", err)
	}

	for _, out := range printed {
		if strings.Contains(out, password) {
			t.Errorf("the plugin printed the password: %q", out)
		}
	}
}

// reportFiles are the files of a report tarball, by their path under its
// top directory.
func reportFiles(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(h.Name, "/")
		files[rest] = string(body)
	}
}
