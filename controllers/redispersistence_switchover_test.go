package controllers

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A switchover that failed is tried again after 15 s, then 30 s, 60 s... at
// most 5 min apart, each wait counted from the last failure; one that
// succeeds forgets the failures, and each instance has its own.
func TestSwitchoverBackoff(t *testing.T) {
	var b switchoverBackoff
	a, other := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	now := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	if w := b.wait(a, now); w != 0 {
		t.Fatalf("before any failure: wait %s", w)
	}
	failed := errors.New("replica behind")
	for i, want := range []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute} {
		b.record(a, now, failed)
		if w := b.wait(a, now); w != want {
			t.Errorf("after %d failures: wait %s, want %s", i+1, w, want)
		}
		if w := b.wait(a, now.Add(want-time.Second)); w != time.Second {
			t.Errorf("after %d failures, a second before the retry: wait %s", i+1, w)
		}
		if w := b.wait(other, now); w != 0 {
			t.Errorf("another instance waits %s", w)
		}
		now = now.Add(want)
	}
	b.record(a, now, nil)
	if w := b.wait(a, now); w != 0 {
		t.Errorf("after a success: wait %s", w)
	}
	b.record(a, now, failed)
	if w := b.wait(a, now); w != 15*time.Second {
		t.Errorf("a failure after a success: wait %s, want 15s", w)
	}

	// An instance that is gone takes its shards' failures with it, and
	// leaves another's whose name only begins like its own.
	shard, lookalike := types.NamespacedName{Namespace: "ns", Name: "a-s1"}, types.NamespacedName{Namespace: "ns", Name: "a-sx"}
	b.record(shard, now, failed)
	b.record(lookalike, now, failed)
	b.forget(a)
	if w, ws := b.wait(a, now), b.wait(shard, now); w != 0 || ws != 0 {
		t.Errorf("after forget: the instance waits %s, its shard %s", w, ws)
	}
	if w := b.wait(lookalike, now); w != 15*time.Second {
		t.Errorf("after forget of a: a-sx waits %s, want 15s", w)
	}
}
