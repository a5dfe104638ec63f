package specs

import "github.com/uring-redis/uring-redis-operator/api/v1alpha1"

// A switchover asked for by a person (`kubectl uring switchover`) or a
// GitOps tool: two annotations on the RedisPersistence, which the operator
// answers in status.switchover. The annotations stay once answered, as
// AnnotationRestartedAt does: a tool that applies them again changes
// nothing, and a new request is a new value of either.
const (
	// AnnotationSwitchoverTo names the server pod to hand the primary role
	// to, or SwitchoverToAny for the replica the Sentinels choose.
	AnnotationSwitchoverTo = "uringredis.io/switchover-to"
	// AnnotationSwitchoverRequestedAt is when it was asked for (RFC 3339;
	// `kubectl uring switchover` writes the time): with the same target,
	// a new time asks again.
	AnnotationSwitchoverRequestedAt = "uringredis.io/switchover-requested-at"
	// SwitchoverToAny lets the Sentinels choose among the replicas.
	SwitchoverToAny = "any"
)

// SwitchoverRequest is a switchover asked for with the annotations.
type SwitchoverRequest struct {
	To, RequestedAt string
}

// SwitchoverRequestOf is the switchover rp's annotations ask for, and
// whether they ask for one that status.switchover has not answered.
func SwitchoverRequestOf(rp *v1alpha1.RedisPersistence) (SwitchoverRequest, bool) {
	req := SwitchoverRequest{To: rp.Annotations[AnnotationSwitchoverTo], RequestedAt: rp.Annotations[AnnotationSwitchoverRequestedAt]}
	if req.To == "" {
		return req, false
	}
	return req, !req.AnsweredBy(rp.Status.Switchover)
}

// AnsweredBy says whether answer is the operator's answer to req.
func (req SwitchoverRequest) AnsweredBy(answer *v1alpha1.SwitchoverStatus) bool {
	return answer != nil && answer.To == req.To && answer.RequestedAt == req.RequestedAt
}
