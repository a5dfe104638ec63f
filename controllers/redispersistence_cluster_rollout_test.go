package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// A sharded instance (3 shards of 2 real cluster nodes, aof always) takes a
// change that restarts its servers while a cluster client writes: each
// shard's StatefulSet rolls one server at a time, and no server is
// restarted while it is a primary: before a shard's primary goes, its
// replica, restarted first, takes over (CLUSTER FAILOVER). Every
// acknowledged write is there at the end.
func TestShardRollsWithFailover(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name, shards, perShard = "shroll", 3, 2
	configs, servers := runAOFCluster(t, ns, name, shards, perShard)
	uids := map[string]types.UID{}
	var pods []string
	for pod := range servers {
		pods = append(pods, pod)
		uids[pod] = podUIDs(t, ns, pod)[pod]
	}
	slices.Sort(pods)
	waitClusterHealthy(t, ns, name, shards)
	password := instancePassword(t, ns, name)

	// A cluster client writes one key at a time, following redirects.
	writerCtx, stopWriter := context.WithCancel(ctx)
	var mu sync.Mutex
	var acknowledged []string
	failed, longestGap := 0, time.Duration(0)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{servers[name+"-s0-0"].Addr}, Password: password, MaxRetries: -1, MaxRedirects: 8})
		defer func() { _ = c.Close() }()
		last := time.Now()
		for i := 0; writerCtx.Err() == nil; i++ {
			key := fmt.Sprintf("roll:%d", i)
			err := c.Set(writerCtx, key, i, 0).Err()
			mu.Lock()
			if err == nil {
				acknowledged = append(acknowledged, key)
				longestGap = max(longestGap, time.Since(last))
				last = time.Now()
			} else if writerCtx.Err() == nil {
				failed++
			}
			mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	defer func() { stopWriter(); wg.Wait() }()
	time.Sleep(time.Second)

	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}
	})

	// The kubelet's part: a pod the StatefulSet controller deletes stops
	// (asked first whether it is a primary), its replacement starts on the
	// same data directory, on a new port.
	var primariesRestarted []string
	restarted := map[string]bool{}
	deadline := time.Now().Add(6 * time.Minute)
	for len(restarted) < len(pods) {
		if time.Now().After(deadline) {
			t.Fatalf("the rollout did not end within 6 minutes: restarted %v", restarted)
		}
		for _, podName := range pods {
			pod := &corev1.Pod{}
			if err := get(t, pod, ns, podName); err != nil {
				continue // gone: the StatefulSet controller makes it again
			}
			switch {
			case pod.UID == uids[podName] && !pod.DeletionTimestamp.IsZero():
				if role := nodeRole(ctx, servers[podName].Addr, password); role != "slave" {
					primariesRestarted = append(primariesRestarted, podName+" ("+role+")")
				}
				servers[podName].Stop(t)
				if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
			case pod.UID != uids[podName] && !restarted[podName]:
				restarted[podName] = true
				sts := podName[:strings.LastIndex(podName, "-")]
				servers[podName] = testenv.RunClusterNode(t, servers[podName].Dir, configs[sts])
				serverAddrs.Store(ns+"/"+podName, servers[podName].Addr)
				actAsKubelet(t, ns, podName, "ext4")
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitClusterHealthy(t, ns, name, shards)
	time.Sleep(2 * time.Second)
	stopWriter()
	wg.Wait()

	reader := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{servers[name+"-s1-0"].Addr}, Password: password, MaxRedirects: 16})
	defer func() { _ = reader.Close() }()
	lost := 0
	for _, key := range acknowledged {
		if n, err := reader.Exists(ctx, key).Result(); err != nil || n != 1 {
			lost++
		}
	}
	t.Logf("through the rollout of 3 shards: %d writes acknowledged, %d failed, longest gap between two acknowledged %s",
		len(acknowledged), failed, longestGap.Round(time.Millisecond))
	if len(primariesRestarted) > 0 {
		t.Errorf("servers restarted while primaries: %v", primariesRestarted)
	}
	if lost != 0 || len(acknowledged) == 0 {
		t.Errorf("%d of %d acknowledged writes are not in the cluster", lost, len(acknowledged))
	}
	if !hasEvent(t, ns, "SwitchedOver", "took over shard") {
		t.Error("no SwitchedOver event says a replica took over a shard")
	}
}

// nodeRole is the first word of ROLE from the server at addr: master or
// slave ("" when it does not answer).
func nodeRole(ctx context.Context, addr, password string) string {
	c := newClient(addr, password)
	defer func() { _ = c.Close() }()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 {
		return ""
	}
	s, _ := role[0].(string)
	return s
}
