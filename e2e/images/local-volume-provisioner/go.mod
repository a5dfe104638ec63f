// Pins sig-storage-local-static-provisioner v2.7.0 (commit 4f81db77908f): its module
// path has no /v2 suffix, so the Go proxy serves the release only as this
// pseudo-version, and go.sum is its checksum (the checksum database does not list it).
module github.com/uring-redis/uring-redis-operator/e2e/images/local-volume-provisioner

go 1.22.0

require sigs.k8s.io/sig-storage-local-static-provisioner v0.0.0-20240328032358-4f81db77908f
