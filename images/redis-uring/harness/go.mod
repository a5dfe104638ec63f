module github.com/uring-redis/uring-redis-operator/images/redis-uring/harness

go 1.26.0

require (
	github.com/uring-redis/uring-redis-operator v0.0.0
	golang.org/x/sys v0.48.0
)

// valkey-benchmark's report is read by the operator's parser
// (internal/benchparse), from this working tree.
replace github.com/uring-redis/uring-redis-operator => ../../..
