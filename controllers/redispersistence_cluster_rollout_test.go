package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
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
	var pods []string
	for pod := range servers {
		pods = append(pods, pod)
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
	playRollout(t, ns, pods, 6*time.Minute, func(podName string) {
		if role := nodeRole(ctx, servers[podName].Addr, password); role != "slave" {
			primariesRestarted = append(primariesRestarted, podName+" ("+role+")")
		}
		servers[podName].Stop(t)
	}, func(podName string) bool {
		sts := podName[:strings.LastIndex(podName, "-")]
		servers[podName] = testenv.RunClusterNode(t, servers[podName].Dir, configs[sts])
		serverAddrs.Store(ns+"/"+podName, servers[podName].Addr)
		actAsKubelet(t, ns, podName, "ext4")
		return true
	})
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

// A mode change of a sharded instance whose shards have no replica (aof
// always to rdb, 3 shards of 1 server) goes through the same hold as a
// single server's: the new configuration is applied only once every server
// has its keys in a snapshot, so the servers restarted in rdb mode load
// every key. Without the hold they would start from no snapshot at all.
func TestClusterModeChangeCarriesTheData(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name, shards = "shmode", 3
	_, servers := runAOFCluster(t, ns, name, shards, 1)
	waitClusterHealthy(t, ns, name, shards)
	password := instancePassword(t, ns, name)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{servers[name+"-s0-0"].Addr}, Password: password, MaxRedirects: 16})
	defer func() { _ = c.Close() }()
	const keys = 300
	for i := range keys {
		if err := c.Set(ctx, fmt.Sprintf("mode:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Mode, rp.Spec.AOF = v1alpha1.ModeRDB, nil
		rp.Spec.RDB = &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 3600, Changes: 1}}}
	})
	eventually(t, 60*time.Second, func() error {
		cm := &corev1.ConfigMap{}
		if err := get(t, cm, ns, name+"-config"); err != nil {
			return err
		}
		if mode := cm.Annotations[specs.AnnotationMode]; mode != string(v1alpha1.ModeRDB) {
			return fmt.Errorf("the ConfigMap's mode is %q", mode)
		}
		return nil
	})
	pods := slices.Sorted(maps.Keys(servers))
	playRollout(t, ns, pods, 3*time.Minute, func(podName string) {
		servers[podName].Stop(t)
	}, func(podName string) bool {
		sts := podName[:strings.LastIndex(podName, "-")]
		config := renderedConfigOf(t, ns, name, sts) + "cluster-preferred-endpoint-type ip\n"
		if !strings.Contains(config, "appendonly no") {
			t.Fatalf("%s restarts without the rdb configuration:\n%s", podName, config)
		}
		servers[podName] = testenv.RunClusterNode(t, servers[podName].Dir, config)
		serverAddrs.Store(ns+"/"+podName, servers[podName].Addr)
		actAsKubelet(t, ns, podName, "ext4")
		return true
	})
	waitClusterHealthy(t, ns, name, shards)

	reader := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{servers[name+"-s1-0"].Addr}, Password: password, MaxRedirects: 16})
	defer func() { _ = reader.Close() }()
	missing := 0
	for i := range keys {
		if n, err := reader.Exists(ctx, fmt.Sprintf("mode:%d", i)).Result(); err != nil || n != 1 {
			missing++
		}
	}
	if missing != 0 {
		t.Errorf("%d of %d keys are missing once every server restarted in rdb mode", missing, keys)
	}
	if !hasEvent(t, ns, "SwitchedPersistence", "mode rdb") {
		t.Error("no SwitchedPersistence event says the servers have their data in the files of mode rdb")
	}
}
