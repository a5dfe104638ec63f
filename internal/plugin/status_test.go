package plugin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

func condition(typ string, status metav1.ConditionStatus, reason, message string, since time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: *at(-since)}
}

// replicatedInstance is a replicated uring instance with an archive whose
// status says one replica's link is down, with the events the operator
// would have recorded.
func replicatedInstance(t *testing.T, ns string) {
	t.Helper()
	backup := destination()
	backup.Archive = &v1alpha1.ArchiveSpec{}
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: v1alpha1.RedisPersistenceSpec{
			Mode:     v1alpha1.ModeUring,
			Replicas: 3,
			Sentinel: &v1alpha1.SentinelSpec{},
			Uring:    &v1alpha1.UringSpec{Ack: v1alpha1.AckDurable, AckReplicas: 1},
			Backup:   backup,
			TLS:      &v1alpha1.TLSSpec{SecretName: "cache-tls"},
			Users: []v1alpha1.UserSpec{
				{Name: "app", Keys: []string{"app:*"}, Commands: []string{"+@read", "+@write"}},
				{Name: "reporting", Keys: []string{"*"}, Commands: []string{"+@read"}, Enabled: ptr.To(false)},
			},
		},
	}, v1alpha1.RedisPersistenceStatus{
		ObservedGeneration: 1,
		Phase:              v1alpha1.PhaseDegraded,
		Ready:              "2/3",
		Engine:             "uring",
		Endpoint:           "cache." + ns + ".svc:6379",
		Image:              "registry.example/redis-uring:8.1.1-uring0.9.0",
		Node:               "node-a",
		KernelVersion:      "6.12.0",
		Primary:            "cache-0",
		Replicas: []v1alpha1.ReplicaStatus{
			{Pod: "cache-0", Role: v1alpha1.RolePrimary, Offset: 90210, LinkUp: true},
			{Pod: "cache-1", Role: v1alpha1.RoleReplica, Offset: 90100, Lag: 110, LinkUp: true},
			{Pod: "cache-2", Role: v1alpha1.RoleReplica, Offset: 70000, Lag: 20210},
		},
		Storage: &v1alpha1.StorageStatus{
			Filesystem: "ext4", WriteCache: "write back",
			FsyncP50: dur(410 * time.Microsecond), FsyncP99: dur(1890 * time.Microsecond),
			Samples: 2400, MeasuredAt: at(-3 * time.Hour),
		},
		TLS:            &v1alpha1.TLSStatus{SecretName: "cache-tls", NotAfter: at(89 * 24 * time.Hour)},
		Recommendation: "uring ack: durable acknowledges at most about 122000 writes/s with 50 clients at fsync p50 410µs",
		LastBackup: &v1alpha1.LastBackupStatus{
			Name: "cache-202611281100", Point: *at(-time.Hour), CompletedAt: at(-59 * time.Minute),
			Duration: dur(14 * time.Second), Size: 1834551,
		},
		Archive: &v1alpha1.ArchiveStatus{
			FirstRecoverableTime: at(-26 * time.Hour), LastArchivedTime: at(-30 * time.Second),
			Timelines: 2, CheckedAt: at(-20 * time.Second),
		},
		Switchover: &v1alpha1.SwitchoverStatus{To: "cache-2", RequestedAt: "2026-11-28T11:50:00Z", Result: v1alpha1.SwitchoverRefused,
			Reason: "ReplicaNotReplicating", Message: "cache-2's link to the primary cache-0 is down: it does not hold the primary's writes",
			From: "cache-0", FinishedAt: *at(-10 * time.Minute)},
		Conditions: []metav1.Condition{
			condition(v1alpha1.ConditionReady, metav1.ConditionTrue, "Ready", "the server serves with mode uring", time.Hour),
			condition(v1alpha1.ConditionUringActive, metav1.ConditionTrue, "Active", "the append-only file is written through io_uring", time.Hour),
			condition(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "Stable", "the server has not restarted in the last 10 minutes", time.Hour),
			condition(v1alpha1.ConditionUsersReady, metav1.ConditionTrue, "Applied", "every running server has the users", time.Hour),
			condition(v1alpha1.ConditionReplicating, metav1.ConditionFalse, "ReplicaLinkDown", "cache-2's link to the primary cache-0 is down", 4*time.Minute),
			condition(v1alpha1.ConditionConfigApplied, metav1.ConditionUnknown, "ServerUnreachable", "cache-2 does not answer", 2*time.Minute),
		},
	})
	ctx := context.Background()
	involved := corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RedisPersistence", Namespace: ns, Name: "cache"}
	for _, e := range []corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "cache.link"}, Type: corev1.EventTypeWarning, Reason: "ReplicaLinkDown",
			Message: "cache-2's link to the primary cache-0 is down", Count: 3, LastTimestamp: *at(-2 * time.Minute), FirstTimestamp: *at(-4 * time.Minute)},
		{ObjectMeta: metav1.ObjectMeta{Name: "cache.unreachable"}, Type: corev1.EventTypeWarning, Reason: "ServerUnreachable",
			Message: "cache-2 does not answer", Count: 1, LastTimestamp: *at(-time.Minute), FirstTimestamp: *at(-time.Minute)},
		// Not shown: an hour and more old, Normal, or another object's.
		{ObjectMeta: metav1.ObjectMeta{Name: "cache.old"}, Type: corev1.EventTypeWarning, Reason: "BackupFailed",
			Message: "an old failure", Count: 1, LastTimestamp: *at(-2 * time.Hour), FirstTimestamp: *at(-2 * time.Hour)},
		{ObjectMeta: metav1.ObjectMeta{Name: "cache.normal"}, Type: corev1.EventTypeNormal, Reason: "Restoring",
			Message: "a normal event", Count: 1, LastTimestamp: *at(-time.Minute), FirstTimestamp: *at(-time.Minute)},
	} {
		e.Namespace = ns
		e.InvolvedObject = involved
		if err := k8s.Create(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	other := corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other.link"}, Type: corev1.EventTypeWarning, Reason: "ReplicaLinkDown",
		Message: "another instance's event", Count: 1, LastTimestamp: *at(-time.Minute), FirstTimestamp: *at(-time.Minute),
		InvolvedObject: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RedisPersistence", Namespace: ns, Name: "cache-other"}}
	if err := k8s.Create(ctx, &other); err != nil {
		t.Fatal(err)
	}
}

func TestStatusReplicated(t *testing.T) {
	ns := namespace(t)
	replicatedInstance(t, ns)
	stdout, stderr, err := run(t, "status", "cache", "-n", ns)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, stderr)
	}
	golden(t, "status-replicated.golden", strings.ReplaceAll(stdout, ns, "NAMESPACE"))
}

func TestStatusJSON(t *testing.T) {
	ns := namespace(t)
	replicatedInstance(t, ns)
	stdout, stderr, err := run(t, "status", "cache", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatalf("status -o json: %v\n%s", err, stderr)
	}
	var got Status
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if got.Name != "cache" || got.Namespace != ns || got.Topology != "replicated" || got.Mode != v1alpha1.ModeUring ||
		got.Durability != "ack durable, ackReplicas 1" || got.Engine != "uring" || got.Primary != "cache-0" || !got.Backup {
		t.Errorf("instance fields: %+v", got)
	}
	if diff := cmp.Diff([]User{{Name: "app", Enabled: true}, {Name: "reporting", Enabled: false}}, got.Users); diff != "" || got.UsersApplied != metav1.ConditionTrue {
		t.Errorf("users (-want +got):\n%s, applied %q", diff, got.UsersApplied)
	}
	if got.TLS == nil || got.TLS.SecretName != "cache-tls" || !got.TLS.NotAfter.Equal(at(89*24*time.Hour)) {
		t.Errorf("tls = %+v", got.TLS)
	}
	if got.Uring == nil || !got.Uring.Active {
		t.Errorf("uring = %+v, want active", got.Uring)
	}
	if len(got.Servers) != 3 || got.Servers[2].Pod != "cache-2" || got.Servers[2].Lag != 20210 || got.Servers[2].LinkUp {
		t.Errorf("servers = %+v", got.Servers)
	}
	if got.Storage == nil || got.Storage.FsyncP50.Duration != 410*time.Microsecond || got.Storage.FsyncP99.Duration != 1890*time.Microsecond {
		t.Errorf("storage = %+v", got.Storage)
	}
	if got.LastBackup == nil || got.LastBackup.Name != "cache-202611281100" || got.LastBackup.Size != 1834551 {
		t.Errorf("lastBackup = %+v", got.LastBackup)
	}
	if got.Archive == nil || !got.Archive.FirstRecoverableTime.Equal(at(-26*time.Hour)) || !got.Archive.LastArchivedTime.Equal(at(-30*time.Second)) {
		t.Errorf("archive = %+v", got.Archive)
	}
	var types []string
	for _, c := range got.Conditions {
		types = append(types, c.Type+"="+string(c.Status))
	}
	if diff := cmp.Diff([]string{"Replicating=False", "ConfigApplied=Unknown"}, types); diff != "" {
		t.Errorf("conditions that are not healthy (-want +got):\n%s", diff)
	}
	var reasons []string
	for _, e := range got.Events {
		reasons = append(reasons, e.Reason)
	}
	if diff := cmp.Diff([]string{"ServerUnreachable", "ReplicaLinkDown"}, reasons); diff != "" {
		t.Errorf("recent Warning events, newest first (-want +got):\n%s", diff)
	}

	stdout, _, err = run(t, "status", "cache", "-n", ns, "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML Status
	if err := yaml.Unmarshal([]byte(stdout), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, fromYAML); diff != "" {
		t.Errorf("-o yaml says other than -o json (-json +yaml):\n%s", diff)
	}
}

func TestStatusFallbackAndCluster(t *testing.T) {
	ns := namespace(t)
	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "single"},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Uring: &v1alpha1.UringSpec{Ack: v1alpha1.AckFast}},
	}, v1alpha1.RedisPersistenceStatus{
		ObservedGeneration: 1,
		Phase:              v1alpha1.PhaseDegraded,
		Ready:              "1/1",
		Engine:             "posix",
		Node:               "node-b",
		Storage:            &v1alpha1.StorageStatus{Filesystem: "ext4", ProbeError: "the volume is read-only"},
		Conditions: []metav1.Condition{
			condition(v1alpha1.ConditionUringActive, metav1.ConditionFalse, "FellBackToPosix",
				"io_uring is unavailable, the server runs the posix engine: io_uring_queue_init: Operation not permitted (seccomp?)", 10*time.Minute),
		},
	})
	stdout, stderr, err := run(t, "status", "single", "-n", ns)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, stderr)
	}
	golden(t, "status-fallback.golden", strings.ReplaceAll(stdout, ns, "NAMESPACE"))

	create(t, &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shards"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways},
			Cluster: &v1alpha1.ClusterSpec{Shards: 3, ReplicasPerShard: ptr.To[int32](1)}},
	}, v1alpha1.RedisPersistenceStatus{
		ObservedGeneration: 1,
		Phase:              v1alpha1.PhaseReady,
		Ready:              "6/6",
		Engine:             "posix",
		Shards: []v1alpha1.ShardStatus{
			{Index: 0, Slots: "0-5460", SlotCount: 5461, Primary: "shards-s0-0", Servers: []v1alpha1.ReplicaStatus{
				{Pod: "shards-s0-0", Role: v1alpha1.RolePrimary, Offset: 500, LinkUp: true},
				{Pod: "shards-s0-1", Role: v1alpha1.RoleReplica, Offset: 500, LinkUp: true}}},
			{Index: 1, Slots: "5461-10922", SlotCount: 5462, Primary: "shards-s1-1", Servers: []v1alpha1.ReplicaStatus{
				{Pod: "shards-s1-0", Role: v1alpha1.RoleReplica, Offset: 480, Lag: 20, LinkUp: true},
				{Pod: "shards-s1-1", Role: v1alpha1.RolePrimary, Offset: 500, LinkUp: true}}},
			{Index: 2, Slots: "10923-16383", SlotCount: 5461, Primary: "shards-s2-0"},
		},
		Conditions: []metav1.Condition{
			condition(v1alpha1.ConditionClusterHealthy, metav1.ConditionTrue, "Healthy", "every server reports cluster_state:ok", time.Hour),
			condition(v1alpha1.ConditionSlotsCovered, metav1.ConditionTrue, "Covered", "16384 slots served", time.Hour),
		},
	})
	stdout, stderr, err = run(t, "status", "shards", "-n", ns)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, stderr)
	}
	golden(t, "status-cluster.golden", strings.ReplaceAll(stdout, ns, "NAMESPACE"))
}

func TestStatusRefusesWhatIsNotThere(t *testing.T) {
	ns := namespace(t)
	for _, tc := range []struct {
		desc    string
		args    []string
		wantErr string
	}{
		{"unknown instance", []string{"status", "nope", "-n", ns}, `no RedisPersistence "nope" in namespace "` + ns + `"`},
		{"no name", []string{"status", "-n", ns}, "accepts 1 arg(s), received 0"},
		{"unknown output", []string{"status", "nope", "-n", ns, "-o", "wide"}, "-o wide: the outputs are json and yaml"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			stdout, _, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if stdout != "" {
				t.Errorf("printed %q on failure", stdout)
			}
		})
	}
}
