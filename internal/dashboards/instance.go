package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// podSelector picks the servers the variables select. The PodMonitor's
// targets carry namespace and pod labels.
const podSelector = `namespace=~"$namespace", pod=~"$pod"`

// script selects one field the exporter's Lua script (internal/specs/uring-info.lua) exports.
func script(key string) string {
	return `redis_script_values{` + podSelector + `, key="` + key + `"}`
}

// fsyncWindowP99 is the p99 of the AOF's fdatasyncs in the rate window, from
// the server's cumulative buckets turned into a Prometheus histogram. The
// buckets count every fdatasync of the AOF, whichever engine ran it, so posix
// always and everysec have the same panels as the io_uring engine.
const fsyncWindowP99 = `histogram_quantile(0.99, sum by (namespace, pod, le) (label_replace(label_replace(` +
	`rate(redis_script_values{` + podSelector + `, key=~"aof_fsync_usec_bucket_le_.*"}[$__rate_interval]), ` +
	`"le", "$1", "key", "aof_fsync_usec_bucket_le_(.*)"), "le", "+Inf", "le", "inf"))) / 1e6`

// UringInstance is "uring AOF instance": one server's live view through its
// redis_exporter sidecar.
func UringInstance() (dashboard.Dashboard, error) {
	return dashboard.NewDashboardBuilder("uring AOF instance").
		Uid("uringredis-uring-instance").
		Description("Live view of RedisPersistence servers: throughput, the AOF's fsyncs in every mode, the io_uring engine's in-flight writes and back-pressure, AOF size and its preallocated region, CPU, which engine runs, for replicated instances each server's role, its replicas' lag and what is durable where, and the age of the instances' backups and archives.").
		Tags([]string{"uring-redis", "redis"}).
		Time("now-1h", "now").
		Refresh("30s").
		Timezone(common.TimeZoneBrowser).
		WithVariable(datasourceVariable()).
		WithVariable(labelVariable("namespace", "namespace", "redis_up")).
		WithVariable(labelVariable("pod", "pod", `redis_up{namespace=~"$namespace"}`)).
		WithPanel(enginePanel()).
		WithPanel(opsPanel()).
		WithPanel(fsyncLatencyPanel()).
		WithPanel(fsyncRatePanel()).
		WithPanel(inflightPanel()).
		WithPanel(backpressurePanel()).
		WithPanel(aofSizePanel()).
		WithPanel(cpuPanel()).
		WithPanel(writeErrorsPanel()).
		WithPanel(volumeFsyncPanel()).
		WithPanel(preallocationPanel()).
		WithPanel(rolePanel()).
		WithPanel(replicaLagPanel()).
		WithPanel(durableOffsetsPanel()).
		WithPanel(backupPanel()).
		WithPanel(shardsPanel()).
		Build()
}

// livePanel is the shared default of the time series panels.
func livePanel(id uint32, title, description, unit string) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Id(id).
		Title(title).
		Description(description).
		Unit(unit).
		Min(0).
		Height(8).
		Span(12).
		Datasource(datasource).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom).ShowLegend(true))
}

func enginePanel() *stat.PanelBuilder {
	mapping := func(options map[string]dashboard.ValueMappingResult) dashboard.ValueMapping {
		return dashboard.ValueMapOrRangeMapOrRegexMapOrSpecialValueMap{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: options}}
	}
	return stat.NewPanelBuilder().
		Id(1).
		Title("Engine").
		Description("Which engine writes the append-only file (io_uring or posix) and whether a server asked for io_uring fell back to posix (seccomp profile, kernel.io_uring_disabled, memlock).").
		Unit("none").
		Height(4).
		Span(24).
		Datasource(datasource).
		WithTarget(query("A", script("aof_uring_active"), "{{pod}} engine").Instant()).
		WithTarget(query("B", script("aof_uring_fallback")+` * 2`, "{{pod}} fallback").Instant()).
		Mappings([]dashboard.ValueMapping{mapping(map[string]dashboard.ValueMappingResult{
			"1": {Text: cog.ToPtr("io_uring"), Color: cog.ToPtr("green")},
			"0": {Text: cog.ToPtr("posix"), Color: cog.ToPtr("blue")},
			"2": {Text: cog.ToPtr("fell back to posix"), Color: cog.ToPtr("red")},
		})})
}

func opsPanel() *timeseries.PanelBuilder {
	return livePanel(2, "Commands per second", "Commands the server processed per second (INFO stats total_commands_processed).", "ops").
		WithTarget(query("A", `rate(redis_commands_processed_total{`+podSelector+`}[$__rate_interval])`, "{{pod}}"))
}

func fsyncLatencyPanel() *timeseries.PanelBuilder {
	return livePanel(3, "fsync latency",
		"fdatasync latency of the AOF, whichever engine runs it (appendfsync always inline, everysec in the background, the io_uring engine's batches): "+
			"p99 of the fsyncs in each interval (from the server's buckets), and the p50, p99 and max since the server started.", "s").
		WithTarget(query("A", fsyncWindowP99, "{{pod}} p99 (interval)")).
		WithTarget(query("B", `redis_script_values{`+podSelector+`, key=~"aof_fsync_usec_(p50|p99|max)"} / 1e6`, "{{pod}} {{key}}"))
}

func fsyncRatePanel() *timeseries.PanelBuilder {
	return livePanel(4, "fsyncs and batches per second",
		"fdatasyncs of the AOF completed per second in every mode (always: one per event-loop pass that wrote, everysec: about one a second), "+
			"and write batches the io_uring engine submitted per second; one fsync covers a whole batch (group commit). In durable mode a batch "+
			"over the preallocated log is one O_DIRECT write with RWF_DSYNC, its own fsync (direct writes, counted among the fsyncs too).", "ops").
		WithTarget(query("A", `rate(`+script("aof_fsync_count")+`[$__rate_interval])`, "{{pod}} fsyncs")).
		WithTarget(query("B", `rate(`+script("aof_uring_submitted_batches")+`[$__rate_interval])`, "{{pod}} batches")).
		WithTarget(query("C", `rate(`+script("aof_uring_direct_writes")+`[$__rate_interval])`, "{{pod}} direct writes"))
}

func inflightPanel() *timeseries.PanelBuilder {
	return livePanel(5, "In flight", "Bytes submitted to the ring and not yet durable, and how far the durable offset lags what was written. With ack: fast this is what a crash can lose.", "bytes").
		WithTarget(query("A", script("aof_uring_inflight_bytes"), "{{pod}} in flight")).
		WithTarget(query("B", script("aof_uring_durable_lag_bytes"), "{{pod}} durable lag"))
}

func backpressurePanel() *timeseries.PanelBuilder {
	return livePanel(6, "Back-pressure and held replies", "Back-pressure events per second (in-flight limit reached) and clients whose replies wait for their write to be durable (ack: durable).", "short").
		WithTarget(query("A", `rate(`+script("aof_uring_backpressure_events")+`[$__rate_interval])`, "{{pod}} back-pressure/s")).
		WithTarget(query("B", script("aof_uring_held_clients"), "{{pod}} held clients"))
}

func aofSizePanel() *timeseries.PanelBuilder {
	return livePanel(7, "AOF size", "Size of the append-only file, and of its base at the last rewrite.", "bytes").
		WithTarget(query("A", `redis_aof_current_size_bytes{`+podSelector+`}`, "{{pod}} current")).
		WithTarget(query("B", `redis_aof_base_size_bytes{`+podSelector+`}`, "{{pod}} base"))
}

func cpuPanel() *timeseries.PanelBuilder {
	return livePanel(8, "Server CPU", "CPU seconds per second (user+sys, io_uring workers included, from INFO cpu) and CPU seconds per 1000 commands.", "s").
		WithTarget(query("A", `rate(redis_cpu_user_seconds_total{`+podSelector+`}[$__rate_interval]) + rate(redis_cpu_sys_seconds_total{`+podSelector+`}[$__rate_interval])`, "{{pod}} CPU s/s")).
		WithTarget(query("B", `(rate(redis_cpu_user_seconds_total{`+podSelector+`}[$__rate_interval]) + rate(redis_cpu_sys_seconds_total{`+podSelector+`}[$__rate_interval])) * 1000 / rate(redis_commands_processed_total{`+podSelector+`}[$__rate_interval])`, "{{pod}} CPU s per 1k commands"))
}

func writeErrorsPanel() *timeseries.PanelBuilder {
	return livePanel(9, "AOF write health", "1 while the last AOF write failed (aof_last_write_status err: writes are refused), and io_uring write errors and short writes per second.", "short").
		WithTarget(query("A", `1 - redis_aof_last_write_status{`+podSelector+`}`, "{{pod}} write failing")).
		WithTarget(query("B", `rate(`+script("aof_uring_write_errors")+`[$__rate_interval])`, "{{pod}} write errors/s")).
		WithTarget(query("C", `rate(`+script("aof_uring_short_writes")+`[$__rate_interval])`, "{{pod}} short writes/s"))
}

func volumeFsyncPanel() *timeseries.PanelBuilder {
	return livePanel(10, "Volume fsync latency at pod start",
		"p50 and p99 of a 4 KiB append + fdatasync on the data volume, measured by the operator's probe for about 2 s when the pod started "+
			"(status.storage). A durable mode acknowledges at most about clients / p50 writes per second; compare with the live fsync latency above.", "s").
		WithTarget(query("A", `uringredis_storage_fsync_seconds{`+podSelector+`}`, "{{pod}} {{quantile}} quantile"))
}

func preallocationPanel() *timeseries.PanelBuilder {
	perSecond := []dashboard.DynamicConfigValue{{Id: "unit", Value: "ops"}, {Id: "custom.axisPlacement", Value: "right"}}
	return livePanel(14, "Preallocated log region",
		"Left axis: zero-written, fdatasync'ed bytes kept ahead of the AOF's tail (aof-preallocate), so that an fsync writes data without an ext4 journal commit. "+
			"Right axis, per second: writes that waited for an extension (stalls: the log caught up with the zeros), writes past the region (appends: "+
			"no region yet, or aof-preallocate no), and extensions that failed (errors: the volume cannot hold aof-preallocate-size more, it is full or "+
			"failing; the RedisAOFPreallocationFailing alert fires).", "bytes").
		WithTarget(query("A", script("aof_prealloc_bytes_ahead"), "{{pod}} bytes ahead")).
		WithTarget(query("B", `rate(`+script("aof_prealloc_stalls")+`[$__rate_interval])`, "{{pod}} stalls/s")).
		WithTarget(query("C", `rate(`+script("aof_prealloc_appends")+`[$__rate_interval])`, "{{pod}} appends/s")).
		WithTarget(query("D", `rate(`+script("aof_prealloc_errors")+`[$__rate_interval])`, "{{pod}} errors/s")).
		OverrideByQuery("B", perSecond).
		OverrideByQuery("C", perSecond).
		OverrideByQuery("D", perSecond)
}

// The replication panels: a replicated instance (spec.replicas above 1) has
// one primary and its replicas, each with its own exporter sidecar.

func rolePanel() *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Id(11).
		Title("Role and replicas").
		Description("Each server's role as it reports it (master: the primary, slave: a replica) and how many replicas are connected to it. A failover shows as the roles swapping.").
		Unit("none").
		Height(4).
		Span(24).
		Datasource(datasource).
		WithTarget(query("A", `max by (namespace, pod, role) (redis_instance_info{`+podSelector+`})`, "{{pod}} {{role}}").Instant()).
		WithTarget(query("B", `redis_connected_slaves{`+podSelector+`}`, "{{pod}} replicas connected").Instant())
}

func replicaLagPanel() *timeseries.PanelBuilder {
	return livePanel(12, "Replica lag", "Bytes of the replication stream each replica has not acknowledged yet, as its primary sees it (the primary's offset minus the replica's last ACK), and the seconds since that ACK.", "bytes").
		WithTarget(query("A", `redis_master_repl_offset{`+podSelector+`} - on (namespace, pod) group_right redis_connected_slave_offset_bytes{`+podSelector+`}`, "{{pod}} -> {{slave_ip}}")).
		WithTarget(query("B", `redis_connected_slave_lag_seconds{`+podSelector+`}`, "{{pod}} -> {{slave_ip}} seconds since ACK"))
}

func durableOffsetsPanel() *timeseries.PanelBuilder {
	return livePanel(13, "Durable offsets",
		"Replication offsets: where each server is, what its own AOF has fdatasync'ed, and on a primary with uring.ackReplicas what that many replicas have fdatasync'ed "+
			"(the point up to which writes are acknowledged). A gap between the last two is writes waiting for replicas.", "bytes").
		WithTarget(query("A", `redis_master_repl_offset{`+podSelector+`}`, "{{pod}} replication offset")).
		WithTarget(query("B", script("aof_uring_durable_offset"), "{{pod}} fsynced here")).
		WithTarget(query("C", script("aof_uring_replica_durable_offset")+` >= 0`, "{{pod}} fsynced on ackReplicas replicas"))
}

// The backup panel: the operator's metrics, per instance
// (redispersistence), which the pod variable does not select.

func backupPanel() *timeseries.PanelBuilder {
	rightAxis := []dashboard.DynamicConfigValue{{Id: "custom.axisPlacement", Value: "right"}}
	instance := `{namespace=~"$namespace"}`
	return livePanel(15, "Backups and archive",
		"Per instance of the selected namespaces (the pod variable does not apply). Left axis: the age of the newest completed backup's point "+
			"(RedisBackupOverdue fires an hour past the schedule's next run), and how far the AOF archive is behind now: writes of that long "+
			"would be lost with the volume (RedisArchiveBehind). Right axis: the archive's recovery window, from its first recoverable time to "+
			"its last archived time; pruning keeps it back to the oldest backup's point.", "s").
		WithTarget(query("A", `time() - max by (namespace, redispersistence) (uringredis_backup_point_timestamp_seconds`+instance+`)`, "{{redispersistence}} newest backup's age")).
		WithTarget(query("B", `time() - uringredis_archive_last_archived_timestamp_seconds`+instance, "{{redispersistence}} archive behind")).
		WithTarget(query("C", `uringredis_archive_last_archived_timestamp_seconds`+instance+` - uringredis_archive_first_recoverable_timestamp_seconds`+instance, "{{redispersistence}} recovery window")).
		OverrideByQuery("C", rightAxis)
}

// shardsPanel draws a sharded instance's shards (spec.cluster): the slots
// each shard's primary serves, which move while spec.cluster.shards
// changes, and how far each replica is behind its primary.
func shardsPanel() *timeseries.PanelBuilder {
	rightAxis := []dashboard.DynamicConfigValue{{Id: "custom.axisPlacement", Value: "right"}, {Id: "unit", Value: "bytes"}}
	instance := `{namespace=~"$namespace"}`
	return livePanel(16, "Cluster shards",
		"Sharded instances (spec.cluster) of the selected namespaces (the pod variable does not apply). Left axis: the hash slots each "+
			"shard's primary serves (16384 in all; they move, keys and all, while spec.cluster.shards changes). Right axis: how many bytes "+
			"of its primary's replication stream each replica has not received. A shard whose line drops to no slots lost them "+
			"(RedisClusterSlotsNotServed) or is being removed.", "short").
		WithTarget(query("A", `uringredis_cluster_shard_slots`+instance, "{{redispersistence}} shard {{shard}} slots")).
		WithTarget(query("B", `uringredis_cluster_replica_lag_bytes`+instance, "{{pod}} lag")).
		OverrideByQuery("B", rightAxis)
}
