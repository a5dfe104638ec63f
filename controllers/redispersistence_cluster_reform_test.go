package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// Every pod of a sharded instance restarted at once (a node reboot, an
// eviction of the namespace): every server comes back on its own volume,
// node ID and slots kept in nodes.conf, but on a new address, so none can
// reach the others at the addresses nodes.conf records. The operator, which
// reads the pods' new addresses, introduces the nodes to each other again,
// and the cluster serves every key it held.
func TestClusterReformsAfterEveryPodRestarts(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name, shards, perShard, keys = "reform", 3, 2, 200
	configs, servers := runAOFCluster(t, ns, name, shards, perShard)
	waitClusterHealthy(t, ns, name, shards)
	password := instancePassword(t, ns, name)
	writer := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{servers[name+"-s0-0"].Addr}, Password: password})
	for k := range keys {
		if err := writer.Set(ctx, fmt.Sprintf("key:%d", k), k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = writer.Close()

	// Every server stops; the kubelet reports every pod not ready.
	for pod, srv := range servers {
		srv.Stop(t)
		markPodNotReady(t, ns, pod)
	}
	eventually(t, 60*time.Second, func() error {
		rp := &v1alpha1.RedisPersistence{}
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		if c := findCondition(rp, v1alpha1.ConditionClusterHealthy); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("ClusterHealthy is %+v with every server stopped", c)
		}
		return nil
	})

	// They start again on their volumes, each on new ports: new addresses.
	restarted := time.Now()
	for pod, srv := range servers {
		servers[pod] = testenv.RunClusterNode(t, srv.Dir, configs[pod[:strings.LastIndex(pod, "-")]])
		serverAddrs.Store(ns+"/"+pod, servers[pod].Addr)
		actAsKubelet(t, ns, pod, "ext4")
	}
	// Re-formed: every node knows every other at its new address, none
	// failing, and sees the cluster ok. (cluster_state alone says little:
	// a node that reaches no other reports ok until it counts itself in a
	// minority, node-timeout later.)
	eventually(t, 150*time.Second, func() error {
		for pod, srv := range servers {
			if err := knowsEveryNode(ctx, srv.Addr, password, servers); err != nil {
				return fmt.Errorf("%s: %w", pod, err)
			}
		}
		return nil
	})
	serving := time.Since(restarted)
	reader := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{servers[name+"-s1-0"].Addr}, Password: password, MaxRedirects: 16})
	defer func() { _ = reader.Close() }()
	eventually(t, 60*time.Second, func() error {
		for k := range keys {
			got, err := reader.Get(ctx, fmt.Sprintf("key:%d", k)).Int()
			if err != nil {
				return fmt.Errorf("key:%d: %w", k, err)
			}
			if got != k {
				return fmt.Errorf("key:%d is %d, want %d", k, got, k)
			}
		}
		return nil
	})
	rp := waitClusterHealthy(t, ns, name, shards)
	t.Logf("every node saw the cluster ok %s after the restart, every key read and the instance Ready %s after it",
		serving.Round(100*time.Millisecond), time.Since(restarted).Round(100*time.Millisecond))
	// The nodes came back as themselves: no slot moved, nothing formed anew.
	for i, shard := range rp.Status.Shards {
		if want := cluster.Share(i, shards); shard.Slots != want.String() {
			t.Errorf("shard %d serves %s, want %s", i, shard.Slots, want)
		}
	}
	waitEvent(t, ns, name, "ClusterReintroducing")
}

// knowsEveryNode says whether the server at addr sees the cluster ok and
// knows every server of servers at its address, none failing.
func knowsEveryNode(ctx context.Context, addr, password string, servers map[string]*testenv.Server) error {
	c := newClient(addr, password)
	defer func() { _ = c.Close() }()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("%s", firstLine(info))
	}
	text, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	nodes, err := cluster.ParseNodes(text)
	if err != nil {
		return err
	}
	for pod, srv := range servers {
		i := slices.IndexFunc(nodes, func(n cluster.Node) bool { return n.Addr == srv.Addr && !n.Failing && !n.Handshake })
		if i < 0 && srv.Addr != addr {
			return fmt.Errorf("it knows no node at %s (%s), a healthy one: %s", srv.Addr, pod, text)
		}
	}
	return nil
}

// markPodNotReady reports pod not ready, as the kubelet does once its
// server stops answering.
func markPodNotReady(t *testing.T, ns, podName string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		pod := &corev1.Pod{}
		if err := get(t, pod, ns, podName); err != nil {
			return err
		}
		for i := range pod.Status.Conditions {
			if c := &pod.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.Now()
			}
		}
		for i := range pod.Status.ContainerStatuses {
			pod.Status.ContainerStatuses[i].Ready = false
		}
		return k8s.Status().Update(context.Background(), pod)
	})
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// runAOFCluster creates name, an aof always instance of shards shards of
// perShard servers, and runs its servers as real cluster nodes, each on a
// loopback port of its own with its pod marked running; it returns each
// shard StatefulSet's rendered configuration and the servers by pod.
func runAOFCluster(t *testing.T, ns, name string, shards, perShard int) (configs map[string]string, servers map[string]*testenv.Server) {
	t.Helper()
	for i := range shards {
		for j := range perShard {
			createVolumeFor(t, ns, fmt.Sprintf("data-%s-s%d-%d", name, i, j))
		}
	}
	createRP(t, ns, name, aofClusterSpec(shards, perShard))
	return runClusterNodes(t, ns, name, shards, perShard)
}

func aofClusterSpec(shards, perShard int) v1alpha1.RedisPersistenceSpec {
	return v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways},
		Cluster: &v1alpha1.ClusterSpec{Shards: int32(shards), ReplicasPerShard: ptr.To(int32(perShard - 1))},
	}
}

// runClusterNodes runs the servers of name's shards as real cluster nodes
// (runAOFCluster), once its StatefulSets are there.
func runClusterNodes(t *testing.T, ns, name string, shards, perShard int) (configs map[string]string, servers map[string]*testenv.Server) {
	t.Helper()
	eventually(t, 30*time.Second, func() error { return get(t, &appsv1.StatefulSet{}, ns, fmt.Sprintf("%s-s%d", name, shards-1)) })
	configs, servers = map[string]string{}, map[string]*testenv.Server{}
	for i := range shards {
		sts := fmt.Sprintf("%s-s%d", name, i)
		configs[sts] = renderedConfigOf(t, ns, name, sts) + "cluster-preferred-endpoint-type ip\n"
		for j := range perShard {
			pod := fmt.Sprintf("%s-%d", sts, j)
			servers[pod] = testenv.RunClusterNode(t, t.TempDir(), configs[sts])
			serverAddrs.Store(ns+"/"+pod, servers[pod].Addr)
			actAsKubelet(t, ns, pod, "ext4")
		}
	}
	return configs, servers
}
