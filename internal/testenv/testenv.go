// Package testenv starts a real kube-apiserver and etcd (envtest) with the
// project's CRDs for tests. The binaries are built from source by
// `make envtest-assets`; KUBEBUILDER_ASSETS points at them.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start runs an API server for the duration of m.Run and returns its config.
// Extra CRD directories (such as the Prometheus Operator's) are installed too.
// It exits the test binary with a message when the assets are missing, so a
// plain `go test` explains itself instead of skipping.
func Start(m *testing.M, extraCRDDirs ...string) (*rest.Config, client.Client, func()) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		println("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds kube-apiserver and fetches etcd into bin/k8s/")
		os.Exit(1)
	}
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		panic(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, extraCRDDirs...),
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		println("starting envtest: " + err.Error())
		os.Exit(1)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		panic(err)
	}
	return cfg, c, func() { _ = env.Stop() }
}

// GroupVersionKind of a RedisPersistence, for unstructured objects in tests.
var RedisPersistenceGVK = schema.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "RedisPersistence"}
