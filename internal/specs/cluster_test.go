package specs_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

// renderCluster renders every object of a sharded instance that differs
// from a single server's, with each shard's servers kept apart by a required
// anti-affinity: its redis.conf, Services, NetworkPolicy, the shards'
// disruption budgets and StatefulSets.
func renderCluster(t *testing.T, spec v1alpha1.RedisPersistenceSpec) []byte {
	t.Helper()
	rp := specstest.NewRedisPersistence(spec)
	in := specs.NewPodInputs(rp, specstest.Password(rp))
	in.AntiAffinity = v1alpha1.AntiAffinityRequired
	objects := []any{
		specs.ConfigMap(rp, specs.RenderConfig(rp)),
		specs.HeadlessService(rp), specs.ClientService(rp), specs.NetworkPolicy(rp, specstest.NetworkPolicyOptions),
	}
	for _, pdb := range specs.ShardPodDisruptionBudgets(rp) {
		objects = append(objects, pdb)
	}
	for i := range specs.Shards(rp) {
		objects = append(objects, specs.ShardStatefulSet(rp, specstest.Options, in, i))
	}
	return documents(t, objects...)
}

func TestClusterGolden(t *testing.T) {
	got := renderCluster(t, specstest.ClusterSpec)
	if !bytes.Equal(got, renderCluster(t, specstest.ClusterSpec)) {
		t.Fatal("rendering the same spec twice gave different output")
	}
	compareGolden(t, filepath.Join("testdata", "cluster-uring-durable.yaml"), got)
}

// TestShardStatefulSets checks what tells the shards apart: names, sizes,
// selectors, claims and anti-affinity are each shard's own, and nothing of
// the Sentinel-driven replication is there.
func TestShardStatefulSets(t *testing.T) {
	rp := specstest.NewRedisPersistence(specstest.ClusterSpec)
	rp.Spec.Cluster.Shards, rp.Spec.Cluster.ReplicasPerShard = 4, ptr.To[int32](2)
	in := specs.NewPodInputs(rp, specstest.Password(rp))
	in.AntiAffinity = v1alpha1.AntiAffinityPreferred
	selectors := map[string]bool{}
	for i := range 4 {
		sts := specs.ShardStatefulSet(rp, specstest.Options, in, i)
		if want := rp.Name + "-s" + string(rune('0'+i)); sts.Name != want {
			t.Errorf("shard %d: StatefulSet %s, want %s", i, sts.Name, want)
		}
		if *sts.Spec.Replicas != 3 {
			t.Errorf("shard %d: %d servers, want 3 (a primary and replicasPerShard 2)", i, *sts.Spec.Replicas)
		}
		sel := sts.Spec.Selector.MatchLabels
		if sel[specs.LabelShard] == "" || selectors[sel[specs.LabelShard]] {
			t.Errorf("shard %d: selector %v does not single out the shard", i, sel)
		}
		selectors[sel[specs.LabelShard]] = true
		for k, v := range sel {
			if sts.Spec.Template.Labels[k] != v || sts.Spec.VolumeClaimTemplates[0].Labels[k] != v {
				t.Errorf("shard %d: the template or claim lacks selector label %s=%s", i, k, v)
			}
		}
		terms := sts.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		if len(terms) != 1 || terms[0].PodAffinityTerm.LabelSelector.MatchLabels[specs.LabelShard] != sel[specs.LabelShard] {
			t.Errorf("shard %d: anti-affinity %v, want the shard's own servers kept apart", i, terms)
		}
		redis := specstest.ContainerNamed(t, sts, specs.ContainerRedis)
		if cmd := strings.Join(redis.Command, " "); !strings.Contains(cmd, "--cluster-announce-hostname $(POD_NAME)."+specs.HeadlessDomain(rp)) || strings.Contains(cmd, "server-start") {
			t.Errorf("shard %d: server command %q", i, cmd)
		}
	}
	conf := specs.RenderConfig(rp)
	for _, line := range []string{"cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-port 16379", "cluster-allow-replica-migration no"} {
		if !strings.Contains(conf, "\n"+line+"\n") {
			t.Errorf("redis.conf lacks %q:\n%s", line, conf)
		}
	}
	single := specstest.NewRedisPersistence(specstest.GoldenCases["uring-durable"])
	if conf := specs.RenderConfig(single); strings.Contains(conf, "cluster-") {
		t.Errorf("a single server's redis.conf has cluster options:\n%s", conf)
	}
}
