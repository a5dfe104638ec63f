package controllers

import (
	"time"

	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

var (
	env        *testenv.Env
	k8s        client.Client
	reconciler *RedisPersistenceReconciler
	// serverAddrs maps "namespace/pod" to where the reconciler finds that pod's
	// server: a real server the test started.
	serverAddrs sync.Map
	// sentinelAddrs maps "namespace/pod" to where the reconciler finds that
	// Sentinel pod's Sentinel.
	sentinelAddrs sync.Map
	// backupClock is the RedisBackupReconciler's: at testNow, before every
	// backup's point, unless a test moves it.
	backupClock = clocktesting.NewFakePassiveClock(testNow)
	// verifyClock is the BackupVerifier's: the real time, so that
	// schedules run, unless a test moves it.
	verifyClock = clocktesting.NewFakePassiveClock(time.Now())
)

// TestMain runs the operator's controllers against a real kube-apiserver with
// the real garbage collector, StatefulSet controller, volume binder and
// scheduler beside it. Only the kubelet is missing: tests that need a running
// pod write the pod status a kubelet would.
func TestMain(m *testing.M) {
	// The suite waits on reconciles, servers and timers far more than it
	// computes: two processes, each with its own API server and operator.
	if code, done := testenv.RunShards(m, 2); done {
		os.Exit(code)
	}
	env = testenv.Start(m)
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(env.LogFile("operator"))))
	k8s = env.Client
	env.RunComponent("kube-controller-manager", "--secure-port=0",
		"--controllers=garbagecollector,statefulset,persistentvolume-binder,job",
		"--concurrent-gc-syncs=5")
	env.RunComponent("kube-scheduler", "--secure-port=0")

	// The operator runs as a user bound to the ClusterRole generated from
	// the RBAC markers, so a request the role does not grant fails here as
	// it would in a cluster.
	operatorConfig := env.UserConfig(operatorUser)
	// The client rate the operator gets from ctrl.GetConfigOrDie (client-go's
	// own default, 5/s, would throttle the suite's hundreds of instances).
	operatorConfig.QPS, operatorConfig.Burst = 20, 30
	if err := bindOperatorRole(); err != nil {
		panic(err)
	}
	mgr, err := ctrl.NewManager(operatorConfig, ctrl.Options{
		Scheme: scheme.Scheme,
		// The upgrade tests run operators of their own for their instances.
		Cache:                  withRedisPersistenceSelector(CacheOptions(nil), notUpgradeTestInstances),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		EventBroadcaster:       EventBroadcaster(), //nolint:staticcheck // lives as long as the process
	})
	if err != nil {
		panic(err)
	}
	reconciler = &RedisPersistenceReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Options:                 specstest.Options,
		MaxConcurrentReconciles: 4,
		Recorder:                mgr.GetEventRecorderFor("uring-redis-operator"),
		Clock:                   clocktesting.NewFakePassiveClock(testNow),
		ArchiveCheckEvery:       2 * time.Second,
		ServerAddress:           testServerAddress,
		SentinelAddress: func(pod *corev1.Pod) string {
			if addr, ok := sentinelAddrs.Load(pod.Namespace + "/" + pod.Name); ok {
				return addr.(string)
			}
			return "127.0.0.1:1"
		},
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		panic(err)
	}
	if err := (&NodeLabeler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	if err := (&RedisBackupReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Options:   specs.BackupOptions{Image: "uring-redis-operator:test"},
		Recorder:  mgr.GetEventRecorderFor("uring-redis-operator"),
		Clock:     backupClock,
	}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	if err := (&BackupScheduler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor("uring-redis-operator"),
	}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	if err := (&BackupVerifier{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Recorder:      mgr.GetEventRecorderFor("uring-redis-operator"),
		Clock:         verifyClock,
		ServerAddress: testServerAddress,
	}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	if err := (&RedisBenchmarkReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Options:                 specs.BenchmarkOptions{Image: "uring-redis-bench:test"},
		MaxConcurrentReconciles: 4,
		Recorder:                mgr.GetEventRecorderFor("uring-redis-operator"),
		Clock:                   clocktesting.NewFakePassiveClock(testNow),
	}).SetupWithManager(mgr); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()
	code := m.Run()
	cancel()
	env.Stop(code != 0)
	os.Exit(code)
}

const operatorUser = "uring-redis-operator"

// bindOperatorRole installs config/rbac/role.yaml and, as the node labeler
// runs here, config/rbac/node_labeler_role.yaml, and binds them to operatorUser.
func bindOperatorRole() error {
	ctx := context.Background()
	for _, file := range []string{"role.yaml", "node_labeler_role.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
		if err != nil {
			return err
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal(data, role); err != nil {
			return err
		}
		if err := k8s.Create(ctx, role); err != nil {
			return err
		}
		if err := k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: operatorUser}},
		}); err != nil {
			return err
		}
	}
	return nil
}

// testServerAddress is where a test runs pod's server (serverAddrs), or an
// address nothing listens on: the operator must report it.
func testServerAddress(pod *corev1.Pod) string {
	if addr, ok := serverAddrs.Load(pod.Namespace + "/" + pod.Name); ok {
		return addr.(string)
	}
	return "127.0.0.1:1"
}
