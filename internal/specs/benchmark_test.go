package specs_test

import (
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

func TestPersistenceMode(t *testing.T) {
	for _, tc := range []struct {
		spec v1alpha1.RedisPersistenceSpec
		want string
	}{
		{v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone}, "none"},
		{v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeRDB}, "rdb"},
		{v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF}, "aof-everysec"},
		{v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}}, "aof-always"},
		{v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}, "uring-durable"},
		{v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckFast}}, "uring-fast"},
	} {
		if got := specs.PersistenceMode(&v1alpha1.RedisPersistence{Spec: tc.spec}); got != tc.want {
			t.Errorf("persistenceMode(%+v) = %q, want %q", tc.spec, got, tc.want)
		}
	}
}

// TestBenchmarkJobGolden renders the Job of a benchmark with every option set
// twice (the builder is deterministic) and compares it with
// testdata/benchmark.job.yaml.
func TestBenchmarkJobGolden(t *testing.T) {
	rb := &v1alpha1.RedisBenchmark{
		ObjectMeta: metav1.ObjectMeta{Name: "cmp", Namespace: "ns", UID: types.UID("b-uid")},
		Spec: v1alpha1.RedisBenchmarkSpec{
			Targets: []string{"always", "durable"},
			Workload: v1alpha1.BenchmarkWorkload{
				Commands: []v1alpha1.BenchmarkCommand{"set", "get"}, Requests: 5000, Clients: 8, Pipeline: 4, ValueSize: 128, Keyspace: 1000, MixedReads: true,
			},
			Repetitions: 3,
			CrashCheck:  &v1alpha1.CrashCheckSpec{Clients: 20, WriteSeconds: 7},
		},
	}
	rp := &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Name: "durable", Namespace: "ns"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Auth: &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "pw"}}},
	}
	render := func() []byte {
		// The last repetition of the second target: the run with the crash check.
		b, err := yaml.Marshal(specs.BenchmarkJob(rb, specs.RunAt(rb, 5), rp, specs.BenchmarkOptions{Image: "uring-redis-bench:test",
			ImagePull: specs.ImagePull{Policy: corev1.PullIfNotPresent, Secrets: []string{"registry-pull"}}}))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := render()
	if second := render(); string(first) != string(second) {
		t.Fatal("two renders of the same benchmark Job differ")
	}
	compareGolden(t, filepath.Join("testdata", "benchmark.job.yaml"), first)
}

// A sharded target is benchmarked through its Service as a cluster, in
// database 0 whatever spec.benchmark.database says; a single server in its
// benchmark database.
func TestBenchmarkArgsOfAShardedTarget(t *testing.T) {
	rb := &v1alpha1.RedisBenchmark{ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: "ns"},
		Spec: v1alpha1.RedisBenchmarkSpec{Targets: []string{"one", "three"}}}
	for _, tc := range []struct {
		cluster *v1alpha1.ClusterSpec
		want    []string
		not     string
	}{
		{nil, []string{"--addr=t.ns.svc:6379", "--db=7"}, "--cluster"},
		{&v1alpha1.ClusterSpec{Shards: 3}, []string{"--addr=t.ns.svc:6379", "--db=0", "--cluster"}, "--db=7"},
	} {
		rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
			Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Cluster: tc.cluster, Benchmark: &v1alpha1.BenchmarkAccessSpec{Database: 7}}}
		args := specs.BenchmarkJob(rb, specs.RunAt(rb, 0), rp, specs.BenchmarkOptions{Image: "bench"}).Spec.Template.Spec.Containers[0].Args
		for _, w := range tc.want {
			if !slices.Contains(args, w) {
				t.Errorf("cluster %v: args %q lack %s", tc.cluster, args, w)
			}
		}
		if slices.Contains(args, tc.not) {
			t.Errorf("cluster %v: args %q hold %s", tc.cluster, args, tc.not)
		}
	}
}

// The availability writer reaches rp through its Service, in the benchmark's
// database (0 on a cluster, through a cluster client), and rp's
// NetworkPolicy admits it as one of rp's benchmark runners.
func TestSteadyWriterPod(t *testing.T) {
	for _, tc := range []struct {
		cluster *v1alpha1.ClusterSpec
		want    []string
		not     string
	}{
		{nil, []string{"--addr=t.ns.svc:6379", "--db=7", "--steady-rate=2000"}, "--cluster"},
		{&v1alpha1.ClusterSpec{Shards: 3}, []string{"--addr=t.ns.svc:6379", "--db=0", "--cluster", "--steady-rate=2000"}, "--db=7"},
	} {
		rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
			Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Cluster: tc.cluster, Benchmark: &v1alpha1.BenchmarkAccessSpec{Database: 7}}}
		pod := specs.SteadyWriterPod(rp, "writer", 2000, specs.BenchmarkOptions{Image: "bench"})
		args := pod.Spec.Containers[0].Args
		for _, w := range tc.want {
			if !slices.Contains(args, w) {
				t.Errorf("cluster %v: args %q lack %s", tc.cluster, args, w)
			}
		}
		if slices.Contains(args, tc.not) {
			t.Errorf("cluster %v: args %q hold %s", tc.cluster, args, tc.not)
		}
		admitted := false
		for _, peer := range specs.NetworkPolicy(rp, specs.NetworkPolicyOptions{Enabled: true}).Spec.Ingress[0].From {
			if peer.PodSelector != nil && peer.NamespaceSelector == nil && labels.SelectorFromSet(peer.PodSelector.MatchLabels).Matches(labels.Set(pod.Labels)) {
				admitted = true
			}
		}
		if !admitted {
			t.Errorf("cluster %v: the NetworkPolicy admits no pod labelled %v", tc.cluster, pod.Labels)
		}
	}
}
