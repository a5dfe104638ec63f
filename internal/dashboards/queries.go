package dashboards

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

var labelValues = regexp.MustCompile(`^label_values\((.*), (\w+)\)$`)

// AllQueries is every PromQL expression of every dashboard the chart ships —
// each panel target and each query variable — keyed by "<file> / <panel> #<n>"
// or "<file> / variable <name>", with the dashboards' variables resolved as
// an "All" selection does and $__rate_interval set to rateInterval. Tests and
// `make demo` run them against a real Prometheus: each must return data.
func AllQueries(rateInterval string) (map[string]string, error) {
	vars := strings.NewReplacer(
		"$namespace", ".*",
		"$benchmark", ".*",
		"$pod", ".*",
		"$__rate_interval", rateInterval,
	)
	queries := map[string]string{}
	for _, g := range All() {
		d, err := g.Build()
		if err != nil {
			return nil, err
		}
		for panel, exprs := range Queries(d) {
			for i, expr := range exprs {
				queries[fmt.Sprintf("%s / %s #%d", g.File, panel, i)] = vars.Replace(expr)
			}
		}
		for _, v := range d.Templating.List {
			if v.Type != dashboard.VariableTypeQuery {
				continue
			}
			m := labelValues.FindStringSubmatch(*v.Query.String)
			if m == nil {
				return nil, fmt.Errorf("%s: variable %s: query %q is not label_values(metric, label)", g.File, v.Name, *v.Query.String)
			}
			queries[fmt.Sprintf("%s / variable %s", g.File, v.Name)] = vars.Replace(fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))
		}
	}
	return queries, nil
}

// replicatedOnly are the queries that have data only where a replicated
// instance runs (a replica connected to a primary, a primary with
// uring.ackReplicas), keyed as AllQueries keys them.
var replicatedOnly = map[string]bool{
	"uring-instance.json / Replica lag #0":     true,
	"uring-instance.json / Replica lag #1":     true,
	"uring-instance.json / Durable offsets #2": true,
}

// backupsOnly are the queries that have data only where an instance has a
// completed RedisBackup and an AOF archive (spec.backup.archive).
var backupsOnly = map[string]bool{
	"uring-instance.json / Backups and archive #0": true,
	"uring-instance.json / Backups and archive #1": true,
	"uring-instance.json / Backups and archive #2": true,
}

// clusterOnly are the queries that have data only where a sharded instance
// (spec.cluster) runs.
var clusterOnly = map[string]bool{
	"uring-instance.json / Cluster shards #0": true,
	"uring-instance.json / Cluster shards #1": true,
}

// NeedsReplicas tells whether the query AllQueries keys desc returns data
// only when a replicated instance is scraped.
func NeedsReplicas(desc string) bool { return replicatedOnly[desc] }

// NeedsBackups tells whether the query AllQueries keys desc returns data
// only when an instance with a completed backup and an archive is.
func NeedsBackups(desc string) bool { return backupsOnly[desc] }

// NeedsCluster tells whether the query AllQueries keys desc returns data
// only when a sharded instance is.
func NeedsCluster(desc string) bool { return clusterOnly[desc] }
