package controllers

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

func TestBenchmarkMetricsExport(t *testing.T) {
	rb := &v1alpha1.RedisBenchmark{ObjectMeta: metav1.ObjectMeta{Namespace: "metrics-ns", Name: "m"}}
	rb.Status.Results = []v1alpha1.BenchmarkResult{
		{Target: "u", Mode: "uring-durable", Engine: "uring", Command: "set", OpsPerSecond: 81234, P50Micros: 350, P99Micros: 1200, P999Micros: 4100,
			CPUMicrosPerKop: 12500, FsyncCount: 900, FsyncP50Micros: 400, FsyncP99Micros: 2500},
		{Target: "e", Mode: "aof-everysec", Engine: "posix", Command: "set", OpsPerSecond: 90000, P50Micros: 300, P99Micros: 800, P999Micros: 1500, CPUMicrosPerKop: 9000},
	}
	rb.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionFailed, Status: metav1.ConditionFalse}}
	exportBenchmarkMetrics(rb)
	t.Cleanup(func() { forgetBenchmarkMetrics("metrics-ns", "m") })

	expected := `
# HELP uringredis_benchmark_fsync_seconds fdatasync latency quantiles (upper bounds) of the AOF the server reported during the command (INFO aof_fsync_*, every AOF mode).
# TYPE uringredis_benchmark_fsync_seconds gauge
uringredis_benchmark_fsync_seconds{benchmark="m",command="set",mode="uring-durable",namespace="metrics-ns",quantile="0.5",target="u"} 0.0004
uringredis_benchmark_fsync_seconds{benchmark="m",command="set",mode="uring-durable",namespace="metrics-ns",quantile="0.99",target="u"} 0.0025
# HELP uringredis_benchmark_latency_seconds Request latency quantiles valkey-benchmark measured.
# TYPE uringredis_benchmark_latency_seconds gauge
uringredis_benchmark_latency_seconds{benchmark="m",command="set",mode="aof-everysec",namespace="metrics-ns",quantile="0.5",target="e"} 0.0003
uringredis_benchmark_latency_seconds{benchmark="m",command="set",mode="aof-everysec",namespace="metrics-ns",quantile="0.99",target="e"} 0.0008
uringredis_benchmark_latency_seconds{benchmark="m",command="set",mode="aof-everysec",namespace="metrics-ns",quantile="0.999",target="e"} 0.0015
uringredis_benchmark_latency_seconds{benchmark="m",command="set",mode="uring-durable",namespace="metrics-ns",quantile="0.5",target="u"} 0.00035
uringredis_benchmark_latency_seconds{benchmark="m",command="set",mode="uring-durable",namespace="metrics-ns",quantile="0.99",target="u"} 0.0012
uringredis_benchmark_latency_seconds{benchmark="m",command="set",mode="uring-durable",namespace="metrics-ns",quantile="0.999",target="u"} 0.0041
# HELP uringredis_benchmark_cpu_seconds_per_kop Server CPU seconds (user+sys, io_uring workers included) per 1000 operations.
# TYPE uringredis_benchmark_cpu_seconds_per_kop gauge
uringredis_benchmark_cpu_seconds_per_kop{benchmark="m",command="set",mode="aof-everysec",namespace="metrics-ns",target="e"} 0.009
uringredis_benchmark_cpu_seconds_per_kop{benchmark="m",command="set",mode="uring-durable",namespace="metrics-ns",target="u"} 0.0125
# HELP uringredis_benchmark_ops_per_second Throughput valkey-benchmark measured, per benchmark, target, persistence mode and command.
# TYPE uringredis_benchmark_ops_per_second gauge
uringredis_benchmark_ops_per_second{benchmark="m",command="set",mode="aof-everysec",namespace="metrics-ns",target="e"} 90000
uringredis_benchmark_ops_per_second{benchmark="m",command="set",mode="uring-durable",namespace="metrics-ns",target="u"} 81234
# HELP uringredis_benchmark_failed 1 when the benchmark's Failed condition is true, else 0.
# TYPE uringredis_benchmark_failed gauge
uringredis_benchmark_failed{benchmark="m",namespace="metrics-ns"} 0
`
	names := []string{"uringredis_benchmark_fsync_seconds", "uringredis_benchmark_latency_seconds", "uringredis_benchmark_cpu_seconds_per_kop",
		"uringredis_benchmark_ops_per_second", "uringredis_benchmark_failed"}
	if err := testutil.GatherAndCompare(onlyNamespace{"metrics-ns"}, strings.NewReader(expected), names...); err != nil {
		t.Error(err)
	}

	// A status with fewer results replaces the series; none linger.
	rb.Status.Results = rb.Status.Results[1:]
	exportBenchmarkMetrics(rb)
	if n := countSeries(t, "metrics-ns", "uringredis_benchmark_fsync_seconds"); n != 0 {
		t.Errorf("%d fsync series remain after the uring result went away", n)
	}
	forgetBenchmarkMetrics("metrics-ns", "m")
	if n := countSeries(t, "metrics-ns", "uringredis_benchmark_ops_per_second"); n != 0 {
		t.Errorf("%d ops series remain after the benchmark was forgotten", n)
	}
}

// onlyNamespace gathers the operator registry's series of one namespace, so
// envtest benchmarks running at the same time do not disturb the comparison.
type onlyNamespace struct{ ns string }

func (o onlyNamespace) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	var out []*dto.MetricFamily
	for _, mf := range mfs {
		var kept []*dto.Metric
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" && l.GetValue() == o.ns {
					kept = append(kept, m)
				}
			}
		}
		if len(kept) > 0 {
			mf.Metric = kept
			out = append(out, mf)
		}
	}
	return out, nil
}

func countSeries(t *testing.T, ns, name string) int {
	t.Helper()
	mfs, err := onlyNamespace{ns}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
