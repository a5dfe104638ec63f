//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// clusterReady checks that the cluster is healthy and serves every slot
// over shards shards, each with a primary and its replica linked.
func clusterReady(shards int) func(*v1alpha1.RedisPersistence) error {
	return func(rp *v1alpha1.RedisPersistence) error {
		for _, c := range []string{v1alpha1.ConditionClusterHealthy, v1alpha1.ConditionSlotsCovered, v1alpha1.ConditionReady} {
			if err := hasCondition(c, metav1.ConditionTrue, "")(rp); err != nil {
				return err
			}
		}
		if len(rp.Status.Shards) != shards {
			return fmt.Errorf("status.shards has %d shards, want %d", len(rp.Status.Shards), shards)
		}
		perShard := 1 + int(ptr.Deref(rp.Spec.Cluster.ReplicasPerShard, 1))
		for _, s := range rp.Status.Shards {
			if len(s.Servers) != perShard || slices.ContainsFunc(s.Servers, func(r v1alpha1.ReplicaStatus) bool { return !r.LinkUp }) {
				return fmt.Errorf("shard %d: servers %+v, want %d linked", s.Index, s.Servers, perShard)
			}
		}
		return nil
	}
}

// clusterScript is one valkey-cli command per key, keys first to first+n-1;
// every fourth key expires in an hour.
func clusterScript(first, n int) string {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		if i%4 == 0 {
			fmt.Fprintf(&b, "SET key:%d value:%d EX 3600\n", i, i)
		} else {
			fmt.Fprintf(&b, "SET key:%d value:%d\n", i, i)
		}
	}
	return b.String()
}

// checkClusterKeys reads keys first..first+n-1 through a cluster client in pod
// and fails the test for any that is missing, wrong, or lost its TTL.
func checkClusterKeys(t *testing.T, pod string, first, n int) {
	t.Helper()
	var script strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&script, "GET key:%d\n", i)
		if i%4 == 0 {
			fmt.Fprintf(&script, "TTL key:%d\n", i)
		}
	}
	lines := cliReplies(podExec(t, pod, script.String(), "valkey-cli", "-c"))
	j := 0
	for i := first; i < first+n; i++ {
		if j >= len(lines) || lines[j] != fmt.Sprintf("value:%d", i) {
			t.Fatalf("key:%d reads %q", i, lineAt(lines, j))
		}
		j++
		if i%4 == 0 {
			if ttl := lineAt(lines, j); ttl == "-1" || ttl == "-2" || strings.HasPrefix(ttl, "(") || ttl == "" {
				t.Fatalf("key:%d has TTL %q, want about 3600", i, ttl)
			}
			j++
		}
	}
}

// cliReplies are the replies valkey-cli -c printed, one per command: the
// lines it prints when a node redirects it are left out.
func cliReplies(out string) []string {
	var replies []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "-> Redirected to slot") {
			replies = append(replies, line)
		}
	}
	return replies
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<no reply>"
}

// TestShardedClusterFailsOverAndScales: a uring durable cluster of 3 shards
// of 2 servers whose writes wait for a replica's fsync (uring.ackReplicas:
// 1) forms by itself on the one node. A cluster client (valkey-cli -c in a
// server pod, redirected by the nodes' announced DNS names) writes 20 000
// keys, a quarter with a TTL. One shard's primary is killed (its pod deleted
// without grace, the node cordoned so that it stays away): its replica
// takes over and the operator reports it in status.shards; uncordoned, the
// killed server comes back on its volume as the new primary's replica, and
// every acknowledged key is there with its TTL (the new primary shows
// nothing before a replica has it: uring.ackReplicas). Then,
// while a second client writes without pause, the cluster grows to 4 shards
// and back to 3: the fourth shard gets its share of the slots and gives it
// back, its StatefulSet goes, the writer gets no error (redirects are
// followed) and every key it was acknowledged is there.
func TestShardedClusterFailsOverAndScales(t *testing.T) {
	const name = "sharded"
	createAckedShards(t, name, 1)
	start := time.Now()
	rp := waitFor(t, name, 8*time.Minute, clusterReady(3))
	t.Logf("3 shards of 2 servers formed and ready %s after the RedisPersistence was created", time.Since(start).Round(time.Second))

	const keys = 20000
	clientPod := name + "-s0-1"
	out := podExec(t, clientPod, clusterScript(0, keys), "valkey-cli", "-c")
	if acked := strings.Count(out, "OK"); acked != keys {
		t.Fatalf("%d of %d SETs acknowledged: %.300q", acked, keys, out)
	}

	// Shard 1's primary is lost: its process killed and, the node cordoned,
	// its pod not back for a while (a server back within
	// cluster-node-timeout keeps its role).
	victim := rp.Status.Shards[1].Primary
	lost := getPod(t, victim)
	cordon(t, lost.Spec.NodeName, true)
	defer cordon(t, lost.Spec.NodeName, false)
	if err := k8s.Delete(context.Background(), lost, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	rp = waitFor(t, name, 3*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if p := rp.Status.Shards[1].Primary; p == "" || p == victim {
			return fmt.Errorf("shard 1's primary is %q", p)
		}
		return nil
	})
	t.Logf("%s took over shard 1 %s after %s was killed", rp.Status.Shards[1].Primary, time.Since(start).Round(time.Second), victim)
	// With ackReplicas: 1 the new primary shows nothing that is on its disk
	// alone: its replies wait until a replica has the data again, the
	// killed server back (uncordoned) on its volume.
	cordon(t, lost.Spec.NodeName, false)
	rp = waitFor(t, name, 4*time.Minute, clusterReady(3))
	if s := rp.Status.Shards[1]; s.Primary == victim || s.Servers[0].Pod != victim || s.Servers[0].Role != v1alpha1.RoleReplica {
		t.Fatalf("shard 1 after the failover: %+v, want %s back as the replica", s, victim)
	}
	// The pods' role labels follow the cluster.
	for pod, role := range map[string]v1alpha1.ServerRole{rp.Status.Shards[1].Primary: v1alpha1.RolePrimary, victim: v1alpha1.RoleReplica} {
		if got := getPod(t, pod).Labels["uringredis.io/role"]; got != string(role) {
			t.Errorf("pod %s is labelled role %q, want %s", pod, got, role)
		}
	}
	checkClusterKeys(t, clientPod, 0, keys)
	t.Logf("all %d acknowledged keys read back, with their TTLs, %s after %s was killed", keys, time.Since(start).Round(time.Second), victim)
	restartEveryPod(t, name, 3)
	checkClusterKeys(t, clientPod, 0, keys)
	if ciForm(t) {
		return
	}

	// A writer that does not stop while the shards change.
	stop := "/run/redis/stop-writer"
	writer := exec.Command(kubectl[0], append(append([]string{}, kubectl[1:]...), "-n", namespace, "exec", "-i", clientPod, "-c", "redis", "--",
		"sh", "-c", fmt.Sprintf(`i=%d; while [ ! -e %s ]; do echo "SET key:$i value:$i"; i=$((i+1)); done | valkey-cli -c`, keys, stop))...)
	var writes, writeErrs bytes.Buffer
	writer.Stdout, writer.Stderr = &writes, &writeErrs
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Process.Kill() }()

	updateRP(t, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Cluster.Shards = 4 })
	start = time.Now()
	rp = waitFor(t, name, 6*time.Minute, clusterReady(4))
	t.Logf("4 shards serve even shares %s after spec.cluster.shards was raised", time.Since(start).Round(time.Second))
	if n := rp.Status.Shards[3].SlotCount; n < 4095 || n > 4096 {
		t.Errorf("shard 3 serves %d slots, want 4096", n)
	}

	updateRP(t, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Cluster.Shards = 3 })
	start = time.Now()
	waitFor(t, name, 6*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name + "-s3"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the StatefulSet %s-s3 is still there (%w)", name, err)
		}
		return clusterReady(3)(rp)
	})
	t.Logf("back to 3 shards, the fourth removed, %s after spec.cluster.shards was lowered", time.Since(start).Round(time.Second))

	podExec(t, clientPod, "", "touch", stop)
	if err := writer.Wait(); err != nil {
		t.Fatalf("the writer: %v\n%s", err, writeErrs.String())
	}
	replies := cliReplies(writes.String())
	for i, r := range replies {
		if r != "OK" {
			t.Fatalf("write %d of %d through the scaling got %q", i+1, len(replies), r)
		}
	}
	t.Logf("%d writes through 3 -> 4 -> 3 shards, all acknowledged", len(replies))
	checkClusterKeys(t, clientPod, 0, keys)
	var script strings.Builder
	for i := keys; i < keys+len(replies); i++ {
		fmt.Fprintf(&script, "GET key:%d\n", i)
	}
	got := cliReplies(podExec(t, clientPod, script.String(), "valkey-cli", "-c"))
	for i := range replies {
		if lineAt(got, i) != fmt.Sprintf("value:%d", keys+i) {
			t.Fatalf("key:%d, acknowledged during the scaling, reads %q", keys+i, lineAt(got, i))
		}
	}
}

// restartEveryPod deletes every server pod of the sharded instance name at
// once, as a node reboot or an eviction of the namespace does: they come
// back on their volumes with new IPs, which none of them knows the others
// by, and the operator introduces them again. It waits until the instance
// reports the cluster ready again, and logs how long that took.
func restartEveryPod(t *testing.T, name string, shards int) {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": "redis", "app.kubernetes.io/instance": name}); err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	deleted := metav1.Now()
	for i := range pods.Items {
		pod := &pods.Items[i]
		if _, ok := pod.Labels["uringredis.io/shard"]; !ok {
			continue
		}
		old[string(pod.UID)] = true
		if err := k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	if len(old) != 2*shards {
		t.Fatalf("deleted %d server pods, want %d", len(old), 2*shards)
	}
	waitFor(t, name, 3*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		for _, s := range rp.Status.Shards {
			for _, srv := range s.Servers {
				pod := &corev1.Pod{}
				if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: srv.Pod}, pod); err != nil {
					return err
				}
				if old[string(pod.UID)] {
					return fmt.Errorf("pod %s is not replaced yet", srv.Pod)
				}
			}
		}
		if c := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionClusterHealthy); c == nil || c.LastTransitionTime.Before(&deleted) {
			return fmt.Errorf("ClusterHealthy has not changed since the pods were deleted: %+v", c)
		}
		return clusterReady(shards)(rp)
	})
	t.Logf("every pod deleted at once: the cluster is ready again, on new IPs, %s later", time.Since(deleted.Time).Round(time.Second))
}

// cordon marks node unschedulable, or schedulable again.
func cordon(t *testing.T, node string, unschedulable bool) {
	t.Helper()
	n := &corev1.Node{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = unschedulable
	if err := k8s.Patch(context.Background(), n, patch); err != nil {
		t.Fatal(err)
	}
}

// createAckedShards creates name, a uring durable cluster of 3 shards of
// 1 + replicas servers whose writes wait for a replica's fsync
// (uring.ackReplicas: 1), and deletes the claims of up to 4 shards when the
// test passed.
func createAckedShards(t *testing.T, name string, replicas int32) {
	t.Helper()
	create(t, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, AckReplicas: 1},
		Cluster: &v1alpha1.ClusterSpec{Shards: 3, ReplicasPerShard: ptr.To(replicas)},
	})
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		for i := range 4 {
			for j := range 1 + replicas {
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%s-s%d-%d", name, i, j), Namespace: namespace}}
				_ = k8s.Delete(context.Background(), pvc)
			}
		}
	})
}
