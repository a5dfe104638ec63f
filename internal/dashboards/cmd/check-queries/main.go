// Command check-queries runs every query of the chart's Grafana dashboards
// against a Prometheus and fails unless each returns data: what `make demo`
// uses to show the dashboards would draw every panel on its cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/uring-redis/uring-redis-operator/internal/dashboards"
	"github.com/uring-redis/uring-redis-operator/internal/promtest"
)

func main() {
	prom := flag.String("prometheus", "http://127.0.0.1:9090", "Prometheus base URL.")
	rateInterval := flag.String("rate-interval", "5m", "What $__rate_interval stands for: cover the load you want to see.")
	patience := flag.Duration("wait", 2*time.Minute, "How long to retry queries that return no data yet.")
	replicated := flag.Bool("replicated", false, "The cluster runs a replicated instance: check the replication panels' queries too.")
	backups := flag.Bool("backups", false, "An instance has a completed RedisBackup and an AOF archive: check the backup panel's queries too.")
	flag.Parse()
	if err := run(*prom, *rateInterval, *patience, *replicated, *backups); err != nil {
		fmt.Fprintln(os.Stderr, "check-queries:", err)
		os.Exit(1)
	}
}

func run(prom, rateInterval string, patience time.Duration, replicated, backups bool) error {
	queries, err := dashboards.AllQueries(rateInterval)
	if err != nil {
		return err
	}
	skipped := map[string]int{}
	for desc := range queries {
		switch {
		case !replicated && dashboards.NeedsReplicas(desc):
			skipped["replication queries: no replicated instance (-replicated)"]++
		case !backups && dashboards.NeedsBackups(desc):
			skipped["backup queries: no instance with a backup and an archive (-backups)"]++
		case dashboards.NeedsCluster(desc):
			skipped["cluster queries: the demo runs no sharded instance (the controllers' envtest runs them)"]++
		default:
			continue
		}
		delete(queries, desc)
	}
	for why, n := range skipped {
		fmt.Printf("skipped %d %s\n", n, why)
	}
	pending, err := promtest.AwaitData(context.Background(), prom, queries, 5*time.Second, patience)
	if err != nil {
		return err
	}
	fmt.Printf("%d of %d dashboard queries return data\n", len(queries)-len(pending), len(queries))
	if len(pending) == 0 {
		return nil
	}
	var descs []string
	for desc := range pending {
		descs = append(descs, desc)
	}
	sort.Strings(descs)
	for _, desc := range descs {
		fmt.Printf("  no data: %s: %s\n", desc, pending[desc])
	}
	return fmt.Errorf("%d dashboard queries return no data", len(pending))
}
