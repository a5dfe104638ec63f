//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/bench"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// TestWriteAvailabilityThroughDay2: a uring durable instance with two
// servers, Sentinels and ackReplicas 1, and beside it the benchmark
// runner's steady writer (2 000 SET/s through the Service, no retries).
// The day-2 operations a team runs, one after another: scale 2 -> 3, an
// operator upgrade (helm upgrade from release N-1, which the instance was
// made with, to N), an image change and a startup option change on three
// servers, scale 3 -> 2. For each, what the writer saw
// (the longest stretch without an acknowledged write, the writes that
// failed), the primary before and after, and the server pods replaced;
// at the end every acknowledged write is read back. The table goes to the
// log and to bin/e2e/availability.md (docs/replication.md quotes it).
// Asserted: nothing acknowledged is lost, a scale replaces no pod that
// stays, and every operation ends with the instance Ready and replicating.
// The gaps are measured, not asserted.
func TestWriteAvailabilityThroughDay2(t *testing.T) {
	helmBin, release, operatorNS, chartRef := os.Getenv("E2E_HELM"), os.Getenv("E2E_RELEASE"), os.Getenv("E2E_NAMESPACE"), os.Getenv("E2E_CHART")
	version, previous := os.Getenv("E2E_VERSION"), os.Getenv("E2E_PREVIOUS_VERSION")
	if helmBin == "" || release == "" || operatorNS == "" || chartRef == "" || version == "" || previous == "" {
		t.Fatal("E2E_HELM, E2E_RELEASE, E2E_NAMESPACE, E2E_CHART, E2E_VERSION and E2E_PREVIOUS_VERSION (two releases in the node's registry) name the operator upgrade to measure: run it with `make e2e`")
	}
	helm := func(args ...string) { t.Helper(); runHelm(t, helmBin, args...) }
	// Whatever happens, the tests after this one find release N installed.
	t.Cleanup(func() {
		helm(append([]string{"upgrade", release}, append(chartArgs(chartRef, version, operatorNS), "--reuse-values", "--wait", "--timeout", "5m")...)...)
	})
	helm(append([]string{"upgrade", release}, append(chartArgs(chartRef, previous, operatorNS), "--reuse-values", "--wait", "--timeout", "5m")...)...)

	const name = "avail"
	create(t, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, AckReplicas: 1}, Replicas: 2,
	})
	deleteReplicaClaimsAtEnd(t, name)
	settled := func(servers int) func(*v1alpha1.RedisPersistence) error {
		return func(rp *v1alpha1.RedisPersistence) error {
			if err := hasCondition(v1alpha1.ConditionReplicating, metav1.ConditionTrue, "Replicating")(rp); err != nil {
				return err
			}
			if st := rp.Status; st.Phase != v1alpha1.PhaseReady || len(st.Replicas) != servers || st.ObservedGeneration != rp.Generation {
				return fmt.Errorf("phase %s, %d servers replicating, observed generation %d of %d; want Ready with %d",
					st.Phase, len(st.Replicas), st.ObservedGeneration, rp.Generation, servers)
			}
			return nil
		}
	}
	rp := waitFor(t, name, 6*time.Minute, settled(2))

	writer := startSteadyWriter(t, rp, name+"-writer", 2000)
	var ops []day2Op
	// measure runs act and waits until the instance has settled with
	// servers servers and, if given, done holds.
	measure := func(what string, act func(), servers int, done func(*v1alpha1.RedisPersistence) error) {
		t.Helper()
		before := waitFor(t, name, time.Minute, settled(len(rp.Status.Replicas)))
		uids := serverPodUIDs(t, name)
		op := day2Op{what: what, from: before.Status.Primary, start: time.Now()}
		act()
		after := waitFor(t, name, 8*time.Minute, func(rp *v1alpha1.RedisPersistence) error {
			if err := settled(servers)(rp); err != nil || done == nil {
				return err
			}
			return done(rp)
		})
		// The writer's view of the end: a second more of writes.
		time.Sleep(time.Second)
		op.end, op.to, op.replaced = time.Now(), after.Status.Primary, replacedSince(t, name, uids)
		rp = after
		ops = append(ops, op)
		t.Logf("%s: primary %s -> %s, pods replaced %v, %s", what, op.from, op.to, op.replaced, op.end.Sub(op.start).Round(time.Second))
	}
	change := func(change func(*v1alpha1.RedisPersistence)) func() {
		return func() { updateRP(t, name, change) }
	}
	measure("nothing happening, 10 s", func() { time.Sleep(10 * time.Second) }, 2, nil)
	measure("scale 2 -> 3", change(func(rp *v1alpha1.RedisPersistence) { rp.Spec.Replicas = 3 }), 3, nil)
	// The rolling changes with three servers: with two and ackReplicas 1 the
	// primary refuses writes while its only replica restarts
	// (docs/replication.md).
	// The operator the test began with is release N-1: helm upgrade to N
	// brings a new default server image, which the new operator rolls out.
	var upgradeImage string
	measure("an operator upgrade (N-1 -> N, a new default server image)", func() {
		helm(append([]string{"upgrade", release}, append(chartArgs(chartRef, version, operatorNS), "--reuse-values", "--wait", "--timeout", "5m")...)...)
		upgradeImage = operatorRedisImage(t, operatorNS, release)
	}, 3, func(rp *v1alpha1.RedisPersistence) error {
		if rp.Status.Image != upgradeImage {
			return fmt.Errorf("status.image %s, want the new operator's %s", rp.Status.Image, upgradeImage)
		}
		return nil
	})
	// The same image by its digest: a new pod template, the same server.
	image := runningImageID(t, rp.Status.Primary)
	measure("an image change (rolling, switchover)", change(func(rp *v1alpha1.RedisPersistence) { rp.Spec.Image = image }), 3, nil)
	measure("a startup option change (rolling, switchover)", change(func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Config = map[string]v1alpha1.ServerOptionValue{"tcp-backlog": "1024"}
	}), 3, nil)
	measure("scale 3 -> 2", change(func(rp *v1alpha1.RedisPersistence) { rp.Spec.Replicas = 2 }), 2, nil)

	writer.report(t, ops, "availability.md", "scale")
}

// TestWriteAvailabilityThroughShardChanges: a uring durable cluster of 3
// shards of 3 servers with ackReplicas 1 and, beside it, the steady writer
// as a cluster client (2 000 SET/s, redirects followed, no retries), while
// the cluster grows to 4 shards and back to 3 (slots and keys move, the
// fourth shard's StatefulSet goes), then takes a startup option change
// (every server restarts, each shard's primary after a failover to its
// replica). The table goes to the log and to
// bin/e2e/availability-shards.md. Asserted: nothing acknowledged is lost
// and a change of shards replaces no pod of a shard that stays.
func TestWriteAvailabilityThroughShardChanges(t *testing.T) {
	const name = "avshards"
	// Three servers a shard, as the replicated scenario runs three: with
	// two and ackReplicas 1 a shard refuses writes while its only replica
	// restarts (docs/replication.md).
	createAckedShards(t, name, 2)
	rp := waitFor(t, name, 8*time.Minute, clusterReady(3))
	writer := startSteadyWriter(t, rp, name+"-writer", 2000)
	var ops []day2Op
	measure := func(what string, change func(*v1alpha1.RedisPersistence), settled func(*v1alpha1.RedisPersistence) error) {
		t.Helper()
		uids := serverPodUIDs(t, name)
		op := day2Op{what: what, from: shardPrimaries(rp), start: time.Now()}
		updateRP(t, name, change)
		rp = waitFor(t, name, 6*time.Minute, settled)
		time.Sleep(time.Second)
		op.end, op.to, op.replaced = time.Now(), shardPrimaries(rp), replacedSince(t, name, uids)
		ops = append(ops, op)
		t.Logf("%s: primaries %s -> %s, pods replaced %v, %s", what, op.from, op.to, op.replaced, op.end.Sub(op.start).Round(time.Second))
	}
	measure("shards 3 -> 4", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Cluster.Shards = 4 }, clusterReady(4))
	measure("shards 4 -> 3", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Cluster.Shards = 3 }, func(rp *v1alpha1.RedisPersistence) error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name + "-s3"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the StatefulSet %s-s3 is still there (%w)", name, err)
		}
		return clusterReady(3)(rp)
	})
	// A rolling change: every server restarts, each shard's primary after
	// its replica took over.
	before := serverPodUIDs(t, name)
	measure("a startup option change (rolling, a failover per shard)", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Config = map[string]v1alpha1.ServerOptionValue{"tcp-backlog": "1024"}
	}, func(rp *v1alpha1.RedisPersistence) error {
		for pod, uid := range serverPodUIDs(t, name) {
			if before[pod] == uid {
				return fmt.Errorf("pod %s still runs", pod)
			}
		}
		return clusterReady(3)(rp)
	})

	writer.report(t, ops, "availability-shards.md", "shards")
}

// shardPrimaries are the shards' primaries status names, in shard order.
func shardPrimaries(rp *v1alpha1.RedisPersistence) string {
	var primaries []string
	for _, s := range rp.Status.Shards {
		primaries = append(primaries, s.Primary)
	}
	return strings.Join(primaries, ", ")
}

// day2Op is one operation of the availability scenario and what it did.
type day2Op struct {
	what       string
	start, end time.Time
	from, to   string
	replaced   []string
}

// availabilityTable is the scenario's table in Markdown: per operation, the
// writes that failed in the seconds it spans and the longest outage the
// writer saw in its window.
func availabilityTable(ops []day2Op, result bench.SteadyResult) string {
	var b strings.Builder
	b.WriteString("| operation | failed writes | longest write gap | primary | pods replaced |\n|---|---|---|---|---|\n")
	for _, op := range ops {
		var failed int64
		var longest time.Duration
		for _, o := range result.Outages {
			if !o.End.Before(op.start) && !o.Start.After(op.end) {
				longest = max(longest, o.Duration())
			}
		}
		// Every failure in the seconds the operation spans, those outside
		// an outage too (one shard refusing while the others take writes).
		for _, f := range result.FailedBySecond {
			if !f.Second.Before(op.start.Truncate(time.Second)) && !f.Second.After(op.end) {
				failed += f.Failed
			}
		}
		primary := op.from
		if op.to != op.from {
			primary = op.from + " -> " + op.to
		}
		replaced := "none"
		if len(op.replaced) > 0 {
			replaced = strings.Join(op.replaced, ", ")
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", op.what, failed, longest.Round(10*time.Millisecond), primary, replaced)
	}
	return b.String()
}

// serverPodUIDs are the UIDs of name's server pods, by pod name.
func serverPodUIDs(t *testing.T, name string) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": name, "app.kubernetes.io/name": "redis"}); err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	for _, p := range pods.Items {
		uids[p.Name] = string(p.UID)
	}
	return uids
}

// replacedSince are name's server pods whose UID is not the one uids has
// for them, sorted.
func replacedSince(t *testing.T, name string, uids map[string]string) []string {
	t.Helper()
	var replaced []string
	for pod, uid := range serverPodUIDs(t, name) {
		if old, ok := uids[pod]; ok && old != uid {
			replaced = append(replaced, pod)
		}
	}
	slices.Sort(replaced)
	return replaced
}

// runningImageID is the image the server container of pod runs, by digest.
func runningImageID(t *testing.T, pod string) string {
	t.Helper()
	for _, cs := range getPod(t, pod).Status.ContainerStatuses {
		if id := strings.TrimPrefix(cs.ImageID, "docker-pullable://"); cs.Name == specs.ContainerRedis && strings.Contains(id, "@sha256:") {
			return id
		}
	}
	t.Fatalf("pod %s reports no pullable image ID (<repository>@sha256:...) for its server", pod)
	return ""
}

// steadyWriter is the runner pod of specs.SteadyWriterPod.
type steadyWriter struct{ pod string }

// startSteadyWriter starts a steady writer of rate SETs a second against rp
// and waits until it writes.
func startSteadyWriter(t *testing.T, rp *v1alpha1.RedisPersistence, pod string, rate int) *steadyWriter {
	t.Helper()
	image := operatorFlag(t, os.Getenv("E2E_NAMESPACE"), os.Getenv("E2E_RELEASE"), "--bench-image")
	p := specs.SteadyWriterPod(rp, pod, rate, specs.BenchmarkOptions{Image: image})
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
	waitUntil(t, 2*time.Minute, func() error {
		got := getPod(t, pod)
		for _, cs := range got.Status.ContainerStatuses {
			if cs.State.Running != nil {
				return nil
			}
			if cs.State.Terminated != nil {
				return fmt.Errorf("the writer ended: %s", cs.State.Terminated.Message)
			}
		}
		return fmt.Errorf("the writer is %s", got.Status.Phase)
	})
	// It waits for the server and claims the database before it writes.
	time.Sleep(3 * time.Second)
	return &steadyWriter{pod: pod}
}

// report stops the writer and reports what it saw through ops: the table
// to the log and to artifact under $E2E_ARTIFACTS. It fails the test when
// an acknowledged write was lost, or when an operation whose name begins
// with keeps replaced a pod.
func (w *steadyWriter) report(t *testing.T, ops []day2Op, artifact, keeps string) {
	t.Helper()
	result := w.stop(t)
	table := availabilityTable(ops, result)
	t.Logf("through the operations: %d writes acknowledged, %d failed, %d of the acknowledged lost\n%s",
		result.Acknowledged, result.Failed, result.Lost, table)
	if dir := os.Getenv("E2E_ARTIFACTS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, artifact), []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
	if result.Lost != 0 || result.Acknowledged == 0 {
		t.Errorf("%d of %d acknowledged writes lost (ackReplicas 1 holds every one)", result.Lost, result.Acknowledged)
	}
	for _, op := range ops {
		if strings.HasPrefix(op.what, keeps) && len(op.replaced) > 0 {
			t.Errorf("%s replaced the pods %v, which it should leave running", op.what, op.replaced)
		}
	}
}

// stop sends the writer SIGTERM, waits for its read-back and returns its
// result, with every outage and failure its log reported.
func (w *steadyWriter) stop(t *testing.T) bench.SteadyResult {
	t.Helper()
	run(t, kubectl[0], append(kubectl[1:], "-n", namespace, "exec", w.pod, "-c", specs.ContainerBench, "--", "sh", "-c", "kill -TERM 1")...)
	var message string
	waitUntil(t, 3*time.Minute, func() error {
		for _, cs := range getPod(t, w.pod).Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				message = cs.State.Terminated.Message
				if cs.State.Terminated.ExitCode != 0 {
					return fmt.Errorf("the writer failed (exit code %d): %s", cs.State.Terminated.ExitCode, message)
				}
				return nil
			}
		}
		return fmt.Errorf("the writer still runs")
	})
	var summary bench.SteadyResult
	if err := json.Unmarshal([]byte(message), &summary); err != nil {
		t.Fatalf("the writer's termination message %q: %v", message, err)
	}
	// The log: an {"outage": ...} line as each ended, then the whole result.
	var outages []bench.Outage
	var result *bench.SteadyResult
	logs := run(t, kubectl[0], append(kubectl[1:], "-n", namespace, "logs", w.pod, "-c", specs.ContainerBench)...)
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Outage *bench.Outage `json:"outage"`
			bench.SteadyResult
		}
		switch err := json.Unmarshal(sc.Bytes(), &line); {
		case err != nil:
		case line.Outage != nil:
			outages = append(outages, *line.Outage)
		case line.Acknowledged > 0:
			result = &line.SteadyResult
		}
	}
	if result == nil || result.Acknowledged != summary.Acknowledged || len(outages) != len(result.Outages) {
		t.Fatalf("the writer's log: %d outage lines, result %+v; its termination message %s", len(outages), result, message)
	}
	for _, o := range result.Outages {
		t.Logf("outage from %s for %s: %d writes failed (%s)", o.Start.Format("15:04:05.000"), o.Duration().Round(time.Millisecond), o.Failed, o.Error)
	}
	return *result
}

// waitUntil polls check every second until it returns nil, and fails the
// test with its last error after timeout.
func waitUntil(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	err := check()
	for deadline := time.Now().Add(timeout); err != nil; err = check() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(time.Second)
	}
}
