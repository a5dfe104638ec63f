package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

var specOfMode = map[v1alpha1.PersistenceMode]v1alpha1.RedisPersistenceSpec{
	v1alpha1.ModeNone:  {Mode: v1alpha1.ModeNone, Storage: &v1alpha1.StorageSpec{}},
	v1alpha1.ModeRDB:   {Mode: v1alpha1.ModeRDB, RDB: &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 3600, Changes: 1}}}},
	v1alpha1.ModeAOF:   {Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways}},
	v1alpha1.ModeUring: {Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable}},
}

var everyModeName = []v1alpha1.PersistenceMode{v1alpha1.ModeNone, v1alpha1.ModeRDB, v1alpha1.ModeAOF, v1alpha1.ModeUring}

func TestModeChangeNeedsServer(t *testing.T) {
	want := map[string]bool{
		"none>rdb": true, "none>aof": true, "none>uring": true,
		"rdb>none": true, "rdb>aof": true, "rdb>uring": true,
		"aof>none": true, "aof>rdb": true, "aof>uring": false,
		"uring>none": true, "uring>rdb": true, "uring>aof": false,
	}
	for _, from := range everyModeName {
		for _, to := range everyModeName {
			key := string(from) + ">" + string(to)
			if got := (modeChange{from, to}).needsServer(); got != want[key] {
				t.Errorf("%s: needsServer %v", key, got)
			}
		}
	}
	if (modeChange{"", v1alpha1.ModeAOF}).needsServer() {
		t.Error("a new instance has nothing to carry")
	}
}

func TestAppliedMode(t *testing.T) {
	rp := specstest.NewRedisPersistence(specOfMode[v1alpha1.ModeRDB])
	if got := appliedMode(specs.ConfigMap(rp, specs.RenderConfig(rp))); got != v1alpha1.ModeRDB {
		t.Errorf("annotated ConfigMap: %q", got)
	}
	// A ConfigMap an earlier operator rendered has the mode in its header only.
	old := &corev1.ConfigMap{Data: map[string]string{"redis.conf": "# Rendered by uring-redis-operator from RedisPersistence apps/cache (mode uring); do not edit.\nport 6379\n"}}
	if got := appliedMode(old); got != v1alpha1.ModeUring {
		t.Errorf("header: %q", got)
	}
	if got := appliedMode(nil); got != "" {
		t.Errorf("no ConfigMap: %q", got)
	}
}

// Runtime options change the ConfigMap, never the pod template; what the
// server reads only at start changes the template, so the pod restarts.
func TestRuntimeOptionsKeepThePodTemplate(t *testing.T) {
	template := func(rp *v1alpha1.RedisPersistence) string {
		out, err := yaml.Marshal(specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, specstest.Password(rp))).Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	base := specstest.NewRedisPersistence(specstest.GoldenCases["uring-durable"])
	for desc, mutate := range map[string]func(*v1alpha1.RedisPersistenceSpec){
		"queue depth": func(s *v1alpha1.RedisPersistenceSpec) { s.Uring.QueueDepth = 1024 },
		"io-wq bound": func(s *v1alpha1.RedisPersistenceSpec) { s.Uring.MaxWorkers = 8 },
		"ack mode":    func(s *v1alpha1.RedisPersistenceSpec) { s.Uring.Ack = v1alpha1.AckFast },
		"replies":     func(s *v1alpha1.RedisPersistenceSpec) { s.Uring.Replies = true },
		"sqpoll": func(s *v1alpha1.RedisPersistenceSpec) {
			s.Uring.SQPoll = &v1alpha1.SQPollSpec{Enabled: true, IdleMillis: ptr.To[int32](20)}
		},
		"save rules": func(s *v1alpha1.RedisPersistenceSpec) {
			s.RDB = &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 900, Changes: 1}}}
		},
	} {
		changed := base.DeepCopy()
		mutate(&changed.Spec)
		if template(changed) != template(base) {
			t.Errorf("%s: the pod template changed; the server takes it at runtime", desc)
		}
		if specs.RenderConfig(changed) == specs.RenderConfig(base) || specs.RuntimeConfigHash(changed) == specs.RuntimeConfigHash(base) {
			t.Errorf("%s: the ConfigMap or the runtime hash did not change; a restart would lose it", desc)
		}
	}
	aof := specstest.NewRedisPersistence(specstest.GoldenCases["aof-always"])
	everysec := aof.DeepCopy()
	everysec.Spec.AOF.Fsync = v1alpha1.FsyncEverySec
	if template(everysec) != template(aof) {
		t.Error("appendfsync is a runtime option")
	}
	withoutAuth := base.DeepCopy()
	withoutAuth.Spec.Auth = &v1alpha1.AuthSpec{Disabled: true}
	if specs.ConfigHash(withoutAuth) == specs.ConfigHash(base) {
		t.Error("auth is read at start: turning it off must restart the pod")
	}
}

func newClient(addr, password string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Password: password, DisableIdentity: true, MaxRetries: -1})
}

// waitLoaded waits until a restarted server has loaded its files.
func waitLoaded(t *testing.T, c *redis.Client) {
	t.Helper()
	eventually(t, 30*time.Second, func() error { return c.Ping(context.Background()).Err() })
}

func writeKeys(t *testing.T, c *redis.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		if err := c.Set(context.Background(), fmt.Sprintf("%s:%d", prefix, i), fmt.Sprintf("value-%d", i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func missingKeys(t *testing.T, c *redis.Client, prefix string, n int) int {
	t.Helper()
	missing := 0
	for i := range n {
		v, err := c.Get(context.Background(), fmt.Sprintf("%s:%d", prefix, i)).Result()
		if errors.Is(err, redis.Nil) || v != fmt.Sprintf("value-%d", i) {
			missing++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return missing
}

// TestModeChangesCarryTheData runs every mode change on the real server the
// way the operator does it: the server of the old mode holds data, the
// operator prepares it live, more data is written, the server stops as a
// kubelet stops it, and a server of the new mode starts on the same files.
// Everything written before the change must be there; what was written after
// it too, except with mode none, which by design restarts from the dataset it
// had when it became none.
func TestModeChangesCarryTheData(t *testing.T) {
	for _, from := range everyModeName {
		for _, to := range everyModeName {
			if from == to {
				continue
			}
			t.Run(string(from)+"-to-"+string(to), func(t *testing.T) {
				dir := t.TempDir()
				old := specstest.NewRedisPersistence(specOfMode[from])
				next := specstest.NewRedisPersistence(specOfMode[to])
				old.UID = types.UID("uid-" + string(from) + "-" + string(to))
				next.UID = old.UID

				server := testenv.RunServer(t, dir, withPassword(specs.RenderConfig(old), ""))
				c := newClient(server.Addr, "")
				defer func() { _ = c.Close() }()
				writeKeys(t, c, "before", 500)

				r := &RedisPersistenceReconciler{}
				change := modeChange{from, to}
				if change.needsServer() {
					var progress string
					err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (done bool, err error) {
						done, progress, err = r.prepareModeChange(ctx, server.Addr, serverCredentials{}, next, change)
						return done, err
					})
					if wait.Interrupted(err) {
						t.Fatalf("not prepared after 60s: %s", progress)
					} else if err != nil {
						t.Fatal(err)
					}
				}
				writeKeys(t, c, "after", 100)
				server.Stop(t)

				restarted := testenv.RunServer(t, dir, withPassword(specs.RenderConfig(next), ""))
				c2 := newClient(restarted.Addr, "")
				defer func() { _ = c2.Close() }()
				waitLoaded(t, c2)
				if n := missingKeys(t, c2, "before", 500); n != 0 {
					t.Fatalf("%d of 500 keys written before the change are missing in mode %s", n, to)
				}
				if n := missingKeys(t, c2, "after", 100); to != v1alpha1.ModeNone && n != 0 {
					t.Fatalf("%d of 100 keys written after the change are missing in mode %s", n, to)
				}
				// The next restart of a persistent mode keeps what is written now.
				if to == v1alpha1.ModeNone {
					return
				}
				writeKeys(t, c2, "later", 100)
				restarted.Stop(t)
				again := testenv.RunServer(t, dir, withPassword(specs.RenderConfig(next), ""))
				c3 := newClient(again.Addr, "")
				defer func() { _ = c3.Close() }()
				waitLoaded(t, c3)
				if n := missingKeys(t, c3, "before", 500) + missingKeys(t, c3, "later", 100); n != 0 {
					t.Fatalf("%d keys missing after a second restart in mode %s", n, to)
				}
			})
		}
	}
}

// TestLiveTuningAndModeChangeThroughTheOperator drives both through the
// reconciler against a real server: a queue depth change is set with CONFIG
// SET and leaves the StatefulSet alone; a change from uring to rdb snapshots
// the data before the ConfigMap says rdb.
func TestLiveTuningAndModeChangeThroughTheOperator(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "tuned", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, QueueDepth: 256}})
	waitCondition(t, ns, "tuned", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	server := testenv.StartServer(t, renderedConfig(t, ns, "tuned"))
	serverAddrs.Store(ns+"/tuned-0", server)
	actAsKubelet(t, ns, "tuned-0", "ext4")
	rp := waitCondition(t, ns, "tuned", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	if rp.Status.AppliedConfigHash == "" {
		t.Fatal("status.appliedConfigHash is empty on a Ready server")
	}
	c := newClient(server, instancePassword(t, ns, "tuned"))
	defer func() { _ = c.Close() }()

	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "tuned"); err != nil {
		t.Fatal(err)
	}
	template := sts.Spec.Template.DeepCopy()
	rp = updateRP(t, ns, "tuned", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Uring.QueueDepth = 1024
		rp.Spec.Uring.Replies = true
		rp.Spec.Uring.BatchesInFlight = 2
		rp.Spec.Uring.DirectWrites = ptr.To(false)
		rp.Spec.Config = map[string]v1alpha1.ServerOptionValue{"maxmemory-policy": "allkeys-lru"}
	})
	eventually(t, 30*time.Second, func() error {
		for option, want := range map[string]string{"aof-uring-queue-depth": "1024", "io-uring-replies": "yes", "maxmemory-policy": "allkeys-lru",
			"aof-uring-fsyncs-in-flight": "2", "aof-uring-direct-writes": "no"} {
			got, err := c.ConfigGet(context.Background(), option).Result()
			if err != nil {
				return err
			}
			if got[option] != want {
				return fmt.Errorf("%s %v on the server, want %s", option, got, want)
			}
		}
		return nil
	})
	cm := &corev1.ConfigMap{}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rp, ns, "tuned"); err != nil {
			return err
		}
		if err := get(t, cm, ns, "tuned-config"); err != nil {
			return err
		}
		if want := cm.Annotations[specs.AnnotationRuntimeConfigHash]; rp.Status.AppliedConfigHash != want {
			return fmt.Errorf("appliedConfigHash %q, the ConfigMap's %q", rp.Status.AppliedConfigHash, want)
		}
		return nil
	})
	if !strings.Contains(cm.Data["redis.conf"], "aof-uring-queue-depth 1024\n") || !strings.Contains(cm.Data["redis.conf"], "io-uring-replies yes\n") ||
		!strings.Contains(cm.Data["redis.conf"], "maxmemory-policy allkeys-lru\n") ||
		!strings.Contains(cm.Data["redis.conf"], "aof-uring-fsyncs-in-flight 2\n") || !strings.Contains(cm.Data["redis.conf"], "aof-uring-direct-writes no\n") {
		t.Error("the ConfigMap lacks the new queue depth, replies engine, batches in flight, direct writes or eviction policy: a restart would lose them")
	}
	// The replies now go through the server's io_uring ring (the test's
	// server runs without a seccomp filter, so the ring starts).
	stats, err := c.InfoMap(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if s := stats["Stats"]; s["io_uring_replies"] != "1" || s["io_uring_replies_sends"] == "0" {
		t.Errorf("spec.uring.replies: the server does not send its replies through io_uring: %v", s)
	}
	if err := get(t, sts, ns, "tuned"); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(sts.Spec.Template, *template) {
		t.Errorf("a queue depth or spec.config change changed the pod template, the pod would restart: %s", cmp.Diff(*template, sts.Spec.Template))
	}

	// uring -> rdb: the server snapshots and turns its AOF off before the
	// ConfigMap says rdb.
	writeKeys(t, c, "carried", 200)
	rp = updateRP(t, ns, "tuned", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Mode, rp.Spec.Uring = v1alpha1.ModeRDB, nil
		rp.Spec.RDB = &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 3600, Changes: 1}}}
	})
	eventually(t, 30*time.Second, func() error {
		if err := get(t, cm, ns, "tuned-config"); err != nil {
			return err
		}
		if cm.Annotations[specs.AnnotationMode] != string(v1alpha1.ModeRDB) {
			return fmt.Errorf("the ConfigMap is still in mode %s", cm.Annotations[specs.AnnotationMode])
		}
		return nil
	})
	info, err := c.InfoMap(context.Background(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	if p := info["Persistence"]; p["aof_enabled"] != "0" || p["rdb_last_bgsave_status"] != "ok" || p["rdb_saves"] == "0" {
		t.Errorf("the server did not snapshot and leave AOF before the ConfigMap changed: %v", p)
	}
}

// A mode change whose server cannot be asked keeps the old configuration and says why.
func TestModeChangeWaitsForTheServer(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "unreachable", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF})
	waitCondition(t, ns, "unreachable", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	actAsKubelet(t, ns, "unreachable-0", "ext4") // ready, but no server behind it
	updateRP(t, ns, "unreachable", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Mode, rp.Spec.AOF = v1alpha1.ModeRDB, nil
		rp.Spec.RDB = &v1alpha1.RDBSpec{Save: []v1alpha1.SaveRule{{Seconds: 60, Changes: 1}}}
	})
	got := waitCondition(t, ns, "unreachable", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonModeChangeBlocked)
	msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message
	if !strings.Contains(msg, "changing mode from aof to rdb") || strings.Contains(msg, "127.0.0.1") {
		t.Errorf("Ready message %q: want the change named and no address", msg)
	}
	if mode := appliedModeOf(t, ns, "unreachable"); mode != v1alpha1.ModeAOF {
		t.Errorf("the ConfigMap moved to mode %s without the server's snapshot", mode)
	}
	if !strings.Contains(renderedConfig(t, ns, "unreachable"), "appendonly yes\n") {
		t.Error("the ConfigMap lost appendonly yes before the server switched")
	}
}

// A spec change that cannot reach the running server is said, not only
// retried: ConfigApplied goes False, the phase Degraded, while Ready stays
// True (the server serves, with the options it had); the server that
// answers again gets the change without a restart.
func TestSpecChangeWaitsForAnUnreachableServer(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "away", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncEverySec}})
	waitCondition(t, ns, "away", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	server := testenv.StartServer(t, renderedConfig(t, ns, "away"))
	serverAddrs.Store(ns+"/away-0", server)
	actAsKubelet(t, ns, "away-0", "ext4")
	waitCondition(t, ns, "away", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	waitCondition(t, ns, "away", v1alpha1.ConditionConfigApplied, metav1.ConditionTrue, ReasonConfigApplied)

	serverAddrs.Store(ns+"/away-0", "127.0.0.1:1") // the pod stays Ready; nothing answers
	updateRP(t, ns, "away", func(rp *v1alpha1.RedisPersistence) { rp.Spec.AOF.Fsync = v1alpha1.FsyncAlways })
	rp := waitCondition(t, ns, "away", v1alpha1.ConditionConfigApplied, metav1.ConditionFalse, ReasonServerUnreachable)
	if !meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionReady) || rp.Status.Phase != v1alpha1.PhaseDegraded {
		t.Errorf("the server serves with its old options: want Ready True and phase Degraded, got %+v, phase %s", rp.Status.Conditions, rp.Status.Phase)
	}
	if msg := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionConfigApplied).Message; !strings.Contains(msg, "connection refused") {
		t.Errorf("ConfigApplied's message %q does not say why", msg)
	}
	if rp.Status.AppliedConfigHash == specs.RuntimeConfigHash(rp) {
		t.Error("status.appliedConfigHash claims options no server took")
	}

	serverAddrs.Store(ns+"/away-0", server)
	waitCondition(t, ns, "away", v1alpha1.ConditionConfigApplied, metav1.ConditionTrue, ReasonConfigApplied)
	// The reconcile that applied the options may still read the failed INFO
	// (cached a second); the next one reads the server again.
	eventually(t, 30*time.Second, func() error {
		if phase := fetchRP(t, ns, "away").Status.Phase; phase != v1alpha1.PhaseReady {
			return fmt.Errorf("phase %s once the server took the change", phase)
		}
		return nil
	})
	c := newClient(server, instancePassword(t, ns, "away"))
	defer func() { _ = c.Close() }()
	if got, err := c.ConfigGet(context.Background(), "appendfsync").Result(); err != nil || got["appendfsync"] != "always" {
		t.Errorf("appendfsync %v (%v) on the server, want always", got, err)
	}

	// An option the server refuses is its own error, and no retry fixes it.
	updateRP(t, ns, "away", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Config = map[string]v1alpha1.ServerOptionValue{"maxmemory-policy": "keep-everything"}
	})
	rp = waitCondition(t, ns, "away", v1alpha1.ConditionConfigApplied, metav1.ConditionFalse, ReasonConfigRefused)
	if msg := meta.FindStatusCondition(rp.Status.Conditions, v1alpha1.ConditionConfigApplied).Message; !strings.Contains(msg, "maxmemory-policy") {
		t.Errorf("ConfigApplied's message %q does not name the option", msg)
	}
	if rp.Status.Phase != v1alpha1.PhaseDegraded {
		t.Errorf("phase %s with a refused option, want Degraded", rp.Status.Phase)
	}
}

func appliedModeOf(t *testing.T, ns, name string) v1alpha1.PersistenceMode {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := get(t, cm, ns, name+"-config"); err != nil {
		t.Fatal(err)
	}
	return appliedMode(cm)
}

// serverAddress is the address of the real server a test put behind a pod.
func serverAddress(t *testing.T, ns, pod string) string {
	t.Helper()
	addr, ok := serverAddrs.Load(ns + "/" + pod)
	if !ok {
		t.Fatalf("no server runs behind %s/%s", ns, pod)
	}
	return addr.(string)
}

// spec.config: options the server takes live are runtime options (CONFIG
// SET, no restart); the ones it reads only at start restart it.
func TestServerOptionsLiveOrAtStart(t *testing.T) {
	template := func(rp *v1alpha1.RedisPersistence) string {
		out, err := yaml.Marshal(specs.StatefulSet(rp, specstest.Options, specs.NewPodInputs(rp, "")).Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	base := specstest.NewRedisPersistence(specstest.GoldenCases["aof-config"])
	for desc, tc := range map[string]struct {
		key, value string
		restart    bool
	}{
		"eviction policy": {"maxmemory-policy", "volatile-lru", false},
		"new live option": {"hz", "50", false},
		"maxmemory":       {"maxmemory", "512mb", false},
		"databases":       {"databases", "32", true},
		"io-threads":      {"io-threads", "4", true},
	} {
		changed := base.DeepCopy()
		changed.Spec.Config[tc.key] = v1alpha1.ServerOptionValue(tc.value)
		if restarts := template(changed) != template(base); restarts != tc.restart {
			t.Errorf("%s: the pod template changed: %v, want %v", desc, restarts, tc.restart)
		}
		if runtimeChanged := specs.RuntimeConfigHash(changed) != specs.RuntimeConfigHash(base); runtimeChanged == tc.restart {
			t.Errorf("%s: the runtime hash changed: %v, want %v", desc, runtimeChanged, !tc.restart)
		}
		if !strings.Contains(specs.RenderConfig(changed), "\n"+tc.key+" ") {
			t.Errorf("%s: redis.conf lacks %s: a restart would lose it", desc, tc.key)
		}
	}
}

// A memory limit sets maxmemory to 70% of it unless spec.config sets it.
func TestMaxmemoryFollowsTheMemoryLimit(t *testing.T) {
	rp := specstest.NewRedisPersistence(v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF,
		Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}})
	if !strings.Contains(specs.RenderConfig(rp), "\nmaxmemory 751619276\n") {
		t.Errorf("a 1Gi limit: want maxmemory 751619276 (70%%):\n%s", specs.RenderConfig(rp))
	}
	rp.Spec.Config = map[string]v1alpha1.ServerOptionValue{"maxmemory": "900mb"}
	if conf := specs.RenderConfig(rp); !strings.Contains(conf, "\nmaxmemory 900mb\n") || strings.Contains(conf, "751619276") {
		t.Errorf("spec.config.maxmemory must win over the default:\n%s", conf)
	}
	rp.Spec.Config, rp.Spec.Resources = nil, &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	if strings.Contains(specs.RenderConfig(rp), "maxmemory") {
		t.Error("a request is no limit: no maxmemory")
	}
}

func TestConfigValueQuoting(t *testing.T) {
	for in, want := range map[string]string{
		"allkeys-lru": "allkeys-lru", "2gb": "2gb", "": `""`, "pubsub 32mb 8mb 60": `"pubsub 32mb 8mb 60"`,
		`a"b\c`: `"a\"b\\c"`, "x\ny": `"x\ny"`,
	} {
		if got := specs.ConfigValue(in); got != want {
			t.Errorf("configValue(%q) = %s, want %s", in, got, want)
		}
	}
}
