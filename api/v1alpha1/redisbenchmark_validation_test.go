package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

func newBenchmark(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("RedisBenchmark"))
	u.SetName(name)
	u.SetNamespace("default")
	return u
}

func TestInvalidBenchmarksAreRejected(t *testing.T) {
	targets := []any{"a"}
	cases := []struct {
		desc    string
		name    string
		spec    map[string]any
		wantErr string
	}{
		{"no targets", "", map[string]any{"targets": []any{}}, "spec.targets: Invalid value: 0"},
		{"repeated target", "", map[string]any{"targets": []any{"a", "b", "a"}}, "targets must not repeat a RedisPersistence"},
		{"target not a name", "", map[string]any{"targets": []any{"Not_A_Name"}}, `spec.targets[0]: Invalid value: "Not_A_Name"`},
		{"too many targets", "", map[string]any{"targets": []any{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m"}}, "must have at most 12 items"},
		{"unknown command", "", map[string]any{"targets": targets, "workload": map[string]any{"commands": []any{"zadd"}}}, `Unsupported value: "zadd"`},
		{"repeated command", "", map[string]any{"targets": targets, "workload": map[string]any{"commands": []any{"set", "set"}}}, "workload.commands must not repeat a command"},
		{"mixed reads without set", "", map[string]any{"targets": targets, "workload": map[string]any{"commands": []any{"incr"}, "mixedReads": true}}, "commands must include set"},
		{"too few requests", "", map[string]any{"targets": targets, "workload": map[string]any{"requests": 10}}, "spec.workload.requests in body should be greater than or equal to 1000"},
		{"no clients", "", map[string]any{"targets": targets, "workload": map[string]any{"clients": 0}}, "spec.workload.clients in body should be greater than or equal to 1"},
		{"too many repetitions", "", map[string]any{"targets": targets, "repetitions": 11}, "spec.repetitions in body should be less than or equal to 10"},
		{"crash check too long", "", map[string]any{"targets": targets, "crashCheck": map[string]any{"writeSeconds": 601}}, "spec.crashCheck.writeSeconds in body should be less than or equal to 600"},
		{"deadline shorter than a minute", "", map[string]any{"targets": targets, "activeDeadlineSeconds": 10}, "spec.activeDeadlineSeconds in body should be greater than or equal to 60"},
		{"deadline longer than a day", "", map[string]any{"targets": targets, "activeDeadlineSeconds": 86401}, "spec.activeDeadlineSeconds in body should be less than or equal to 86400"},
		{"name too long for its Jobs", strings.Repeat("n", 57), map[string]any{"targets": targets}, "a RedisBenchmark name is at most 56 characters"},
	}
	for i, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			name := tc.name
			if name == "" {
				name = fmt.Sprintf("rbench-invalid-%d", i)
			}
			err := k8s.Create(context.Background(), newBenchmark(name, tc.spec), client.FieldValidation("Strict"))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestBenchmarkDefaultsAndImmutability(t *testing.T) {
	ctx := context.Background()
	u := newBenchmark("rbench-defaults", map[string]any{"targets": []any{"always", "durable"}, "crashCheck": map[string]any{}})
	if err := k8s.Create(ctx, u, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	rb := &v1alpha1.RedisBenchmark{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), rb); err != nil {
		t.Fatal(err)
	}
	w := rb.Spec.Workload
	got := fmt.Sprint(w.Commands, w.Requests, w.Clients, w.Pipeline, w.ValueSize, w.Keyspace, rb.Spec.Repetitions, rb.Spec.CrashCheck.Clients, rb.Spec.CrashCheck.WriteSeconds, rb.Spec.ActiveDeadlineSeconds)
	if want := "[set hset lpush incr] 100000 50 1 64 100000 1 50 5 3600"; got != want {
		t.Errorf("defaults: got %s, want %s", got, want)
	}
	rb.Spec.Workload.Clients = 10
	if err := k8s.Update(ctx, rb); err == nil || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("changing the workload: got %v, want the immutability message", err)
	}
}
