//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestNodeLost: on the kind cluster's three workers, a three-server uring
// durable instance whose replies wait for one replica's fsync
// (uring.ackReplicas: 1) runs one server per node (podAntiAffinity
// Required). The primary's whole node stops, its kubelet and disks with it
// (its container, stopped as a machine would be powered off): the Sentinels
// promote a replica, the Service <name> selects it, and every acknowledged key
// is there. The node comes back, and its server rejoins as a replica holding
// them too.
func TestNodeLost(t *testing.T) {
	docker := os.Getenv("E2E_NODE_DOCKER")
	if docker == "" {
		t.Skip("losing a node needs the multi-node kind cluster (E2E_CLUSTER=kind, which sets E2E_NODE_DOCKER): " +
			"the offline cluster's one node is the machine the test runs on")
	}
	const name = "nodelost"
	create(t, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, AckReplicas: 1}, Replicas: 3,
	})
	rp := waitFor(t, name, 6*time.Minute, hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating"))
	if rp.Status.PodAntiAffinity != v1alpha1.AntiAffinityRequired {
		t.Errorf("status.podAntiAffinity %q with three workers for three servers, want Required", rp.Status.PodAntiAffinity)
	}
	nodes := map[string]string{}
	for i := range 3 {
		pod := getPod(t, fmt.Sprintf("%s-%d", name, i))
		nodes[pod.Spec.NodeName] = pod.Name
	}
	if len(nodes) != 3 {
		t.Fatalf("the three servers run on %d nodes: %v", len(nodes), nodes)
	}
	oldPrimary := rp.Status.Primary
	waitServiceSelects(t, name, oldPrimary)

	var script strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&script, "SET key:%d value:%d\n", i, i)
	}
	if out := podExec(t, oldPrimary, script.String(), "valkey-cli"); strings.Count(out, "OK") != 2000 {
		t.Fatalf("%d of 2000 SETs acknowledged: %.200q", strings.Count(out, "OK"), out)
	}

	node := getPod(t, oldPrimary).Spec.NodeName
	dockerCmd := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("docker", append([]string{"-H", docker}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("docker %v: %v: %s", args, err, out)
		}
	}
	dockerCmd("stop", node)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = exec.Command("docker", "-H", docker, "start", node).Run()
		}
	})
	start := time.Now()
	rp = waitFor(t, name, 5*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if p := rp.Status.Primary; p == "" || p == oldPrimary {
			return fmt.Errorf("status.primary %q", p)
		}
		return nil
	})
	primary := rp.Status.Primary
	t.Logf("%s promoted %s after %s's node %s stopped", primary, time.Since(start).Round(time.Second), oldPrimary, node)
	waitServiceSelects(t, name, primary)
	if n := podExec(t, primary, "", "valkey-cli", "DBSIZE"); n != "2000" {
		t.Fatalf("the promoted %s holds %s keys, want 2000", primary, n)
	}
	if v := podExec(t, primary, "", "valkey-cli", "-h", name, "GET", "key:1999"); v != "value:1999" {
		t.Errorf("key:1999 through the Service is %q", v)
	}

	// The node is back: its server, on its own local volume, follows the new primary.
	dockerCmd("start", node)
	restarted = true
	start = time.Now()
	waitFor(t, name, 6*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
		if err := hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating")(rp); err != nil {
			return err
		}
		if pod := getPod(t, oldPrimary); pod.Labels["uringredis.io/role"] != "replica" {
			return fmt.Errorf("%s is labelled %q", oldPrimary, pod.Labels["uringredis.io/role"])
		}
		return nil
	})
	t.Logf("%s rejoined as a replica %s after its node came back", oldPrimary, time.Since(start).Round(time.Second))
	if n := podExec(t, oldPrimary, "", "valkey-cli", "DBSIZE"); n != "2000" {
		t.Errorf("%s, back, holds %s keys, want 2000", oldPrimary, n)
	}
}
