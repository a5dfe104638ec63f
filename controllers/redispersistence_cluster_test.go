package controllers

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/cluster"
	"github.com/uring-redis/uring-redis-operator/internal/dashboards"
	"github.com/uring-redis/uring-redis-operator/internal/promtest"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

// shardedName names the sharded instance of TestClusterFormsAndScales.
const shardedName = "shard"

// runShard runs shard i's two servers of TestClusterFormsAndScales.
func runShard(t *testing.T, ns string, shard int) {
	t.Helper()
	runShardOf(t, ns, shardedName, shard, 2, func(config string) string { return config })
}

// runShardOf runs shard i's servers of instance name as cluster nodes from
// the instance's rendered redis.conf (password included, edited by edit),
// on loopback ports of their own, and marks their pods running with an ext4
// volume reported, in order (the StatefulSet makes a pod once the previous
// one is Ready). The nodes
// announce their IP: the test's client reaches 127.0.0.1, not the pods' DNS
// names.
func runShardOf(t *testing.T, ns, name string, shard, servers int, edit func(string) string) {
	t.Helper()
	config := edit(renderedConfigOf(t, ns, name, fmt.Sprintf("%s-s%d", name, shard))) + "cluster-preferred-endpoint-type ip\n"
	for j := range servers {
		pod := fmt.Sprintf("%s-s%d-%d", name, shard, j)
		srv := testenv.RunClusterNode(t, t.TempDir(), config)
		serverAddrs.Store(ns+"/"+pod, srv.Addr)
		actAsKubelet(t, ns, pod, "ext4")
	}
}

// waitClusterHealthy waits until the instance reports a healthy cluster of
// shards shards serving every slot, for its current generation.
func waitClusterHealthy(t *testing.T, ns, name string, shards int) *v1alpha1.RedisPersistence {
	t.Helper()
	rp := &v1alpha1.RedisPersistence{}
	eventually(t, 120*time.Second, func() error {
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		for _, cond := range []string{v1alpha1.ConditionClusterHealthy, v1alpha1.ConditionSlotsCovered, v1alpha1.ConditionReady, v1alpha1.ConditionUpToDate, v1alpha1.ConditionConfigApplied} {
			c := findCondition(rp, cond)
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != rp.Generation {
				return fmt.Errorf("%s is %+v", cond, c)
			}
		}
		if len(rp.Status.Shards) != shards {
			return fmt.Errorf("status.shards has %d shards, want %d: %+v", len(rp.Status.Shards), shards, rp.Status.Shards)
		}
		return nil
	})
	return rp
}

func findCondition(rp *v1alpha1.RedisPersistence, condType string) *metav1.Condition {
	for i := range rp.Status.Conditions {
		if rp.Status.Conditions[i].Type == condType {
			return &rp.Status.Conditions[i]
		}
	}
	return nil
}

// A sharded instance against real cluster nodes: the operator makes a
// StatefulSet per shard, forms the cluster once every server answers
// (even shares, a replica per shard), reports it in status.shards, adds a
// fourth shard and moves its share of the slots to it with the keys, and
// removes it again, slots first, StatefulSet last, while a cluster client
// keeps writing: no write fails and no key is lost.
func TestClusterFormsAndScales(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = shardedName
	for i := range 4 {
		for j := range 2 {
			createVolumeFor(t, ns, fmt.Sprintf("data-%s-s%d-%d", name, i, j))
		}
	}
	rp := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways},
		Cluster:   &v1alpha1.ClusterSpec{Shards: 3, ReplicasPerShard: ptr.To[int32](1)},
		Storage:   &v1alpha1.StorageSpec{StorageClassName: storageClass},
		Benchmark: &v1alpha1.BenchmarkAccessSpec{},
	}}
	if err := k8s.Create(context.Background(), rp); err != nil {
		t.Fatal(err)
	}

	// A StatefulSet and a disruption budget per shard; no single-server StatefulSet.
	for i := range 3 {
		sts := &appsv1.StatefulSet{}
		eventually(t, 30*time.Second, func() error { return get(t, sts, ns, fmt.Sprintf("%s-s%d", name, i)) })
		if *sts.Spec.Replicas != 2 || sts.Spec.Selector.MatchLabels[specs.LabelShard] != fmt.Sprint(i) {
			t.Fatalf("StatefulSet %s: %d replicas, selector %v", sts.Name, *sts.Spec.Replicas, sts.Spec.Selector.MatchLabels)
		}
		if err := get(t, &policyv1.PodDisruptionBudget{}, ns, sts.Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := get(t, &appsv1.StatefulSet{}, ns, name); !apierrors.IsNotFound(err) {
		t.Fatalf("a sharded instance has a StatefulSet %s: %v", name, err)
	}

	// Until every server answers, the cluster is forming.
	runShard(t, ns, 0)
	waitCondition(t, ns, name, v1alpha1.ConditionClusterHealthy, metav1.ConditionFalse, ReasonClusterForming)
	runShard(t, ns, 1)
	runShard(t, ns, 2)
	rp = waitClusterHealthy(t, ns, name, 3)
	// The replicas' links come up once their first sync is done.
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rp, ns, name); err != nil {
			return err
		}
		for _, shard := range rp.Status.Shards {
			for _, s := range shard.Servers {
				if !s.LinkUp {
					return fmt.Errorf("shard %d: servers %+v", shard.Index, shard.Servers)
				}
			}
		}
		return nil
	})
	for i, shard := range rp.Status.Shards {
		want := cluster.Share(i, 3)
		if shard.Primary != fmt.Sprintf("%s-s%d-0", name, i) || shard.Slots != want.String() || int(shard.SlotCount) != want.Last-want.First+1 {
			t.Errorf("shard %d: primary %s, slots %s (%d), want %s-s%d-0 serving %s", i, shard.Primary, shard.Slots, shard.SlotCount, name, i, want)
		}
		if len(shard.Servers) != 2 || shard.Servers[1].Pod != fmt.Sprintf("%s-s%d-1", name, i) || shard.Servers[1].Role != v1alpha1.RoleReplica ||
			!shard.Servers[1].LinkUp || shard.Servers[0].Role != v1alpha1.RolePrimary {
			t.Errorf("shard %d: servers %+v", i, shard.Servers)
		}
	}
	if rp.Status.Ready != "6/6" {
		t.Errorf("status.ready %q, want 6/6", rp.Status.Ready)
	}
	// The pods carry the roles the cluster gave them.
	eventually(t, 30*time.Second, func() error {
		for i := range 3 {
			primary, replica := fmt.Sprintf("%s-s%d-0", name, i), fmt.Sprintf("%s-s%d-1", name, i)
			if got := roleLabels(t, ns, primary, replica); got[primary] != "primary" || got[replica] != "replica" {
				return fmt.Errorf("shard %d: role labels %v", i, got)
			}
		}
		return nil
	})

	// The exporter, as shard 0's pods run it, reads the cluster's state.
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, name+"-s0"); err != nil {
		t.Fatal(err)
	}
	password := instancePassword(t, ns, name)
	first, _ := serverAddrs.Load(ns + "/" + name + "-s0-0")
	metrics := scrapeExporter(t, ns, sts, first.(string))
	for _, want := range []string{"\nredis_cluster_state 1\n", "\nredis_cluster_slots_ok 16384\n", "\nredis_cluster_known_nodes 6\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the exporter's metrics lack %q", strings.TrimSpace(want))
		}
	}
	admin := redis.NewClient(&redis.Options{Addr: first.(string), Password: password})
	defer func() { _ = admin.Close() }()
	if refused := testenv.ACLRefusals(t, admin); len(refused) > 0 {
		t.Errorf("the server refused the exporter: %q", refused)
	}

	ctx := context.Background()
	// A RedisBenchmark of the cluster: its Job drives every primary through
	// the Service. The real runner, with the Job's arguments and sign-in,
	// measures the real nodes, and the result names the shards.
	createBenchmark(t, ns, "shards", v1alpha1.RedisBenchmarkSpec{Targets: []string{name},
		Workload: v1alpha1.BenchmarkWorkload{Commands: []v1alpha1.BenchmarkCommand{v1alpha1.CommandSet}, Requests: 3000, Clients: 8}})
	job := waitJob(t, ns, "shards-0")
	if args := job.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--cluster") || !slices.Contains(args, "--db=0") {
		t.Fatalf("the Job's runner args %q: want --cluster and --db=0", args)
	}
	env := resolveEnv(t, ns, job.Spec.Template.Spec.Containers[0].Env)
	runner := bench.Runner{Tool: filepath.Join(filepath.Dir(testenv.ServerBin()), "valkey-benchmark"), Addr: first.(string),
		User: envValue(env, "REDIS_USER"), Password: envValue(env, "REDIS_PASSWORD"), Cluster: true}
	if err := runner.ClaimDatabase(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(ctx, bench.Workload{Target: name, Mode: "aof-always", Commands: []string{"set"}, Requests: 3000, Clients: 8, Pipeline: 1, ValueSize: 64, Keyspace: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.DeleteKeys(ctx); err != nil {
		t.Fatal(err)
	}
	msg, err := bench.Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	finishJobPod(t, ns, "shards-0", 0, string(msg))
	waitBenchmark(t, ns, "shards", func(rb *v1alpha1.RedisBenchmark) error {
		if err := hasCondition(rb, v1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonBenchmarkSucceeded); err != nil {
			return err
		}
		if r := rb.Status.Results; len(r) != 1 || r[0].Shards != 3 || r[0].ShardOpsMinPerSecond <= 0 || r[0].ShardOpsMaxPerSecond < r[0].ShardOpsMinPerSecond {
			return fmt.Errorf("results %+v: want one over 3 shards with their spread", r)
		}
		return nil
	})

	// The instance dashboard's shards panel draws it, from a real Prometheus scraping the operator.
	prom := promtest.Prometheus(t, fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs: [{job_name: operator, static_configs: [{targets: [%q]}]}]\n", operatorMetrics(t)))
	queries, err := dashboards.AllQueries("5s")
	if err != nil {
		t.Fatal(err)
	}
	for desc, q := range queries {
		if !dashboards.NeedsCluster(desc) {
			delete(queries, desc)
			continue
		}
		queries[desc] = strings.ReplaceAll(q, `namespace=~".*"`, `namespace="`+ns+`"`)
	}
	if len(queries) != 2 {
		t.Fatalf("the shards panel has %d queries, want 2: %v", len(queries), queries)
	}
	waitQueriesReturnData(t, prom, queries)

	// A cluster client writes from here to the end.
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{first.(string)}, Password: password, MaxRedirects: 16})
	defer func() { _ = client.Close() }()
	var written atomic.Int64
	var writeErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := client.Set(context.Background(), fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
				writeErr = fmt.Errorf("SET key:%d: %w", i, err)
				return
			}
			written.Store(int64(i + 1))
		}
	}()
	finish := func() {
		t.Helper()
		close(stop)
		wg.Wait()
		if writeErr != nil {
			t.Fatal(writeErr)
		}
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}()
	eventually(t, 30*time.Second, func() error {
		if n := written.Load(); n < 2000 {
			return fmt.Errorf("%d writes so far", n)
		}
		return nil
	})

	// Four shards: the fourth gets its share once its servers run.
	phases := recordPhases(t, ns, name)
	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Cluster.Shards = 4 })
	eventually(t, 30*time.Second, func() error { return get(t, &appsv1.StatefulSet{}, ns, name+"-s3") })
	runShard(t, ns, 3)
	rp = waitClusterHealthy(t, ns, name, 4)
	for i, shard := range rp.Status.Shards {
		if shard.SlotCount < 4095 || shard.SlotCount > 4097 {
			t.Errorf("shard %d serves %d slots (%s) after scaling to 4", i, shard.SlotCount, shard.Slots)
		}
	}

	// Back to three: shard 3 gives its slots away and leaves, StatefulSet and all.
	updateRP(t, ns, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Cluster.Shards = 3 })
	// 4096 slots move, keys and all, then the shard drains 15 s: in a make test
	// beside a CPU hog the moves alone took more than 110 s (2026-11-29).
	eventually(t, 240*time.Second, func() error {
		if err := get(t, &appsv1.StatefulSet{}, ns, name+"-s3"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("StatefulSet %s-s3 still there (%w)", name, err)
		}
		return nil
	})
	rp = waitClusterHealthy(t, ns, name, 3)
	if seen, _ := phases.since(0); !slices.Contains(seen, v1alpha1.PhaseScaling) || slices.Contains(seen, v1alpha1.PhaseUpgrading) {
		t.Errorf("phases %v through the scale to 4 shards and back, want Scaling and no Upgrading", seen)
	}
	for i, shard := range rp.Status.Shards {
		if shard.SlotCount < 5461 || shard.SlotCount > 5462 {
			t.Errorf("shard %d serves %d slots (%s) after scaling back to 3", i, shard.SlotCount, shard.Slots)
		}
	}
	finish()

	// The operator's metrics follow status.shards: three shards, the fourth's series gone.
	for i, shard := range rp.Status.Shards {
		l := prometheus.Labels{"namespace": ns, "redispersistence": name, "shard": fmt.Sprint(i)}
		if got := testutil.ToFloat64(shardSlots.With(l)); got != float64(shard.SlotCount) {
			t.Errorf("uringredis_cluster_shard_slots of shard %d is %v, status says %d", i, got, shard.SlotCount)
		}
	}
	// Other tests' instances have series of their own: this one's fourth is gone.
	if hasSeries(shardSlots, prometheus.Labels{"namespace": ns, "redispersistence": name, "shard": "3"}) {
		t.Error("uringredis_cluster_shard_slots still has a series for shard 3, removed")
	}

	// Every key written is there, on the shards that remain.
	n := int(written.Load())
	for i := range n {
		v, err := client.Get(context.Background(), fmt.Sprintf("key:%d", i)).Int()
		if err != nil || v != i {
			t.Fatalf("key:%d is %d (%v) after scaling 3 -> 4 -> 3; %d keys written", i, v, err, n)
		}
	}
	var keys int64
	for i := range 3 {
		addr, _ := serverAddrs.Load(fmt.Sprintf("%s/%s-s%d-0", ns, name, i))
		c := redis.NewClient(&redis.Options{Addr: addr.(string), Password: password})
		k, err := c.DBSize(context.Background()).Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		keys += k
	}
	if keys != int64(n) {
		t.Errorf("the three primaries hold %d keys, %d were written", keys, n)
	}
	t.Logf("%d writes through the scaling, none failed, none lost", n)
}

// A sharded uring instance with spec.tls against real cluster nodes that
// speak TLS only, on the bus too, requiring client certificates: the
// operator forms the cluster over TLS, reports the certificate served and
// io_uring active on every node, a cluster
// client reaches every shard over TLS, and a new certificate reaches every
// node without a restart.
func TestClusterOverTLS(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "tlsshard"
	ca := testenv.NewCA(t)
	firstCert, firstKey := ca.Issue(t, 48*time.Hour, name)
	if err := k8s.Create(ctx, tlsSecret(ns, name+"-certs", firstCert, firstKey, ca.PEM)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		createVolumeFor(t, ns, fmt.Sprintf("data-%s-s%d-0", name, i))
	}
	createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Cluster: &v1alpha1.ClusterSpec{Shards: 3, ReplicasPerShard: ptr.To[int32](0)},
		TLS:     &v1alpha1.TLSSpec{SecretName: name + "-certs", ClientAuth: true},
		Storage: &v1alpha1.StorageSpec{StorageClassName: storageClass},
	})
	eventually(t, 30*time.Second, func() error { return get(t, &appsv1.StatefulSet{}, ns, name+"-s2") })
	if config := renderedConfigOf(t, ns, name, name+"-s0"); !strings.Contains(config, "\ntls-cluster yes\n") || !strings.Contains(config, "\nport 0\n") {
		t.Fatalf("a TLS cluster node's redis.conf lacks tls-cluster yes or port 0:\n%s", config)
	}
	files := t.TempDir()
	testenv.WriteTLSFiles(t, files, firstCert, firstKey, ca.PEM)
	for i := range 3 {
		runShardOf(t, ns, name, i, 1, func(config string) string { return strings.ReplaceAll(config, specs.TLSDir, files) })
	}
	waitClusterHealthy(t, ns, name, 3)
	waitCondition(t, ns, name, v1alpha1.ConditionTLSReady, metav1.ConditionTrue, ReasonCertificateServed)
	waitCondition(t, ns, name, v1alpha1.ConditionUringActive, metav1.ConditionTrue, ReasonUringActive)
	if rp := waitCondition(t, ns, name, v1alpha1.ConditionStorageReady, metav1.ConditionTrue, ReasonFilesystemOK); rp.Status.Filesystem != "ext4" {
		t.Errorf("status.filesystem %q, want ext4", rp.Status.Filesystem)
	}

	clientTLS, err := tlsclient.Config(ca.PEM, firstCert, firstKey)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := serverAddrs.Load(ns + "/" + name + "-s0-0")
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{first.(string)}, Password: instancePassword(t, ns, name), TLSConfig: clientTLS})
	defer func() { _ = c.Close() }()
	for i := range 300 {
		if err := c.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// ForEachMaster calls fn on every primary at once: the map needs a lock.
	var mu sync.Mutex
	perShard := map[string]int64{}
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		mu.Lock()
		defer mu.Unlock()
		perShard[m.Options().Addr] = n
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(perShard) != 3 {
		t.Fatalf("keys per primary %v: want 3 primaries", perShard)
	}
	for addr, n := range perShard {
		if n == 0 {
			t.Errorf("the primary at %s holds none of the keys: %v", addr, perShard)
		}
	}

	// A new certificate reaches every node, loaded without a restart.
	secondCert := rotateServedCertificate(t, ns, name, ca, files)
	for i := range 3 {
		addr, _ := serverAddrs.Load(fmt.Sprintf("%s/%s-s%d-0", ns, name, i))
		if served, err := servedCertificate(ctx, addr.(string), clientTLS); err != nil || !served.Equal(leafOf(t, secondCert)) {
			t.Errorf("%s presents %v (err %v), not the new certificate", addr, served, err)
		}
	}
}

// UringActive of a sharded instance names the servers that fell back to
// the posix engine, with a reason; a mode other than uring has none.
func TestClusterUringCondition(t *testing.T) {
	server := func(pod string, info *serverInfo) *clusterServer {
		return &clusterServer{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod}}, info: info}
	}
	rp := &v1alpha1.RedisPersistence{Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}}
	view := &clusterView{shards: map[int][]*clusterServer{
		0: {server("c-s0-0", &serverInfo{uringActive: true}), server("c-s0-1", nil)},
		1: {server("c-s1-0", &serverInfo{fallbackReason: "io_uring_setup: Operation not permitted"}), server("c-s1-1", &serverInfo{uringActive: true})},
	}}
	c := clusterUringCondition(rp, view)
	if c == nil || c.status != metav1.ConditionFalse || c.reason != ReasonUringFallback ||
		!strings.Contains(c.message, "on c-s1-0, which") || !strings.Contains(c.message, "Operation not permitted") {
		t.Errorf("one server fell back: %+v", c)
	}
	view.shards[1][0].info.uringActive = true
	if c := clusterUringCondition(rp, view); c == nil || c.status != metav1.ConditionTrue || !strings.Contains(c.message, "(3)") {
		t.Errorf("every server that answers runs io_uring: %+v", c)
	}
	rp.Spec.Mode = v1alpha1.ModeAOF
	if c := clusterUringCondition(rp, view); c != nil {
		t.Errorf("mode aof: %+v", c)
	}
}

// StorageReady of a sharded instance judges every server's volume: one
// mounted without write barriers under a durable mode makes it false,
// naming the pod, as a single server's would; a server not reported yet
// leaves it unknown.
func TestClusterStorage(t *testing.T) {
	server := func(pod, report string) *clusterServer {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod}}
		if report != "" {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: specs.ContainerPrepare,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: report}}}}
		}
		return &clusterServer{pod: p}
	}
	rp := &v1alpha1.RedisPersistence{Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}}
	view := &clusterView{shards: map[int][]*clusterServer{
		0: {server("c-s0-0", layoutReport), server("c-s0-1", layoutReport)},
		1: {server("c-s1-0", layoutReport), server("c-s1-1", "")},
	}}
	if c, _ := clusterStorage(rp, view, observation{}); c.status != metav1.ConditionUnknown || !strings.Contains(c.message, "c-s1-1") {
		t.Errorf("a server not reported: %+v", c)
	}
	view.shards[1][1] = server("c-s1-1", unsafeReport)
	c, report := clusterStorage(rp, view, observation{})
	if c.status != metav1.ConditionFalse || c.reason != ReasonWriteBarrierDisabled || !strings.HasPrefix(c.message, "c-s1-1: ") || report.mountOptions != "rw,relatime,nobarrier" {
		t.Errorf("a server without write barriers: %+v, report %+v", c, report)
	}
	view.shards[1][1] = server("c-s1-1", layoutReport)
	if c, report := clusterStorage(rp, view, observation{}); c.status != metav1.ConditionTrue || !report.measured() {
		t.Errorf("every volume safe: %+v, report %+v", c, report)
	}
}

// A formation cut short: the nodes met and shard 0 took its share, then
// the operator stopped (its deadline, a restart) before the other shares.
// The operator finds slots no node serves and forms on: every shard ends
// with its even share.
func TestClusterFinishesACutFormation(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const name = "cut"
	for i := range 3 {
		createVolumeFor(t, ns, fmt.Sprintf("data-%s-s%d-0", name, i))
	}
	createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, Cluster: &v1alpha1.ClusterSpec{Shards: 3, ReplicasPerShard: ptr.To[int32](0)},
		Storage: &v1alpha1.StorageSpec{StorageClassName: storageClass},
	})
	eventually(t, 30*time.Second, func() error { return get(t, &appsv1.StatefulSet{}, ns, name+"-s2") })
	password := instancePassword(t, ns, name)
	var addrs []string
	for i := range 3 {
		config := renderedConfigOf(t, ns, name, fmt.Sprintf("%s-s%d", name, i)) + "cluster-preferred-endpoint-type ip\n"
		addrs = append(addrs, testenv.RunClusterNode(t, t.TempDir(), config).Addr)
	}
	admin := &cluster.Admin{Dial: func(addr string) *redis.Client { return newClient(addr, password) }, Password: password, Log: t.Logf}
	if err := admin.Meet(ctx, addrs[0], addrs[1:]); err != nil {
		t.Fatal(err)
	}
	first := newClient(addrs[0], password)
	defer func() { _ = first.Close() }()
	share := cluster.Share(0, 3)
	if err := first.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", share.First, share.Last).Err(); err != nil {
		t.Fatal(err)
	}
	for i, addr := range addrs {
		pod := fmt.Sprintf("%s-s%d-0", name, i)
		serverAddrs.Store(ns+"/"+pod, addr)
		actAsKubelet(t, ns, pod, "ext4")
	}
	rp := waitClusterHealthy(t, ns, name, 3)
	for i, shard := range rp.Status.Shards {
		if want := cluster.Share(i, 3); shard.Slots != want.String() {
			t.Errorf("shard %d serves %s, want %s", i, shard.Slots, want)
		}
	}
}
