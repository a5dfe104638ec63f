package controllers

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// Benchmark results as operator metrics, so Prometheus and the comparison
// dashboard see what status.results says. Every series of a benchmark is
// replaced whenever its status is written, and dropped with the benchmark.
var (
	benchmarkResultLabels = []string{"namespace", "benchmark", "target", "mode", "command"}

	benchmarkOpsPerSecond = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_benchmark_ops_per_second",
		Help: "Throughput valkey-benchmark measured, per benchmark, target, persistence mode and command.",
	}, benchmarkResultLabels)
	benchmarkLatency = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_benchmark_latency_seconds",
		Help: "Request latency quantiles valkey-benchmark measured.",
	}, append(benchmarkResultLabels, "quantile"))
	benchmarkCPU = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_benchmark_cpu_seconds_per_kop",
		Help: "Server CPU seconds (user+sys, io_uring workers included) per 1000 operations.",
	}, benchmarkResultLabels)
	benchmarkFsync = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_benchmark_fsync_seconds",
		Help: "fdatasync latency quantiles (upper bounds) of the AOF the server reported during the command (INFO aof_fsync_*, every AOF mode).",
	}, append(benchmarkResultLabels, "quantile"))
	benchmarkCrashLost = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_benchmark_crash_lost_keys",
		Help: "Acknowledged keys missing after the crash check killed the server.",
	}, []string{"namespace", "benchmark", "target", "mode"})
	benchmarkFailed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "uringredis_benchmark_failed",
		Help: "1 when the benchmark's Failed condition is true, else 0.",
	}, []string{"namespace", "benchmark"})

	benchmarkVecs = []*prometheus.GaugeVec{benchmarkOpsPerSecond, benchmarkLatency, benchmarkCPU, benchmarkFsync, benchmarkCrashLost, benchmarkFailed}
)

func init() {
	for _, v := range benchmarkVecs {
		metrics.Registry.MustRegister(v)
	}
}

const microsPerSecond = 1e6

// exportBenchmarkMetrics replaces the benchmark's series with its status.
func exportBenchmarkMetrics(rb *v1alpha1.RedisBenchmark) {
	forgetBenchmarkMetrics(rb.Namespace, rb.Name)
	for _, r := range rb.Status.Results {
		l := prometheus.Labels{"namespace": rb.Namespace, "benchmark": rb.Name, "target": r.Target, "mode": r.Mode, "command": r.Command}
		benchmarkOpsPerSecond.With(l).Set(float64(r.OpsPerSecond))
		benchmarkCPU.With(l).Set(float64(r.CPUMicrosPerKop) / microsPerSecond)
		for q, v := range map[float64]int64{0.5: r.P50Micros, 0.99: r.P99Micros, 0.999: r.P999Micros} {
			benchmarkLatency.With(withQuantile(l, q)).Set(float64(v) / microsPerSecond)
		}
		if r.FsyncCount > 0 {
			for q, v := range map[float64]int64{0.5: r.FsyncP50Micros, 0.99: r.FsyncP99Micros} {
				benchmarkFsync.With(withQuantile(l, q)).Set(float64(v) / microsPerSecond)
			}
		}
	}
	for _, cc := range rb.Status.CrashChecks {
		benchmarkCrashLost.With(prometheus.Labels{"namespace": rb.Namespace, "benchmark": rb.Name, "target": cc.Target, "mode": cc.Mode}).Set(float64(cc.LostKeys))
	}
	failed := 0.0
	for _, c := range rb.Status.Conditions {
		if c.Type == v1alpha1.ConditionFailed && c.Status == metav1.ConditionTrue {
			failed = 1
		}
	}
	benchmarkFailed.With(prometheus.Labels{"namespace": rb.Namespace, "benchmark": rb.Name}).Set(failed)
}

func forgetBenchmarkMetrics(namespace, name string) {
	for _, v := range benchmarkVecs {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "benchmark": name})
	}
}

func withQuantile(l prometheus.Labels, q float64) prometheus.Labels {
	out := prometheus.Labels{"quantile": strconv.FormatFloat(q, 'g', -1, 64)}
	for k, v := range l {
		out[k] = v
	}
	return out
}
