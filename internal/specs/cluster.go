package specs

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// A sharded instance (spec.cluster) is a Valkey Cluster: one StatefulSet per
// shard, <name>-s<i>, of 1 + replicasPerShard servers, every pod a cluster
// node with the instance's persistence mode, its nodes.conf on its own
// volume. The StatefulSets only run the nodes: which node is a primary is
// the cluster's to decide (it fails over by itself), and which slots a shard
// serves is the operator's, through the cluster's own commands
// (internal/cluster), never through the pod template.
const (
	// ClusterBusPort is the port the nodes gossip and fail over on.
	ClusterBusPort = 16379
	// LabelShard on a sharded instance's pods and StatefulSets is the index
	// of the shard they belong to.
	LabelShard = "uringredis.io/shard"
	// clusterNodeTimeout is cluster-node-timeout: how long a node may be
	// unreachable before the others count it failed and its replica takes
	// over (a few seconds more). Valkey's default, 15 s, is tuned for
	// machines that take long to come back; a pod that restarts within 5 s
	// (a crash, a rolled template) keeps its role.
	clusterNodeTimeout = 5000
	// ClusterConfigFile is the node's identity and view of the cluster,
	// relative to the data directory: on the volume, so that a restarted
	// node rejoins as itself.
	ClusterConfigFile = "nodes.conf"
)

// Sharded reports whether rp is a Valkey Cluster.
func Sharded(rp *v1alpha1.RedisPersistence) bool { return rp.Spec.Cluster != nil }

// Shards is spec.cluster.shards, 0 without spec.cluster.
func Shards(rp *v1alpha1.RedisPersistence) int {
	if !Sharded(rp) {
		return 0
	}
	return int(rp.Spec.Cluster.Shards)
}

// ServersPerShard is a shard's primary and its replicas.
func ServersPerShard(rp *v1alpha1.RedisPersistence) int32 {
	return 1 + ptr.Deref(rp.Spec.Cluster.ReplicasPerShard, 1)
}

// Servers is how many servers rp runs, Sentinels aside.
func Servers(rp *v1alpha1.RedisPersistence) int32 {
	if Sharded(rp) {
		return int32(Shards(rp)) * ServersPerShard(rp)
	}
	return ReplicasOf(rp)
}

// ShardName names shard i's StatefulSet, and prefixes its pods' names.
func ShardName(rp *v1alpha1.RedisPersistence, shard int) string {
	return fmt.Sprintf("%s-s%d", rp.Name, shard)
}

// FirstPodName is the pod of rp's first server: ordinal 0 of its
// StatefulSet, or of shard 0's.
func FirstPodName(rp *v1alpha1.RedisPersistence) string {
	if Sharded(rp) {
		return ShardName(rp, 0) + "-0"
	}
	return rp.Name + "-0"
}

// ShardSelectorLabels select shard i's pods.
func ShardSelectorLabels(rp *v1alpha1.RedisPersistence, shard int) map[string]string {
	labels := SelectorLabels(rp)
	labels[LabelShard] = strconv.Itoa(shard)
	return labels
}

// ShardStatefulSet runs shard i's servers. Its pods are kept apart from each
// other by in.AntiAffinity (a shard's replicas must not share its primary's
// node); pods of different shards may share nodes.
func ShardStatefulSet(rp *v1alpha1.RedisPersistence, opts Options, in PodInputs, shard int) *appsv1.StatefulSet {
	template := PodTemplate(rp, opts, in)
	template.Labels[LabelShard] = strconv.Itoa(shard)
	if in.AntiAffinity != "" {
		if template.Spec.Affinity == nil {
			template.Spec.Affinity = &corev1.Affinity{}
		}
		template.Spec.Affinity.PodAntiAffinity = spreadOverNodes(ShardSelectorLabels(rp, shard), in.AntiAffinity)
	}
	sts := statefulSet(rp, opts, in, ShardName(rp, shard), ServersPerShard(rp), ShardSelectorLabels(rp, shard), template)
	sts.Labels[LabelShard] = strconv.Itoa(shard)
	return sts
}

// clusterConfig is the part of redis.conf that makes a server a cluster
// node. Every node announces its pod's DNS name (set on the command line,
// withCluster), and clients are sent to it by that name, which survives the
// pod's restart on another IP; the nodes themselves connect by IP (Valkey
// never resolves the announced name to reach a node) and learn a restarted
// node's new one from its first ping, or, when every pod restarted at once
// and none reaches another, from the operator (cluster.PlanIntroductions).
func clusterConfig(rp *v1alpha1.RedisPersistence) []string {
	if !Sharded(rp) {
		return nil
	}
	lines := []string{
		"cluster-enabled yes",
		"cluster-config-file " + ClusterConfigFile,
		fmt.Sprintf("cluster-port %d", ClusterBusPort),
		fmt.Sprintf("cluster-node-timeout %d", clusterNodeTimeout),
		"cluster-preferred-endpoint-type hostname",
		// The operator keeps every shard at replicasPerShard replicas; the
		// cluster moving a replica to another shard would leave this one
		// short and the StatefulSets no longer saying which shard a pod is.
		"cluster-allow-replica-migration no",
	}
	if TLSEnabled(rp) {
		// The bus and MIGRATE between nodes speak TLS too, each node
		// presenting the instance's certificate (TLSServerConfig).
		lines = append(lines, "tls-cluster yes")
	}
	return lines
}

// withCluster makes the server a cluster node that announces its pod's DNS
// name and name, with the bus port open.
func withCluster(rp *v1alpha1.RedisPersistence, _ Options, _ PodInputs, template *corev1.PodTemplateSpec) {
	if !Sharded(rp) {
		return
	}
	redis := containerOf(&template.Spec, ContainerRedis)
	redis.Env = append(redis.Env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
	}})
	// The kubelet expands $(POD_NAME) in the command.
	redis.Command = append(redis.Command,
		"--cluster-announce-hostname", "$(POD_NAME)."+HeadlessDomain(rp),
		"--cluster-announce-human-nodename", "$(POD_NAME)")
	redis.Ports = append(redis.Ports, corev1.ContainerPort{Name: "cluster-bus", ContainerPort: ClusterBusPort, Protocol: corev1.ProtocolTCP})
}

// ShardPodDisruptionBudgets let a drain take one server of each shard at a
// time: a shard keeps a server, and at most one failover per shard is in
// flight.
func ShardPodDisruptionBudgets(rp *v1alpha1.RedisPersistence) []*policyv1.PodDisruptionBudget {
	var pdbs []*policyv1.PodDisruptionBudget
	for i := range Shards(rp) {
		pdbs = append(pdbs, podDisruptionBudget(ObjectMeta(rp, ShardName(rp, i)), ShardSelectorLabels(rp, i)))
	}
	return pdbs
}
