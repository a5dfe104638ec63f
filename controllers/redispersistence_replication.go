package controllers

import (
	"strings"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// podOfHost is the pod a server or Sentinel announces itself as: the first
// label of <pod>.<headless domain>.
func podOfHost(rp *v1alpha1.RedisPersistence, host string) (string, bool) {
	pod, domain, ok := strings.Cut(host, ".")
	return pod, ok && domain == specs.HeadlessDomain(rp)
}
