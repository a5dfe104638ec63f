package promtest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

// TestAlertsOnRealExporterSeries loads the chart's rules into a real
// Prometheus that scrapes real redis_exporters (the sidecar's version, with
// the chart's script) in front of real servers, labelled as the operator's
// PodMonitor labels them, and brings about what each alert on the
// exporter's series watches: the alert goes pending for the server it
// concerns and for no other. (The `for` durations keep them from firing
// here; rules-test.yaml checks the firing, with the labels and text, on the
// series this test proves real.)
func TestAlertsOnRealExporterSeries(t *testing.T) {
	ctx := context.Background()
	script := filepath.Join(testenv.RepoRoot(), "internal", "specs", "uring-info.lua")
	// cache-0 is a primary with a small backlog, cache-1 its replica; full-0
	// stands alone and fills up to its maxmemory.
	primary := testenv.StartServer(t, "save \"\"\nrepl-backlog-size 16kb\n")
	replica := testenv.StartReplica(t, primary, "save \"\"\nenable-debug-command yes\n")
	full := testenv.RunServer(t, t.TempDir(), "save \"\"\n")
	target := func(addr, pod, instance string) string {
		return fmt.Sprintf("{targets: [%q], labels: {namespace: a, pod: %q, redispersistence: %q}}", addr, pod, instance)
	}
	targets := []string{
		target(Exporter(t, primary, script), "cache-0", "cache"),
		target(Exporter(t, replica, script), "cache-1", "cache"),
		target(Exporter(t, full.Addr, script), "full-0", "full"),
		target(FreeAddr(t), "gone-0", "gone"), // an exporter that does not answer
	}
	prom := Prometheus(t, fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: redis
    static_configs: [%s]
  - job_name: other # a target that is not an exporter of the operator's
    static_configs: [{targets: [%q], labels: {namespace: a, pod: unrelated-0}}]
`, rulesFile, strings.Join(targets, ", "), FreeAddr(t)))

	pending := func(alert string, want ...string) {
		t.Helper()
		var got []string
		err := wait.PollUntilContextTimeout(ctx, time.Second, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			alerts, err := Query(ctx, prom, `ALERTS{alertname="`+alert+`", alertstate="pending"}`)
			if err != nil {
				return false, err
			}
			got = nil
			for _, a := range alerts {
				got = append(got, string(a.Metric["pod"]))
			}
			slices.Sort(got)
			return slices.Equal(got, want), nil
		})
		if err != nil {
			t.Errorf("%s pending for %q, want %q", alert, got, want)
		}
	}
	client := func(addr string) *redis.Client {
		// DEBUG SLEEP answers after the sleep.
		c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: time.Minute})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	pending("RedisExporterDown", "gone-0")

	// The replica stops reading and acknowledging while the primary takes
	// more than its backlog holds.
	sleeping, replicaClient, primaryClient := make(chan error, 1), client(replica), client(primary)
	go func() { sleeping <- replicaClient.Do(ctx, "DEBUG", "SLEEP", "20").Err() }()
	value := strings.Repeat("x", 1024)
	for i := range 256 {
		if err := primaryClient.Set(ctx, "lag:"+strconv.Itoa(i), value, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pending("RedisReplicaLagging", "cache-0")
	if err := <-sleeping; err != nil {
		t.Fatalf("DEBUG SLEEP on the replica: %v", err)
	}
	pending("RedisReplicaLagging")

	// The replica is pointed at a primary that is not there.
	if err := replicaClient.Do(ctx, "REPLICAOF", "127.0.0.1", strings.Split(FreeAddr(t), ":")[1]).Err(); err != nil {
		t.Fatal(err)
	}
	pending("RedisReplicaLinkDown", "cache-1")

	// full-0 gets a maxmemory 1 MiB above what it holds, and fills it
	// until it refuses writes (noeviction, the server's default).
	c := client(full.Addr)
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, used, _ := strings.Cut(info, "used_memory:")
	start, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(used, "\n", 2)[0]), 10, 64)
	if err != nil {
		t.Fatalf("INFO memory: %v\n%s", err, info)
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(start+1<<20, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if err := c.Set(ctx, "fill:"+strconv.Itoa(i), value, 0).Err(); err != nil {
			if !strings.HasPrefix(err.Error(), "OOM") {
				t.Fatal(err)
			}
			break
		}
	}
	pending("RedisMemoryNearMaxmemory", "full-0")

	// full-0's server goes; its exporter stays and answers.
	full.Stop(t)
	pending("RedisExporterCannotReachServer", "full-0")
	pending("RedisExporterDown", "gone-0")
}
