//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestClusterScaleOut measures what sharding buys: one RedisBenchmark of SET
// against a single uring durable server and a 3-shard cluster of the same
// servers (no replicas on either), interleaved repetitions side by side. It
// prints each target's median throughput, p99 and CPU per operation, the
// cluster's per-shard spread, and the ratio. It runs with make bench-cluster,
// not in the suite: the suite's figures would be noise on a CI machine, and
// the ratio is only worth quoting from a run of its own.
func TestClusterScaleOut(t *testing.T) {
	if os.Getenv("E2E_CLUSTER_BENCH") == "" {
		t.Skip("the scale-out benchmark runs with make bench-cluster (E2E_CLUSTER_BENCH=1): several minutes of RedisBenchmarks")
	}
	const one, three = "scale-one", "scale-three"
	uring := &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}
	create(t, one, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: uring, Benchmark: &v1alpha1.BenchmarkAccessSpec{}})
	create(t, three, v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: uring, Benchmark: &v1alpha1.BenchmarkAccessSpec{},
		Cluster: &v1alpha1.ClusterSpec{Shards: 3, ReplicasPerShard: ptr.To[int32](0)}})
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		for i := range 3 {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%s-s%d-0", three, i), Namespace: namespace}}
			_ = k8s.Delete(context.Background(), pvc)
		}
	})
	waitReady(t, one)
	waitFor(t, three, 8*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		for _, c := range []string{v1alpha1.ConditionClusterHealthy, v1alpha1.ConditionSlotsCovered, v1alpha1.ConditionReady, v1alpha1.ConditionUpToDate} {
			if err := hasCondition(c, metav1.ConditionTrue, "")(rp); err != nil {
				return err
			}
		}
		return nil
	})

	requests := envInt(t, "E2E_CLUSTER_BENCH_REQUESTS", 200000)
	clients := envInt(t, "E2E_CLUSTER_BENCH_CLIENTS", 50)
	reps := envInt(t, "E2E_CLUSTER_BENCH_REPETITIONS", 3)
	rb := &v1alpha1.RedisBenchmark{
		ObjectMeta: metav1.ObjectMeta{Name: "scale-out", Namespace: namespace},
		Spec: v1alpha1.RedisBenchmarkSpec{
			Targets: []string{one, three},
			Workload: v1alpha1.BenchmarkWorkload{Commands: []v1alpha1.BenchmarkCommand{v1alpha1.CommandSet},
				Requests: int32(requests), Clients: int32(clients), Keyspace: 100000},
			Repetitions: int32(reps),
		},
	}
	if err := k8s.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rb) })
	waitBenchmarkComplete(t, rb, 30*time.Minute)

	byTarget := map[string]v1alpha1.BenchmarkResult{}
	for _, r := range rb.Status.Results {
		byTarget[r.Target] = r
	}
	single, sharded := byTarget[one], byTarget[three]
	if single.OpsPerSecond == 0 || sharded.OpsPerSecond == 0 {
		t.Fatalf("results %+v", rb.Status.Results)
	}
	if sharded.Shards != 3 || sharded.ShardOpsMinPerSecond <= 0 || single.Shards != 0 {
		t.Errorf("shards: single %d, sharded %d (%d..%d commands/s per primary)", single.Shards, sharded.Shards,
			sharded.ShardOpsMinPerSecond, sharded.ShardOpsMaxPerSecond)
	}
	// Writes per fdatasync: how many acknowledgements one disk sync carried.
	batch := func(r v1alpha1.BenchmarkResult) float64 { return float64(requests) / float64(max(r.FsyncCount, 1)) }
	for _, r := range rb.Status.Runs {
		t.Logf("run: %s repetition %d: %d ops/s, p99 %d us, %d us CPU per kop, %.1f writes per fsync",
			r.Target, r.Repetition, r.OpsPerSecond, r.P99Micros, r.CPUMicrosPerKop, batch(r))
	}
	t.Logf("scale-out, SET c=%d, %d requests, uring durable, medians of %d repetitions: 1 server %d ops/s p99 %.2f ms %.1f ms CPU/kop %.1f writes/fsync; "+
		"3 shards %d ops/s p99 %.2f ms %.1f ms CPU/kop %.1f writes/fsync (primaries %d..%d commands/s); ratio %.2fx",
		clients, requests, reps,
		single.OpsPerSecond, float64(single.P99Micros)/1000, float64(single.CPUMicrosPerKop)/1000, batch(single),
		sharded.OpsPerSecond, float64(sharded.P99Micros)/1000, float64(sharded.CPUMicrosPerKop)/1000, batch(sharded),
		sharded.ShardOpsMinPerSecond, sharded.ShardOpsMaxPerSecond, float64(sharded.OpsPerSecond)/float64(single.OpsPerSecond))
}
