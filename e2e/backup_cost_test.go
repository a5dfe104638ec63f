//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// TestBackupCost measures what backups cost a running server: RedisBenchmarks
// of SET on a uring durable server holding a dataset, in turn alone
// ("quiet"), while uncompressed RedisBackups of that server run one after
// another ("none"), and while compressed ones do ("zstd", the default),
// side by side in one run. It prints each run's throughput and p99, the
// ratios to quiet, how much of the busy runs' time a backup was in flight,
// and what the backups stored. It runs with make bench-backup, not in the
// suite.
func TestBackupCost(t *testing.T) {
	if os.Getenv("E2E_BACKUP_COST") == "" {
		t.Skip("the backup cost benchmark runs with make bench-backup (E2E_BACKUP_COST=1): several minutes of RedisBenchmarks and backups")
	}
	const name = "backup-cost"
	ctx := context.Background()
	keys := envInt(t, "E2E_BACKUP_COST_KEYS", 100000)
	valueSize := envInt(t, "E2E_BACKUP_COST_VALUE", 1024)
	pairs := envInt(t, "E2E_BACKUP_COST_PAIRS", 2)
	endpoint := objectStore(t)
	createStoreSecret(t, "backup-store", storeSecretKey)
	// The test node's disks hold 2 GiB: the dataset, its AOF and a rewrite's
	// new base fit in one.
	create(t, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable},
		Benchmark: &v1alpha1.BenchmarkAccessSpec{},
		Backup:    backupSpec(endpoint, "backup-store"),
	})
	waitReady(t, name)

	// The dataset: keys of valueSize bytes, written pipelined. The
	// benchmarks write small values, so that the AOF they grow stays small
	// beside it.
	fill := fmt.Sprintf(`valkey-benchmark -a "$REDISCLI_AUTH" -t set -n %d -r %d -d %d -P 64 -c 8 -q --threads 2 >/dev/null && valkey-cli dbsize && valkey-cli info memory | grep used_memory_human`,
		keys*2, keys, valueSize)
	t.Logf("dataset: %s", strings.ReplaceAll(podExec(t, name+"-0", "", "sh", "-c", fill), "\n", ", "))

	type figures struct {
		ops, p99          []int64
		inFlight, running time.Duration
		backups           int
		stored            int64
	}
	var quiet figures
	busy := map[v1alpha1.BackupCompression]*figures{v1alpha1.CompressionNone: {}, v1alpha1.CompressionZstd: {}}
	for pair := range pairs {
		for _, label := range []string{"quiet", string(v1alpha1.CompressionNone), string(v1alpha1.CompressionZstd)} {
			compression := v1alpha1.BackupCompression(label)
			if label != "quiet" {
				updateRP(t, name, func(rp *v1alpha1.RedisPersistence) { rp.Spec.Backup.Compression = compression })
			}
			rb := &v1alpha1.RedisBenchmark{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cost-%s-%d", label, pair), Namespace: namespace},
				Spec: v1alpha1.RedisBenchmarkSpec{
					Targets: []string{name},
					Workload: v1alpha1.BenchmarkWorkload{
						Commands: []v1alpha1.BenchmarkCommand{v1alpha1.CommandSet},
						Requests: int32(envInt(t, "E2E_BACKUP_COST_REQUESTS", 200000)), Clients: 50, ValueSize: 128,
					},
					Repetitions: 3,
				},
			}
			if err := k8s.Create(ctx, rb); err != nil {
				t.Fatal(err)
			}
			var stop func() []*v1alpha1.RedisBackup
			if label != "quiet" {
				stop = backUpContinuously(t, name, rb.Name)
			}
			start := time.Now()
			waitBenchmarkComplete(t, rb, 20*time.Minute)
			took := time.Since(start)
			f := &quiet
			if label != "quiet" {
				f = busy[compression]
				taken := stop()
				f.backups += len(taken)
				f.running += took
				for _, b := range taken {
					if b.Status.StartedAt != nil && b.Status.CompletedAt != nil {
						f.inFlight += b.Status.CompletedAt.Sub(b.Status.StartedAt.Time)
					}
					f.stored = b.Status.Size
				}
			}
			for _, r := range rb.Status.Runs {
				f.ops, f.p99 = append(f.ops, r.OpsPerSecond), append(f.p99, r.P99Micros)
			}
			t.Logf("%s %d: %v ops/s, p99 %v us", label, pair, opsOf(rb), p99Of(rb))
		}
	}
	qOps, qP99 := median(quiet.ops), median(quiet.p99)
	if qOps == 0 || qP99 == 0 {
		t.Fatalf("no quiet figures: %+v", quiet)
	}
	t.Logf("backup cost, SET c=50 128 B values on uring durable holding up to %d keys of %d B (DBSIZE above), medians of %d runs each: quiet %d ops/s p99 %.2f ms",
		keys, valueSize, len(quiet.ops), qOps, float64(qP99)/1000)
	for _, c := range []v1alpha1.BackupCompression{v1alpha1.CompressionNone, v1alpha1.CompressionZstd} {
		f := busy[c]
		bOps, bP99 := median(f.ops), median(f.p99)
		t.Logf("during backups with compression %s: %d ops/s (%.2fx) p99 %.2f ms (%.2fx); %d backups of %d bytes stored, in flight %.0f%% of the time",
			c, bOps, float64(bOps)/float64(qOps), float64(bP99)/1000, float64(bP99)/float64(qP99), f.backups, f.stored, 100*f.inFlight.Seconds()/f.running.Seconds())
		if f.backups == 0 {
			t.Errorf("no backup with compression %s completed during the busy benchmarks", c)
		}
	}
}

// backUpContinuously takes RedisBackups of instance from the primary, one
// after another, until stop; stop waits for the one running and returns
// them all, Completed.
func backUpContinuously(t *testing.T, instance, prefix string) (stop func() []*v1alpha1.RedisBackup) {
	t.Helper()
	var (
		mu      sync.Mutex
		done    bool
		taken   []*v1alpha1.RedisBackup
		failure error
		wg      sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			mu.Lock()
			if done {
				mu.Unlock()
				return
			}
			mu.Unlock()
			b := &v1alpha1.RedisBackup{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: namespace},
				Spec:       v1alpha1.RedisBackupSpec{RedisPersistence: v1alpha1.LocalObjectReference{Name: instance}, Target: v1alpha1.TargetPrimary},
			}
			if err := k8s.Create(context.Background(), b); err != nil {
				failure = err
				return
			}
			for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
				if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
					failure = err
					return
				}
				if b.Status.Phase == v1alpha1.BackupCompleted {
					break
				}
				if b.Status.Phase == v1alpha1.BackupFailed || time.Now().After(deadline) {
					failure = fmt.Errorf("backup %s: %s %s (%v)", b.Name, b.Status.Phase, b.Status.Message, meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionComplete))
					return
				}
			}
			mu.Lock()
			taken = append(taken, b)
			mu.Unlock()
		}
	}()
	return func() []*v1alpha1.RedisBackup {
		mu.Lock()
		done = true
		mu.Unlock()
		wg.Wait()
		if failure != nil {
			t.Fatal(failure)
		}
		return taken
	}
}

func opsOf(rb *v1alpha1.RedisBenchmark) []int64 {
	var out []int64
	for _, r := range rb.Status.Runs {
		out = append(out, r.OpsPerSecond)
	}
	return out
}

func p99Of(rb *v1alpha1.RedisBenchmark) []int64 {
	var out []int64
	for _, r := range rb.Status.Runs {
		out = append(out, r.P99Micros)
	}
	return out
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
