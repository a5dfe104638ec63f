package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// benchmarkSelector picks the benchmarks the variables select.
const benchmarkSelector = `namespace=~"$namespace", benchmark=~"$benchmark"`

// ModeComparison is "Persistence modes compared": the latest RedisBenchmark
// results (the operator's uringredis_benchmark_* metrics) per mode and command.
func ModeComparison() (dashboard.Dashboard, error) {
	return dashboard.NewDashboardBuilder("Persistence modes compared").
		Uid("uringredis-persistence-modes").
		Description("RedisBenchmark results per persistence mode and command: throughput, server CPU per 1000 operations, latency and fsync latency. Every target of a benchmark ran the same workload one after another.").
		Tags([]string{"uring-redis", "benchmark"}).
		Time("now-6h", "now").
		Refresh("1m").
		Timezone(common.TimeZoneBrowser).
		WithVariable(datasourceVariable()).
		WithVariable(labelVariable("namespace", "namespace", "uringredis_benchmark_ops_per_second")).
		WithVariable(labelVariable("benchmark", "benchmark", `uringredis_benchmark_ops_per_second{namespace=~"$namespace"}`)).
		WithPanel(throughputPanel()).
		WithPanel(cpuPerKopPanel()).
		WithPanel(latencyPanel(3, "Latency p50", "0.5")).
		WithPanel(latencyPanel(4, "Latency p99", "0.99")).
		WithPanel(fsyncP99Panel()).
		WithPanel(crashLossPanel()).
		Build()
}

// comparisonPanel is the shared default: horizontal bars, one per mode and
// command, from instant queries (a benchmark's figures do not change).
func comparisonPanel(id uint32, title, description, unit string) *bargauge.PanelBuilder {
	return bargauge.NewPanelBuilder().
		Id(id).
		Title(title).
		Description(description).
		Unit(unit).
		Min(0).
		Height(9).
		Span(12).
		Datasource(datasource).
		Orientation(common.VizOrientationHorizontal).
		DisplayMode(common.BarGaugeDisplayModeBasic).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false))
}

func throughputPanel() *bargauge.PanelBuilder {
	return comparisonPanel(1, "Throughput", "Operations per second valkey-benchmark measured (median of the repetitions). Higher is better.", "ops").
		WithTarget(query("A", `uringredis_benchmark_ops_per_second{`+benchmarkSelector+`}`, "{{mode}} {{command}} ({{target}})").Instant())
}

func cpuPerKopPanel() *bargauge.PanelBuilder {
	return comparisonPanel(2, "Server CPU per 1000 operations", "Server CPU seconds (user+sys from INFO cpu, io_uring workers included) per 1000 operations. Lower is better.", "s").
		WithTarget(query("A", `uringredis_benchmark_cpu_seconds_per_kop{`+benchmarkSelector+`}`, "{{mode}} {{command}} ({{target}})").Instant())
}

func latencyPanel(id uint32, title, quantile string) *bargauge.PanelBuilder {
	return comparisonPanel(id, title, "Request latency at quantile "+quantile+" as valkey-benchmark measured it, queueing in the clients included. Lower is better.", "s").
		WithTarget(query("A", `uringredis_benchmark_latency_seconds{`+benchmarkSelector+`, quantile="`+quantile+`"}`, "{{mode}} {{command}} ({{target}})").Instant())
}

func fsyncP99Panel() *bargauge.PanelBuilder {
	return comparisonPanel(5, "fsync p99",
		"p99 fdatasync latency of the AOF during each command, whichever engine ran it (appendfsync always inline, everysec in the background, the io_uring engine), "+
			"an upper bound from the server's latency buckets. Modes that do not fsync the AOF (none, rdb, aof-no) have no bar.", "s").
		WithTarget(query("A", `uringredis_benchmark_fsync_seconds{`+benchmarkSelector+`, quantile="0.99"}`, "{{mode}} {{command}} ({{target}})").Instant())
}

func crashLossPanel() *bargauge.PanelBuilder {
	return comparisonPanel(6, "Acknowledged keys lost in the crash check", "Keys the server acknowledged before it was killed and did not have after the restart. aof-always and uring-durable must show 0.", "short").
		WithTarget(query("A", `uringredis_benchmark_crash_lost_keys{`+benchmarkSelector+`}`, "{{mode}} ({{target}})").Instant())
}
