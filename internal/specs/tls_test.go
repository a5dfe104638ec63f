package specs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

// A replicated TLS instance: the servers' start scripts and probes, the
// Sentinels' configuration and the Certificate cert-manager issues.
func TestReplicatedTLSGolden(t *testing.T) {
	render := func() []byte {
		spec := specstest.ReplicatedSpec
		spec.TLS = &v1alpha1.TLSSpec{IssuerRef: &v1alpha1.IssuerRef{Name: "ca", Kind: v1alpha1.IssuerNamespaced, Group: "cert-manager.io"}, ClientAuth: true}
		rp := specstest.NewRedisPersistence(spec)
		in := specs.NewPodInputs(rp, specstest.Password(rp))
		in.AntiAffinity = v1alpha1.AntiAffinityRequired
		in.TLSHash = "0123456789abcdef"
		return documents(t, specs.Certificate(rp).Object, specs.SentinelStatefulSet(rp, specstest.Options, in), specs.StatefulSet(rp, specstest.Options, in))
	}
	got := render()
	if !bytes.Equal(got, render()) {
		t.Fatal("rendering the same spec twice gave different output")
	}
	compareGolden(t, filepath.Join("testdata", "replicated-tls.yaml"), got)
}

// With spec.tls nothing in a pod speaks plain TCP to a server: every
// valkey-cli call carries --tls, the server and Sentinels listen on port 0,
// and the exporter dials rediss://.
func TestTLSReachesEveryClientInThePod(t *testing.T) {
	spec := specstest.ReplicatedSpec
	spec.TLS = &v1alpha1.TLSSpec{SecretName: "cache-certs", ClientAuth: true}
	rp := specstest.NewRedisPersistence(spec)
	in := specs.NewPodInputs(rp, specstest.Password(rp))
	calls, sentinelConf := runStartScripts(t, rp)
	if len(calls) == 0 {
		t.Fatal("the start scripts called no valkey-cli")
	}
	for _, call := range calls {
		if !strings.HasPrefix(call, "--tls --cacert "+specs.TLSCAFile+" --cert "+specs.TLSCertFile+" --key "+specs.TLSKeyFile+" ") {
			t.Errorf("a valkey-cli call without TLS and the client certificate: %s", call)
		}
	}
	if !strings.Contains(sentinelConf, "port 0\n") || !strings.Contains(sentinelConf, "tls-port 26379\n") {
		t.Errorf("the Sentinel does not listen on TLS only:\n%s", sentinelConf)
	}
	conf := specs.RenderConfig(rp)
	for _, want := range []string{"port 0\n", "tls-port 6379\n", "tls-auth-clients yes\n", "tls-replication yes\n", "tls-cert-file " + specs.TLSCertFile + "\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("redis.conf lacks %q", want)
		}
	}
	if strings.Contains(conf, "port 6379\n") && !strings.Contains(conf, "tls-port 6379\n") {
		t.Error("redis.conf listens in plain TCP")
	}
	pod := specs.StatefulSet(rp, specstest.Options, in).Spec.Template.Spec
	for _, c := range pod.Containers {
		joined := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
		if c.Name == specs.ContainerExporter && !strings.Contains(joined, "--redis.addr=rediss://localhost:6379") {
			t.Errorf("the exporter does not speak TLS: %s", joined)
		}
		if c.Name == specs.ContainerRedis && !strings.Contains(strings.Join(c.ReadinessProbe.Exec.Command, " "), "valkey-cli --tls") {
			t.Errorf("the readiness probe does not speak TLS: %v", c.ReadinessProbe.Exec.Command)
		}
	}
	// No TLS, no trace of it: instances from before keep their pods.
	plain := specstest.NewRedisPersistence(specstest.ReplicatedSpec)
	calls, sentinelConf = runStartScripts(t, plain)
	if s := specs.RenderConfig(plain) + strings.Join(calls, "\n") + sentinelConf; strings.Contains(s, "tls") {
		t.Errorf("a plain instance mentions TLS:\n%s", s)
	}
}

// runStartScripts runs the server start script of rp's first server and the
// Sentinel start script with the environment their StatefulSets give them,
// valkey-cli, the servers and getent replaced by stand-ins: every Sentinel
// names the first server primary, which has no data and no healthy
// replica, so the server's script asks every question it can. It returns
// the arguments of every valkey-cli call and the Sentinel's configuration.
func runStartScripts(t *testing.T, rp *v1alpha1.RedisPersistence) (calls []string, sentinelConf string) {
	t.Helper()
	dir := t.TempDir()
	stubs := map[string]string{
		"valkey-cli": `printf '%s\n' "$*" >>"$CALLS"
case "$*" in *get-master-addr-by-name*) echo "$POD_NAME.$DOMAIN" ;; esac`,
		"valkey-server": "", "valkey-sentinel": "", "getent": "",
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	in := specs.NewPodInputs(rp, specstest.Password(rp))
	for _, run := range []struct {
		container corev1.Container
		script    string
	}{
		{specstest.ContainerNamed(t, specs.StatefulSet(rp, specstest.Options, in), specs.ContainerRedis), specs.ServerStartScript},
		{specstest.ContainerNamed(t, specs.SentinelStatefulSet(rp, specstest.Options, in), specs.ContainerSentinel), specs.SentinelStartScript},
	} {
		env := exports(run.container.Env, map[string]string{"DATA_DIR": dir, "SENTINEL_DIR": dir}) + "export POD_NAME=" + rp.Name + "-0\n"
		cmd := exec.Command("sh", "-c", env+run.script)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "CALLS="+filepath.Join(dir, "calls"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s start script: %v\n%s", run.container.Name, err, out)
		}
	}
	log, err := os.ReadFile(filepath.Join(dir, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "sentinel.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(log), "\n"), "\n"), string(conf)
}
