package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// requeueAfter is how soon a reconcile that went through every phase looks at
// rp again (0: at the next event), for what changes without an event. It
// reads rp's status as updateStatus wrote it, what the server said (obs), the
// operator upgrade held back for its turn (nil if none), whether a server
// still presents the previous certificate, and when the next storage probe is
// due (0: none).
func requeueAfter(rp *v1alpha1.RedisPersistence, obs observation, heldUpgrade *upgradeWait, tlsRotating bool, probeIn time.Duration, now time.Time) time.Duration {
	if heldUpgrade != nil && heldUpgrade.retry < resyncInterval {
		return heldUpgrade.retry
	}
	if tlsRotating {
		// No event says that the kubelet updated a mounted Secret.
		return tlsRotationRetry
	}
	degraded := meta.IsStatusConditionTrue(rp.Status.Conditions, v1alpha1.ConditionDegraded)
	if t := rp.Status.LastTermination; t != nil && degraded {
		// Degraded clears once the window since the last restart has passed.
		if left := degradedWindow - now.Sub(t.FinishedAt.Time); left > 0 && left < resyncInterval {
			return left + time.Second
		}
	}
	if obs.info == nil && obs.infoErr != nil {
		return unreachableRetry(obs.unreachableFor)
	}
	if obs.info == nil || rp.Spec.Mode == v1alpha1.ModeUring || rp.Status.AppliedConfigHash != specs.RuntimeConfigHash(rp) ||
		degraded || meta.IsStatusConditionFalse(rp.Status.Conditions, v1alpha1.ConditionStorageResized) || heldUpgrade != nil {
		// No event says that a volume finished expanding or that a
		// StorageClass now allows it. An upgrade waiting for its turn is
		// woken when one ahead of it ends (nextUpgrades); this bounds the
		// wait for one that stalls.
		return resyncInterval
	}
	return probeIn
}

// requeueWithin is result, looking again within limit at the latest.
func requeueWithin(result ctrl.Result, limit time.Duration) ctrl.Result {
	if result.RequeueAfter == 0 || result.RequeueAfter > limit {
		result.RequeueAfter = limit
	}
	return result
}
