package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// clustered is a valid sharded spec with fields replaced or added.
func clustered(fields map[string]any) map[string]any {
	spec := map[string]any{"mode": "uring", "cluster": map[string]any{"shards": 3}}
	for k, v := range fields {
		spec[k] = v
	}
	return spec
}

func TestClusterSpecsRejected(t *testing.T) {
	for _, tc := range []rejection{
		{"fewer than 3 shards", clustered(map[string]any{"cluster": map[string]any{"shards": 2}}), "spec.cluster.shards: Invalid value: 2: spec.cluster.shards in body should be greater than or equal to 3"},
		{"no shards", clustered(map[string]any{"cluster": map[string]any{}}), "spec.cluster.shards: Required value"},
		{"too many replicas per shard", clustered(map[string]any{"cluster": map[string]any{"shards": 3, "replicasPerShard": 6}}), "should be less than or equal to 5"},
		{"and Sentinel", clustered(map[string]any{"sentinel": map[string]any{}}), "spec.cluster and spec.sentinel exclude each other"},
		{"and replicas", clustered(map[string]any{"replicas": 3}), "leave spec.replicas at 1"},
		{"mode none without storage", clustered(map[string]any{"mode": "none"}), "with mode none, spec.cluster needs spec.storage"},
		{"and the crash check", clustered(map[string]any{"benchmark": map[string]any{"crashCheck": true}}), "spec.benchmark.crashCheck is not supported with spec.cluster"},
		{"and a backup", clustered(map[string]any{"backup": s3(nil)["backup"]}), "backups and restores of a cluster are not supported yet"},
		{"ackReplicas above replicasPerShard", clustered(map[string]any{"cluster": map[string]any{"shards": 3, "replicasPerShard": 1},
			"uring": map[string]any{"ack": "durable", "ackReplicas": 2}}), "or with spec.cluster at most spec.cluster.replicasPerShard"},
	} {
		expectRejected(t, tc)
	}
}

// A valid cluster is accepted with its defaults; spec.cluster cannot be
// removed from it, nor added to an instance without one, but its shards
// change.
func TestClusterSpecAccepted(t *testing.T) {
	ctx := context.Background()
	u := newObject(clustered(map[string]any{"uring": map[string]any{"ack": "durable", "ackReplicas": 1}, "benchmark": map[string]any{}}))
	if err := k8s.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), rp); err != nil {
		t.Fatal(err)
	}
	if c := rp.Spec.Cluster; c == nil || c.Shards != 3 || ptr.Deref(c.ReplicasPerShard, 0) != 1 {
		t.Fatalf("spec.cluster %+v, want 3 shards of 1 replica (the default)", c)
	}
	rp.Spec.Cluster.Shards = 4
	if err := k8s.Update(ctx, rp); err != nil {
		t.Fatalf("scaling to 4 shards: %v", err)
	}
	rp.Spec.Cluster, rp.Spec.Uring = nil, nil
	if err := k8s.Update(ctx, rp); err == nil || !strings.Contains(err.Error(), "spec.cluster cannot be added or removed") {
		t.Fatalf("removing spec.cluster: %v, want a refusal", err)
	}

	single := newObject(map[string]any{"mode": "uring"})
	if err := k8s.Create(ctx, single); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(single), rp); err != nil {
		t.Fatal(err)
	}
	rp.Spec.Cluster = &v1alpha1.ClusterSpec{Shards: 3}
	if err := k8s.Update(ctx, rp); err == nil || !strings.Contains(err.Error(), "spec.cluster cannot be added or removed") {
		t.Fatalf("adding spec.cluster: %v, want a refusal", err)
	}
}
