package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	env := testenv.Start(m)
	k8s = env.Client
	code := m.Run()
	env.Stop(code != 0)
	os.Exit(code)
}

var counter int

// newObject builds an unstructured RedisPersistence so tests can send what a
// typed client could not express (wrong types, unknown fields).
func newObject(spec map[string]any) *unstructured.Unstructured {
	counter++
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(testenv.RedisPersistenceGVK)
	u.SetName(fmt.Sprintf("rp-%d", counter))
	u.SetNamespace("default")
	return u
}

func create(spec map[string]any) error {
	return k8s.Create(context.Background(), newObject(spec), client.FieldValidation("Strict"))
}

func uring(fields map[string]any) map[string]any {
	return map[string]any{"mode": "uring", "uring": fields}
}

func TestInvalidSpecsAreRejected(t *testing.T) {
	tolerations := make([]any, 33)
	for i := range tolerations {
		tolerations[i] = map[string]any{"key": fmt.Sprintf("k%d", i), "operator": "Exists"}
	}
	peers := make([]any, 17)
	for i := range peers {
		peers[i] = map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": fmt.Sprintf("client-%d", i)}}}
	}
	saves := make([]any, 9)
	for i := range saves {
		saves[i] = map[string]any{"seconds": i + 1, "changes": 1}
	}
	cases := []struct {
		desc    string
		spec    map[string]any
		wantErr string
	}{
		{"mode is required", map[string]any{}, "spec.mode: Required value"},
		{"unknown mode", map[string]any{"mode": "bogus"}, `spec.mode: Unsupported value: "bogus"`},
		{"aof block with uring", map[string]any{"mode": "uring", "aof": map[string]any{"fsync": "always"}}, "spec.aof is only valid with mode: aof"},
		{"uring block with aof", map[string]any{"mode": "aof", "uring": map[string]any{}}, "spec.uring is only valid with mode: uring"},
		{"rdb block with none", map[string]any{"mode": "none", "rdb": map[string]any{"save": []any{map[string]any{"seconds": 60, "changes": 1}}}}, "spec.rdb snapshots need a persistent mode"},
		{"rdb mode without rules", map[string]any{"mode": "rdb"}, "mode: rdb needs spec.rdb.save rules"},
		{"empty save list", map[string]any{"mode": "rdb", "rdb": map[string]any{"save": []any{}}}, "spec.rdb.save: Invalid value: 0"},
		{"save seconds zero", map[string]any{"mode": "rdb", "rdb": map[string]any{"save": []any{map[string]any{"seconds": 0, "changes": 1}}}}, "spec.rdb.save[0].seconds: Invalid value: 0"},
		{"save changes zero", map[string]any{"mode": "rdb", "rdb": map[string]any{"save": []any{map[string]any{"seconds": 60, "changes": 0}}}}, "spec.rdb.save[0].changes: Invalid value: 0"},
		{"too many save rules", map[string]any{"mode": "rdb", "rdb": map[string]any{"save": saves}}, "spec.rdb.save: Too many: 9: must have at most 8 items"},
		{"unknown fsync policy", map[string]any{"mode": "aof", "aof": map[string]any{"fsync": "sometimes"}}, `spec.aof.fsync: Unsupported value: "sometimes"`},
		{"unknown ack", uring(map[string]any{"ack": "eventually"}), `spec.uring.ack: Unsupported value: "eventually"`},
		{"unknown update strategy", map[string]any{"mode": "aof", "replicas": 2, "updateStrategy": "recreate"}, `spec.updateStrategy: Unsupported value: "recreate"`},
		{"queue depth not a power of two", uring(map[string]any{"queueDepth": 100}), "uring.queueDepth must be a power of two between 8 and 32768"},
		{"queue depth too small", uring(map[string]any{"queueDepth": 4}), "spec.uring.queueDepth: Invalid value: 4: spec.uring.queueDepth in body should be greater than or equal to 8"},
		{"queue depth too large", uring(map[string]any{"queueDepth": 65536}), "spec.uring.queueDepth: Invalid value: 65536: spec.uring.queueDepth in body should be less than or equal to 32768"},
		{"queue depth as string", uring(map[string]any{"queueDepth": "256"}), `spec.uring.queueDepth: Invalid value: "string"`},
		{"no io-wq workers", uring(map[string]any{"maxWorkers": 0}), "spec.uring.maxWorkers in body should be greater than or equal to 1"},
		{"too many io-wq workers", uring(map[string]any{"maxWorkers": 65}), "spec.uring.maxWorkers in body should be less than or equal to 64"},
		{"in-flight bound with durable ack", uring(map[string]any{"maxInFlight": "4Mi"}), "uring.maxInFlight bounds the loss window of ack: fast"},
		{"in-flight bound too small", uring(map[string]any{"ack": "fast", "maxInFlight": "1Ki"}), "uring.maxInFlight must be at least 64Ki"},
		{"in-flight bound too large", uring(map[string]any{"ack": "fast", "maxInFlight": "2Gi"}), "uring.maxInFlight must be at most 1Gi"},
		{"sqpoll idle without sqpoll", uring(map[string]any{"sqpoll": map[string]any{"enabled": false, "idleMillis": 100}}), "uring.sqpoll.idleMillis and uring.sqpoll.cpu need uring.sqpoll.enabled: true"},
		{"sqpoll cpu without sqpoll", uring(map[string]any{"sqpoll": map[string]any{"enabled": false, "cpu": 1}}), "uring.sqpoll.idleMillis and uring.sqpoll.cpu need uring.sqpoll.enabled: true"},
		{"sqpoll without enabled", uring(map[string]any{"sqpoll": map[string]any{}}), "spec.uring.sqpoll.enabled: Required value"},
		{"sqpoll idle zero", uring(map[string]any{"sqpoll": map[string]any{"enabled": true, "idleMillis": 0}}), "spec.uring.sqpoll.idleMillis in body should be greater than or equal to 1"},
		{"sqpoll cpu negative", uring(map[string]any{"sqpoll": map[string]any{"enabled": true, "cpu": -1}}), "spec.uring.sqpoll.cpu in body should be greater than or equal to 0"},
		{"no batches in flight", uring(map[string]any{"batchesInFlight": 0}), "spec.uring.batchesInFlight in body should be greater than or equal to 1"},
		{"too many batches in flight", uring(map[string]any{"batchesInFlight": 9}), "spec.uring.batchesInFlight in body should be less than or equal to 8"},
		{"batches in flight with ack fast", uring(map[string]any{"ack": "fast", "batchesInFlight": 2}), "uring.batchesInFlight and uring.directWrites shape how ack: durable writes its batches"},
		{"direct writes with ack fast", uring(map[string]any{"ack": "fast", "directWrites": false}), "uring.batchesInFlight and uring.directWrites shape how ack: durable writes its batches"},
		{"no servers", map[string]any{"mode": "aof", "replicas": 0}, "spec.replicas in body should be greater than or equal to 1"},
		{"too many servers", map[string]any{"mode": "aof", "replicas": 10}, "spec.replicas in body should be less than or equal to 9"},
		{"ackReplicas on one server", map[string]any{"mode": "uring", "uring": map[string]any{"ackReplicas": 1}}, "spec.uring.ackReplicas needs mode: uring with uring.ack: durable and fewer than spec.replicas"},
		{"ackReplicas as many as the servers", map[string]any{"mode": "uring", "replicas": 3, "uring": map[string]any{"ackReplicas": 3}}, "spec.uring.ackReplicas needs mode: uring with uring.ack: durable and fewer than spec.replicas"},
		{"ackReplicas with ack fast", map[string]any{"mode": "uring", "replicas": 3, "uring": map[string]any{"ack": "fast", "ackReplicas": 1}}, "spec.uring.ackReplicas needs mode: uring with uring.ack: durable"},
		{"ackReplicas outside mode uring", map[string]any{"mode": "aof", "replicas": 3, "uring": map[string]any{"ackReplicas": 1}}, "spec.uring.ackReplicas needs mode: uring"},
		{"ackReplicas above 8", map[string]any{"mode": "uring", "replicas": 9, "uring": map[string]any{"ackReplicas": 9}}, "spec.uring.ackReplicas in body should be less than or equal to 8"},
		{"sentinel for one server", map[string]any{"mode": "aof", "sentinel": map[string]any{}}, "spec.sentinel configures the failover of replicated servers: it needs spec.replicas of 2 or more"},
		{"sentinel quorum above count", map[string]any{"mode": "aof", "replicas": 3, "sentinel": map[string]any{"count": 3, "quorum": 4}}, "spec.sentinel.quorum cannot exceed spec.sentinel.count"},
		{"sentinel quorum above the default count", map[string]any{"mode": "aof", "replicas": 3, "sentinel": map[string]any{"quorum": 5}}, "spec.sentinel.quorum cannot exceed spec.sentinel.count"},
		{"no sentinels", map[string]any{"mode": "aof", "replicas": 3, "sentinel": map[string]any{"count": 0, "quorum": 1}}, "spec.sentinel.count in body should be greater than or equal to 1"},
		{"too many sentinels", map[string]any{"mode": "aof", "replicas": 3, "sentinel": map[string]any{"count": 8}}, "spec.sentinel.count in body should be less than or equal to 7"},
		{"sentinel quorum zero", map[string]any{"mode": "aof", "replicas": 3, "sentinel": map[string]any{"quorum": 0}}, "spec.sentinel.quorum in body should be greater than or equal to 1"},
		{"unknown storage profile", map[string]any{"mode": "aof", "storage": map[string]any{"profile": "ssd"}}, `spec.storage.profile: Unsupported value: "ssd"`},
		{"volume too small", map[string]any{"mode": "aof", "storage": map[string]any{"size": "1Mi"}}, "storage.size must be at least 64Mi"},
		{"re-probe more often than every 10 minutes", map[string]any{"mode": "aof", "storage": map[string]any{"probeInterval": "5m"}}, "spec.storage.probeInterval must be at least 10m"},
		{"re-probe interval in words", map[string]any{"mode": "aof", "storage": map[string]any{"probeInterval": "hourly"}}, "spec.storage.probeInterval in body should match"},
		{"malformed storage class", map[string]any{"mode": "aof", "storage": map[string]any{"storageClassName": "Fast_SSD"}}, "spec.storage.storageClassName in body should match"},
		{"kernel version without minor", map[string]any{"mode": "uring", "placement": map[string]any{"minKernelVersion": "6"}}, "spec.placement.minKernelVersion in body should match"},
		{"kernel version with a v", map[string]any{"mode": "uring", "placement": map[string]any{"minKernelVersion": "v6.1"}}, "spec.placement.minKernelVersion in body should match"},
		{"too many tolerations", map[string]any{"mode": "aof", "placement": map[string]any{"tolerations": tolerations}}, "spec.placement.tolerations: Too many: 33: must have at most 32 items"},
		{"empty image", map[string]any{"mode": "aof", "image": ""}, "spec.image in body should be at least 1 chars long"},
		{"empty exporter image", map[string]any{"mode": "aof", "exporter": map[string]any{"image": ""}}, "spec.exporter.image in body should be at least 1 chars long"},
		{"auth without secret name", map[string]any{"mode": "aof", "auth": map[string]any{"secretRef": map[string]any{"name": ""}}}, "spec.auth.secretRef.name in body should be at least 1 chars long"},
		{"auth without secretRef", map[string]any{"mode": "aof", "auth": map[string]any{}}, "spec.auth needs secretRef (a password from your Secret) or disabled: true (no password); leave spec.auth out for a password the operator generates"},
		{"auth disabled: false", map[string]any{"mode": "aof", "auth": map[string]any{"disabled": false}}, "spec.auth needs secretRef (a password from your Secret) or disabled: true"},
		{"too many network policy clients", map[string]any{"mode": "none", "networkPolicy": map[string]any{"clients": peers}}, "spec.networkPolicy.clients: Too many: 17: must have at most 16 items"},
		{"auth secretRef and disabled", map[string]any{"mode": "aof", "auth": map[string]any{"disabled": true, "secretRef": map[string]any{"name": "pw"}}}, "spec.auth.secretRef and spec.auth.disabled: true exclude each other"},
		{"malformed scrape interval", map[string]any{"mode": "aof", "monitoring": map[string]any{"podMonitor": map[string]any{"interval": "30 seconds"}}}, "spec.monitoring.podMonitor.interval in body should match"},
		{"absolute seccomp profile", uring(map[string]any{"localhostProfile": "/etc/seccomp/io_uring.json"}), "uring.localhostProfile is a path relative to the kubelet's seccomp directory"},
		{"seccomp profile escaping its directory", uring(map[string]any{"localhostProfile": "../io_uring.json"}), "uring.localhostProfile is a path relative to the kubelet's seccomp directory"},
		{"benchmarks in db 0", map[string]any{"mode": "aof", "benchmark": map[string]any{"database": 0}}, "spec.benchmark.database in body should be greater than or equal to 1"},
		{"benchmarks past db 15", map[string]any{"mode": "aof", "benchmark": map[string]any{"database": 16}}, "spec.benchmark.database in body should be less than or equal to 15"},
		{"misspelt field", map[string]any{"mode": "aof", "aof": map[string]any{"fsynk": "always"}}, `unknown field "spec.aof.fsynk"`},
		{"io-threads with durable acks (default)", map[string]any{"mode": "uring", "config": map[string]any{"io-threads": "4"}}, "spec.config.io-threads above 1 needs uring.ack: fast"},
		{"io-threads with durable acks", map[string]any{"mode": "uring", "uring": map[string]any{"ack": "durable"}, "config": map[string]any{"io-threads": "2"}}, "spec.config.io-threads above 1 needs uring.ack: fast"},
		{"config key in upper case", withConfig("MAXMEMORY", "1gb"), "spec.config keys are server option names in lower case"},
		{"config key with a space", withConfig("maxmemory policy", "noeviction"), "spec.config keys are server option names in lower case"},
		{"tls without a source", map[string]any{"mode": "aof", "tls": map[string]any{}}, "spec.tls needs exactly one of secretName"},
		{"tls with clientAuth only", map[string]any{"mode": "aof", "tls": map[string]any{"clientAuth": true}}, "spec.tls needs exactly one of secretName"},
		{"tls with a Secret and an issuer", map[string]any{"mode": "aof", "tls": map[string]any{"secretName": "cache-tls", "issuerRef": map[string]any{"name": "ca"}}}, "spec.tls needs exactly one of secretName"},
		{"tls with an empty Secret name", map[string]any{"mode": "aof", "tls": map[string]any{"secretName": ""}}, "spec.tls.secretName in body should be at least 1 chars long"},
		{"tls issuer without a name", map[string]any{"mode": "aof", "tls": map[string]any{"issuerRef": map[string]any{"kind": "Issuer"}}}, "spec.tls.issuerRef.name: Required value"},
		{"tls issuer of an unknown kind", map[string]any{"mode": "aof", "tls": map[string]any{"issuerRef": map[string]any{"name": "ca", "kind": "Certificate"}}}, `spec.tls.issuerRef.kind: Unsupported value: "Certificate"`},
		{"memory limit that leaves maxmemory unusable", withMemoryLimit("48Mi"), "spec.resources.limits.memory below 64Mi leaves the server too little"},
		{"memory limit as a byte count", withMemoryLimit(int64(32 << 20)), "spec.resources.limits.memory below 64Mi leaves the server too little"},
		{"config value too long", withConfig("notify-keyspace-events", strings.Repeat("K", 1025)), "spec.config.notify-keyspace-events: Too long"},
	}
	for _, key := range []string{
		"appendonly", "appendfsync", "appendfsync-engine", "aof-uring-ack", "aof-uring-max-inflight-bytes", "appendfilename",
		"appenddirname", "dir", "dbfilename", "save", "port", "bind", "protected-mode", "unixsocket", "tls-port",
		"requirepass", "masterauth", "primaryauth", "aclfile", "user", "replicaof", "slaveof", "replica-announce-ip", "slave-announce-ip", "logfile", "daemonize",
		"enable-debug-command", "enable-module-command", "enable-protected-configs", "include", "rename-command", "loadmodule",
		"cluster-enabled", "cluster-config-file", "cluster-port", "cluster-node-timeout",
	} {
		cases = append(cases, struct {
			desc    string
			spec    map[string]any
			wantErr string
		}{"config owns " + key, withConfig(key, "x"), "spec.config." + key + " is set by the operator"})
	}
	if len(cases) < 30 {
		t.Fatalf("the table must hold at least 30 invalid specs, has %d", len(cases))
	}
	for _, tc := range cases {
		expectRejected(t, rejection(tc))
	}
}

// rejection is a spec the API server must refuse, with the message it must give.
type rejection struct {
	desc    string
	spec    map[string]any
	wantErr string
}

// expectRejected creates tc.spec in a subtest and fails it unless the API
// server refuses it saying tc.wantErr.
func expectRejected(t *testing.T, tc rejection) {
	t.Helper()
	t.Run(tc.desc, func(t *testing.T) {
		err := create(tc.spec)
		if err == nil {
			t.Fatalf("accepted %v", tc.spec)
		}
		if !strings.Contains(err.Error(), tc.wantErr) {
			t.Fatalf("error %q does not contain %q", err, tc.wantErr)
		}
	})
}

func withConfig(key, value string) map[string]any {
	return map[string]any{"mode": "aof", "config": map[string]any{key: value}}
}

func withMemoryLimit(limit any) map[string]any {
	return map[string]any{"mode": "aof", "resources": map[string]any{"limits": map[string]any{"memory": limit}}}
}

// A memory limit sets maxmemory to 70% of it: 64Mi is the least that
// leaves a usable maxmemory, and a smaller limit is accepted when the user
// sets maxmemory themselves.
func TestMemoryLimitAccepted(t *testing.T) {
	small := withMemoryLimit("32Mi")
	small["config"] = map[string]any{"maxmemory": "8mb"}
	for _, spec := range []map[string]any{
		withMemoryLimit("64Mi"), withMemoryLimit("1Gi"), withMemoryLimit(int64(1 << 30)), small,
		{"mode": "aof", "resources": map[string]any{"requests": map[string]any{"memory": "16Mi"}}},
	} {
		if err := create(spec); err != nil {
			t.Errorf("%v: %v", spec, err)
		}
	}
}

// Server options the operator does not own are accepted as they are.
func TestConfigAccepted(t *testing.T) {
	config := map[string]any{
		"maxmemory": "2gb", "maxmemory-policy": "allkeys-lru", "databases": "32", "io-threads": "4",
		"notify-keyspace-events": "Ex", "client-output-buffer-limit": "pubsub 32mb 8mb 60",
	}
	// io-threads needs uring.ack: fast (durable mode refuses I/O threads).
	spec := map[string]any{"mode": "uring", "uring": map[string]any{"ack": "fast"}, "config": config}
	if err := create(spec); err != nil {
		t.Fatal(err)
	}
	if err := create(map[string]any{"mode": "aof", "config": map[string]any{"io-threads": "4"}}); err != nil {
		t.Fatal(err)
	}
}

// Durable acks across replicas: up to one fewer than the servers, in uring
// durable mode (ack: durable is the default).
func TestAckReplicasAccepted(t *testing.T) {
	for _, spec := range []map[string]any{
		{"mode": "uring", "replicas": 2, "uring": map[string]any{"ackReplicas": 1}},
		{"mode": "uring", "replicas": 3, "uring": map[string]any{"ack": "durable", "ackReplicas": 2}},
		{"mode": "uring", "uring": map[string]any{"ackReplicas": 0}},
	} {
		if err := create(spec); err != nil {
			t.Errorf("%v: %v", spec, err)
		}
	}
}

// Durable mode's write path: batches in flight and direct writes, with ack
// durable given or defaulted.
func TestDurableBatchesAccepted(t *testing.T) {
	for _, spec := range []map[string]any{
		uring(map[string]any{"batchesInFlight": 2}),
		uring(map[string]any{"ack": "durable", "batchesInFlight": 8, "directWrites": false}),
		uring(map[string]any{"directWrites": true}),
	} {
		if err := create(spec); err != nil {
			t.Errorf("%v: %v", spec, err)
		}
	}
}

// spec.tls takes a Secret or an issuer, with or without client certificates;
// the issuer's kind and group default to cert-manager's Issuer.
func TestTLSAccepted(t *testing.T) {
	for _, tls := range []map[string]any{
		{"secretName": "cache-tls"},
		{"secretName": "cache-tls", "clientAuth": true},
		{"issuerRef": map[string]any{"name": "ca", "kind": "ClusterIssuer"}, "clientAuth": true},
	} {
		if err := create(map[string]any{"mode": "aof", "tls": tls}); err != nil {
			t.Errorf("%v: %v", tls, err)
		}
	}
	u := newObject(map[string]any{"mode": "none", "tls": map[string]any{"issuerRef": map[string]any{"name": "ca"}}})
	if err := k8s.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "tls", "issuerRef", "kind")
	group, _, _ := unstructured.NestedString(u.Object, "spec", "tls", "issuerRef", "group")
	if kind != "Issuer" || group != "cert-manager.io" {
		t.Errorf("issuerRef defaults: kind %q group %q, want Issuer and cert-manager.io", kind, group)
	}
}

// A re-probe interval of 10 minutes or more is accepted in any unit.
func TestProbeIntervalAccepted(t *testing.T) {
	for _, interval := range []string{"10m", "600s", "1h30m", "24h"} {
		if err := create(map[string]any{"mode": "aof", "storage": map[string]any{"probeInterval": interval}}); err != nil {
			t.Errorf("probeInterval %s: %v", interval, err)
		}
	}
}

// A name that would make an invalid StatefulSet, pod label or Service name is
// refused when the RedisPersistence is created, not looped on at apply.
func TestNamesAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wantErr string
	}{
		{strings.Repeat("a", 53), "a RedisPersistence name is at most 52 characters"},
		{"1cache", "a RedisPersistence name starts with a lower-case letter"},
		{"cache.prod", "(no '.')"},
		{"-cache", ""}, // refused by the API server's own name check
		{strings.Repeat("a", 52), ""},
		{"cache-1", ""},
	} {
		obj := newObject(map[string]any{"mode": "aof"})
		obj.SetName(tc.name)
		err := k8s.Create(context.Background(), obj)
		switch {
		case tc.wantErr == "" && tc.name[0] == '-':
			if err == nil {
				t.Errorf("%q: accepted", tc.name)
			}
		case tc.wantErr == "":
			if err != nil {
				t.Errorf("%q: %v", tc.name, err)
			}
		case err == nil || !strings.Contains(err.Error(), tc.wantErr):
			t.Errorf("%q: error %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// A replicated instance's Sentinel StatefulSet is <name>-sentinel, whose pods'
// revision label must fit 63 characters.
func TestReplicatedNamesAreShorter(t *testing.T) {
	for _, tc := range []struct {
		length   int
		replicas int64
		wantErr  string
	}{
		{44, 3, "a replicated RedisPersistence (spec.replicas above 1) has a name of at most 43 characters"},
		{43, 3, ""},
		{52, 1, ""},
	} {
		obj := newObject(map[string]any{"mode": "aof", "replicas": tc.replicas})
		obj.SetName(strings.Repeat("r", tc.length))
		err := k8s.Create(context.Background(), obj)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%d characters, %d replicas: error %v, want %q", tc.length, tc.replicas, err, tc.wantErr)
		}
	}
}

// The volume may grow (the operator expands the claim), never shrink, and
// keeps its class.
func TestStorageMayOnlyGrow(t *testing.T) {
	ctx := context.Background()
	obj := newObject(map[string]any{"mode": "aof", "storage": map[string]any{"size": "1Gi", "profile": "gp3"}})
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	update := func(path []string, value string) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(obj.Object, value, append([]string{"spec", "storage"}, path...)...); err != nil {
			t.Fatal(err)
		}
		return k8s.Update(ctx, obj)
	}
	if err := update([]string{"size"}, "2Gi"); err != nil {
		t.Fatalf("growing the volume: %v", err)
	}
	if err := update([]string{"size"}, "1536Mi"); err == nil || !strings.Contains(err.Error(), "spec.storage.size cannot shrink") {
		t.Fatalf("shrinking the volume: got %v, want the shrink message", err)
	}
	if err := update([]string{"storageClassName"}, "other"); err == nil || !strings.Contains(err.Error(), "spec.storage.profile and spec.storage.storageClassName are immutable") {
		t.Fatalf("changing the class: got %v", err)
	}
	if err := update([]string{"profile"}, "local-nvme"); err == nil || !strings.Contains(err.Error(), "are immutable") {
		t.Fatalf("changing the profile: got %v", err)
	}
	// Everything else may change, the mode included.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	obj.Object["spec"].(map[string]any)["mode"] = "uring"
	if err := k8s.Update(ctx, obj); err != nil {
		t.Fatalf("changing the mode: %v", err)
	}
}

// TestTransitionsRejected updates valid objects into specs the API must refuse
// because the change cannot be carried out safely.
func TestTransitionsRejected(t *testing.T) {
	rdb := map[string]any{"save": []any{map[string]any{"seconds": 60, "changes": 1}}}
	cases := []struct {
		desc    string
		from    map[string]any
		mutate  func(spec map[string]any)
		wantErr string
	}{
		{"none without storage to rdb", map[string]any{"mode": "none"},
			func(s map[string]any) { s["mode"], s["rdb"] = "rdb", rdb }, "without spec.storage, mode: none runs without a volume"},
		{"none without storage to aof", map[string]any{"mode": "none"},
			func(s map[string]any) { s["mode"] = "aof" }, "there is no volume to carry the data to"},
		{"none without storage to uring", map[string]any{"mode": "none"},
			func(s map[string]any) { s["mode"] = "uring" }, "create a new RedisPersistence with spec.storage"},
		{"aof on the default volume to none", map[string]any{"mode": "aof"},
			func(s map[string]any) { s["mode"] = "none" }, "the mode cannot change between none and rdb, aof or uring"},
		{"mode of a replicated instance", map[string]any{"mode": "aof", "replicas": 3},
			func(s map[string]any) { s["mode"] = "uring" }, "spec.mode cannot change while spec.replicas is above 1"},
		{"mode while scaling out", map[string]any{"mode": "aof"},
			func(s map[string]any) { s["mode"], s["replicas"] = "uring", int64(2) }, "scale to replicas: 1 first"},
		{"mode while scaling in", map[string]any{"mode": "aof", "replicas": 2},
			func(s map[string]any) { s["mode"], s["replicas"] = "uring", int64(1) }, "spec.mode cannot change while spec.replicas is above 1"},
		{"storage added", map[string]any{"mode": "none"},
			func(s map[string]any) { s["storage"] = map[string]any{"size": "1Gi"} }, "spec.storage cannot be added or removed"},
		{"storage removed", map[string]any{"mode": "aof", "storage": map[string]any{"size": "1Gi"}},
			func(s map[string]any) { delete(s, "storage") }, "spec.storage cannot be added or removed"},
		{"storage shrunk", map[string]any{"mode": "aof", "storage": map[string]any{"size": "2Gi"}},
			func(s map[string]any) { s["storage"].(map[string]any)["size"] = "1Gi" }, "spec.storage.size cannot shrink"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			obj := newObject(tc.from)
			if err := k8s.Create(ctx, obj); err != nil {
				t.Fatalf("creating %v: %v", tc.from, err)
			}
			tc.mutate(obj.Object["spec"].(map[string]any))
			err := k8s.Update(ctx, obj)
			if err == nil {
				t.Fatalf("accepted the change to %v", obj.Object["spec"])
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}

	// Every mode change of an instance with a volume is allowed: the operator
	// carries the data across it.
	modes := []map[string]any{{"mode": "none"}, {"mode": "rdb", "rdb": rdb}, {"mode": "aof"}, {"mode": "uring"}}
	for _, from := range modes {
		for _, to := range modes {
			spec := map[string]any{"storage": map[string]any{"size": "1Gi"}}
			for k, v := range from {
				spec[k] = v
			}
			obj := newObject(spec)
			if err := k8s.Create(context.Background(), obj); err != nil {
				t.Fatal(err)
			}
			next := obj.Object["spec"].(map[string]any)
			delete(next, "rdb")
			for k, v := range to {
				next[k] = v
			}
			if err := k8s.Update(context.Background(), obj); err != nil {
				t.Errorf("%s -> %s with a volume: %v", from["mode"], to["mode"], err)
			}
		}
	}
}

func TestDefaultsAreApplied(t *testing.T) {
	ctx := context.Background()
	obj := newObject(map[string]any{"mode": "uring", "uring": map[string]any{}})
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	rp := &v1alpha1.RedisPersistence{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), rp); err != nil {
		t.Fatal(err)
	}
	u := rp.Spec.Uring
	got := fmt.Sprintf("ack=%s queueDepth=%d maxWorkers=%d storage=%v exporter=%v podMonitor=%v interval=%s replicas=%d sentinel=%v",
		u.Ack, u.QueueDepth, u.MaxWorkers, rp.Spec.Storage,
		*rp.Spec.Exporter.Enabled, *rp.Spec.Monitoring.PodMonitor.Enabled, rp.Spec.Monitoring.PodMonitor.Interval, rp.Spec.Replicas, rp.Spec.Sentinel)
	want := "ack=durable queueDepth=256 maxWorkers=2 storage=<nil> exporter=true podMonitor=true interval=30s replicas=1 sentinel=<nil>"
	if got != want {
		t.Errorf("defaults:\n got %s\nwant %s", got, want)
	}

	replicated := newObject(map[string]any{"mode": "aof", "replicas": 3, "sentinel": map[string]any{}})
	if err := k8s.Create(ctx, replicated); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(replicated), rp); err != nil {
		t.Fatal(err)
	}
	if s := rp.Spec.Sentinel; rp.Spec.Replicas != 3 || s == nil || s.Count != 3 || s.Quorum != 2 {
		t.Errorf("sentinel defaults: replicas=%d sentinel=%+v", rp.Spec.Replicas, s)
	}

	// An empty storage block is a volume with the defaults; no block is no
	// volume for mode: none, and the same defaults for the other modes.
	withStorage := newObject(map[string]any{"mode": "none", "storage": map[string]any{}})
	if err := k8s.Create(ctx, withStorage); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(withStorage), rp); err != nil {
		t.Fatal(err)
	}
	if s := rp.Spec.Storage; s == nil || s.Profile != v1alpha1.StorageCustom || s.Size.String() != "8Gi" {
		t.Errorf("storage defaults: %+v", s)
	}

	aof := newObject(map[string]any{"mode": "aof", "aof": map[string]any{}, "auth": map[string]any{"secretRef": map[string]any{"name": "pw"}}})
	if err := k8s.Create(ctx, aof); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(aof), rp); err != nil {
		t.Fatal(err)
	}
	if rp.Spec.AOF.Fsync != v1alpha1.FsyncEverySec || rp.Spec.Auth.SecretRef.Key != "password" {
		t.Errorf("aof defaults: fsync=%s key=%s", rp.Spec.AOF.Fsync, rp.Spec.Auth.SecretRef.Key)
	}
	if rp.Spec.Benchmark != nil {
		t.Errorf("a server is opted in to benchmarks by default: %+v", rp.Spec.Benchmark)
	}
	for _, auth := range []map[string]any{{"disabled": true}, {"disabled": false, "secretRef": map[string]any{"name": "pw"}}} {
		if err := k8s.Create(ctx, newObject(map[string]any{"mode": "none", "auth": auth})); err != nil {
			t.Errorf("auth %v: %v", auth, err)
		}
	}

	// Opting in to benchmarks gives them db 15, and no crash check.
	benchmarked := newObject(map[string]any{"mode": "aof", "benchmark": map[string]any{}})
	if err := k8s.Create(ctx, benchmarked); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(benchmarked), rp); err != nil {
		t.Fatal(err)
	}
	if b := rp.Spec.Benchmark; b == nil || b.Database != 15 || b.CrashCheck {
		t.Errorf("benchmark defaults: %+v", b)
	}
}

func TestSamplesAreAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "persistence_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		obj.SetNamespace("default")
		if err := k8s.Create(context.Background(), obj, client.FieldValidation("Strict")); err != nil {
			t.Errorf("%s rejected: %v", filepath.Base(file), err)
		}
	}
}

// scaleTo does what kubectl scale does: a merge patch of the scale
// subresource. It returns the Scale the API server answers with.
func scaleTo(obj client.Object, replicas int32) (*autoscalingv1.Scale, error) {
	scale := &autoscalingv1.Scale{}
	target := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	err := k8s.SubResource("scale").Patch(context.Background(), target, patch, client.WithSubResourceBody(scale))
	return scale, err
}

// kubectl scale changes spec.replicas through the scale subresource, and
// the API server holds the scaled object to every rule of the spec and of
// the object, with the rule's own message.
func TestScaleIsValidatedLikeTheSpec(t *testing.T) {
	cases := []struct {
		desc     string
		spec     map[string]any
		name     string
		replicas int32
		wantErr  string
	}{
		{"ackReplicas not below replicas", map[string]any{"mode": "uring", "replicas": 2, "uring": map[string]any{"ackReplicas": 1}}, "", 1,
			"spec.uring.ackReplicas needs mode: uring with uring.ack: durable and fewer than spec.replicas"},
		{"Sentinels of one server", map[string]any{"mode": "aof", "replicas": 3, "sentinel": map[string]any{"count": 3}}, "", 1,
			"spec.sentinel configures the failover of replicated servers: it needs spec.replicas of 2 or more"},
		{"a name too long to replicate", map[string]any{"mode": "aof"}, strings.Repeat("s", 44), 2,
			"a replicated RedisPersistence (spec.replicas above 1) has a name of at most 43 characters"},
		{"to zero", map[string]any{"mode": "aof"}, "", 0, "spec.replicas: Invalid value: 0"},
		{"past the maximum", map[string]any{"mode": "aof"}, "", 10, "spec.replicas: Invalid value: 10"},
		{"ackReplicas below replicas", map[string]any{"mode": "uring", "replicas": 2, "uring": map[string]any{"ackReplicas": 1}}, "", 3, ""},
		{"out", map[string]any{"mode": "aof"}, "", 3, ""},
		{"in", map[string]any{"mode": "aof", "replicas": 3}, "", 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			obj := newObject(tc.spec)
			if tc.name != "" {
				obj.SetName(tc.name)
			}
			if err := k8s.Create(context.Background(), obj); err != nil {
				t.Fatalf("creating %v: %v", tc.spec, err)
			}
			scale, err := scaleTo(obj, tc.replicas)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("scale to %d: error %v, want %q", tc.replicas, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("scale to %d: %v", tc.replicas, err)
			}
			got := &v1alpha1.RedisPersistence{}
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatal(err)
			}
			if scale.Spec.Replicas != tc.replicas || got.Spec.Replicas != tc.replicas {
				t.Fatalf("scaled to %d: the Scale says %d, spec.replicas is %d", tc.replicas, scale.Spec.Replicas, got.Spec.Replicas)
			}
		})
	}
}
