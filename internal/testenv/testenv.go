// Package testenv starts a real kube-apiserver and etcd (envtest) with the
// project's CRDs for tests, and optionally the real controllers and scheduler
// a cluster runs next to it. The binaries are built from source by
// `make envtest-assets`; KUBEBUILDER_ASSETS points at them.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// RedisPersistenceGVK is the kind's GroupVersionKind, for unstructured objects in tests.
var RedisPersistenceGVK = v1alpha1.GroupVersion.WithKind("RedisPersistence")

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Env is a running API server.
type Env struct {
	Config *rest.Config
	Client client.Client

	env       *envtest.Environment
	processes []*exec.Cmd
	dir       string
}

// Start runs an API server with the project's CRDs plus any extra CRD
// directories. It exits the test binary with a message when the assets are
// missing, so a plain `go test` explains itself instead of skipping.
func Start(m *testing.M, extraCRDDirs ...string) *Env {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fail("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds kube-apiserver and fetches etcd into bin/k8s/")
	}
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		fail(err.Error())
	}
	if err := monitoringv1.AddToScheme(scheme.Scheme); err != nil {
		fail(err.Error())
	}
	e := &Env{env: &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, extraCRDDirs...),
		ErrorIfCRDPathMissing: true,
	}}
	cfg, err := e.env.Start()
	if err != nil {
		fail("starting envtest: " + err.Error())
	}
	e.Config = cfg
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		fail(err.Error())
	}
	if e.dir, err = os.MkdirTemp("", "testenv-"); err != nil {
		fail(err.Error())
	}
	return e
}

// RunComponent starts a Kubernetes component from KUBEBUILDER_ASSETS
// (kube-controller-manager, kube-scheduler) against the API server as a
// cluster admin, so tests exercise the real garbage collector, StatefulSet
// controller and scheduler rather than imitations of them.
func (e *Env) RunComponent(name string, args ...string) {
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), name)
	if _, err := os.Stat(bin); err != nil {
		fail(fmt.Sprintf("%s is missing from KUBEBUILDER_ASSETS: run `make envtest-assets`", name))
	}
	path := e.Kubeconfig(name)
	logFile := e.LogFile(name)
	cmd := exec.Command(bin, append([]string{"--kubeconfig=" + path, "--leader-elect=false", "--v=1"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		fail(fmt.Sprintf("starting %s: %v", name, err))
	}
	e.processes = append(e.processes, cmd)
}

// UserConfig is a rest.Config for a user in no group: it may do only what
// RBAC bindings grant it, as a ServiceAccount in a cluster.
func (e *Env) UserConfig(name string) *rest.Config {
	user, err := e.env.ControlPlane.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		fail(err.Error())
	}
	return user.Config()
}

// Kubeconfig writes a kubeconfig file of a cluster admin called name into
// LogDir and returns its path, for a command that takes --kubeconfig as a
// user's does.
func (e *Env) Kubeconfig(name string) string {
	return e.KubeconfigOf(name, "system:masters")
}

// KubeconfigOf is Kubeconfig for a user in groups, who may do what RBAC
// grants them and their groups, and nothing more.
func (e *Env) KubeconfigOf(name string, groups ...string) string {
	user, err := e.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		fail(err.Error())
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		fail(err.Error())
	}
	path := filepath.Join(e.dir, name+".kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		fail(err.Error())
	}
	return path
}

// InstallCRDs installs CRD files into the running API server and waits until they are served.
func (e *Env) InstallCRDs(paths ...string) error {
	_, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
	return err
}

// PrometheusOperatorCRD is the path of one Prometheus Operator CRD file
// (podmonitors, servicemonitors, prometheusrules) fetched by
// hack/prometheus-operator-crds.sh, which `make test` runs.
func PrometheusOperatorCRD(t *testing.T, plural string) string {
	t.Helper()
	dir := os.Getenv("PROMETHEUS_OPERATOR_CRDS")
	if dir == "" {
		t.Fatal("PROMETHEUS_OPERATOR_CRDS is not set: run the tests with `make test`, which fetches the Prometheus Operator CRDs")
	}
	return filepath.Join(dir, "monitoring.coreos.com_"+plural+".yaml")
}

// LogFile creates a log file in LogDir.
func (e *Env) LogFile(name string) *os.File {
	f, err := os.Create(filepath.Join(e.dir, name+".log"))
	if err != nil {
		fail(err.Error())
	}
	return f
}

// LogDir holds the components' logs, kept when a test fails.
func (e *Env) LogDir() string { return e.dir }

// Stop ends the components and the API server. The logs stay when keepLogs is set.
func (e *Env) Stop(keepLogs bool) {
	for _, p := range e.processes {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
	_ = e.env.Stop()
	if keepLogs {
		println("component logs kept in " + e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

func fail(msg string) {
	println(msg)
	os.Exit(1)
}
