package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// switchover refuses at the prompt what the status shows the operator would
// refuse, and annotates nothing then; otherwise it sets the two annotations
// the operator answers (the target, any replica by default, and the time).
// With --wait it follows the request until status.switchover answers it:
// it prints the new primary, or exits non-zero with the operator's reason
// and message. The test plays the operator, writing the answers.
func TestSwitchoverAnnotatesAndFollows(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	replicas := []v1alpha1.ReplicaStatus{
		{Pod: "cache-0", Role: v1alpha1.RolePrimary, LinkUp: true},
		{Pod: "cache-1", Role: v1alpha1.RoleReplica, LinkUp: true},
		{Pod: "cache-2", Role: v1alpha1.RoleReplica},
	}
	create(t, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring, Replicas: 3}},
		v1alpha1.RedisPersistenceStatus{Primary: "cache-0", Replicas: replicas})
	create(t, &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeUring}}, v1alpha1.RedisPersistenceStatus{})
	read := func(name string) *v1alpha1.RedisPersistence {
		t.Helper()
		rp := &v1alpha1.RedisPersistence{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rp); err != nil {
			t.Fatal(err)
		}
		return rp
	}

	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"switchover", "plain"}, "plain runs one server (spec.replicas 1): there is no replica to hand the primary role to"},
		{[]string{"switchover", "cache", "--to", "cache-0"}, "cache-0 is the primary of cache already"},
		{[]string{"switchover", "cache", "--to", "cache-7"}, "cache-7 is not a replica of cache (its replicas: cache-1, cache-2;"},
		{[]string{"switchover", "cache", "--to", "cache-2"}, "cache-2's link to the primary cache-0 is down"},
		{[]string{"switchover", "gone"}, `no RedisPersistence "gone"`},
	} {
		if _, _, err := run(t, append([]string{"-n", ns}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("kubectl uring %s: %v, want %q", strings.Join(tc.args, " "), err, tc.wantErr)
		}
	}
	for _, name := range []string{"cache", "plain"} {
		if a := read(name).Annotations; a[specs.AnnotationSwitchoverTo] != "" {
			t.Errorf("a refused switchover annotated %s: %v", name, a)
		}
	}

	stdout, _, err := run(t, "-n", ns, "switchover", "cache", "--to", "cache-1")
	if err != nil {
		t.Fatal(err)
	}
	if a := read("cache").Annotations; a[specs.AnnotationSwitchoverTo] != "cache-1" || a[specs.AnnotationSwitchoverRequestedAt] != "2026-11-28T12:00:00Z" {
		t.Errorf("the annotations are %v", a)
	}
	if !strings.Contains(stdout, "redispersistence/cache switchover to cache-1 requested at 2026-11-28T12:00:00Z\n") {
		t.Errorf("switchover printed %q", stdout)
	}
	if _, _, err := run(t, "-n", ns, "switchover", "cache", "--to", "cache-1"); err == nil || !strings.Contains(err.Error(), "requested this second already") {
		t.Errorf("a second switchover in the same second: %v", err)
	}

	// answer plays the operator: once the request at `at` is on the
	// instance, it writes answer into status.switchover.
	answer := func(at time.Time, answer v1alpha1.SwitchoverStatus) {
		go func() {
			_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				rp := &v1alpha1.RedisPersistence{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cache"}, rp); err != nil {
					return false, nil
				}
				requested := rp.Annotations[specs.AnnotationSwitchoverRequestedAt]
				if requested != at.UTC().Format(time.RFC3339) {
					return false, nil
				}
				answer.To, answer.RequestedAt = rp.Annotations[specs.AnnotationSwitchoverTo], requested
				rp.Status.Switchover = &answer
				return k8s.Status().Update(ctx, rp) == nil, nil
			})
		}()
	}
	later := testNow.Add(time.Minute)
	answer(later, v1alpha1.SwitchoverStatus{Result: v1alpha1.SwitchoverSucceeded, Reason: "Switched", From: "cache-0", Primary: "cache-1",
		Message: "the Sentinels promoted cache-1; cache-0 was primary and is its replica", FinishedAt: metav1.NewTime(later)})
	stdout, _, err = runAt(t, later, "-n", ns, "switchover", "cache", "--wait")
	if err != nil {
		t.Fatalf("switchover --wait: %v", err)
	}
	if want := "redispersistence/cache switchover to the replica the Sentinels choose requested at 2026-11-28T12:01:00Z\n" +
		"cache: cache-1 is the primary: the Sentinels promoted cache-1; cache-0 was primary and is its replica\n"; stdout != want {
		t.Errorf("switchover --wait printed\n%s\nwant\n%s", stdout, want)
	}
	if to := read("cache").Annotations[specs.AnnotationSwitchoverTo]; to != specs.SwitchoverToAny {
		t.Errorf("a switchover without --to asks for %q", to)
	}

	evenLater := later.Add(time.Minute)
	answer(evenLater, v1alpha1.SwitchoverStatus{Result: v1alpha1.SwitchoverRefused, Reason: "ReplicaBehind", From: "cache-0",
		Message: "cache-1 did not catch up with the paused primary within 3s", FinishedAt: metav1.NewTime(evenLater)})
	stdout, stderr, err := runAt(t, evenLater, "-n", ns, "switchover", "cache", "--to", "cache-1", "--wait", "-o", "json")
	if err == nil || err.Error() != "the operator refused the switchover of cache (ReplicaBehind): cache-1 did not catch up with the paused primary within 3s" {
		t.Errorf("a refused switchover --wait: %v", err)
	}
	if !strings.HasPrefix(stderr, "redispersistence/cache switchover to cache-1 requested at 2026-11-28T12:02:00Z") {
		t.Errorf("with -o json the progress goes to stderr; it has %q", stderr)
	}
	var printed v1alpha1.RedisPersistence
	if err := json.Unmarshal([]byte(stdout), &printed); err != nil || printed.Status.Switchover == nil || printed.Status.Switchover.Reason != "ReplicaBehind" {
		t.Errorf("-o json printed %v (%v), want the instance with its answer", printed.Status.Switchover, err)
	}

	// No answer: --timeout gives up and says the request stays.
	_, _, err = runAt(t, evenLater.Add(time.Minute), "-n", ns, "switchover", "cache", "--wait", "--timeout", "300ms")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("has not answered the switchover of %s after --timeout; the request stays", "cache")) {
		t.Errorf("switchover --wait without an answer: %v", err)
	}
}
