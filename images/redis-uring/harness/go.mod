module github.com/uring-redis/uring-redis-operator/images/redis-uring/harness

go 1.25

require (
	github.com/uring-redis/uring-redis-operator v0.0.0
	golang.org/x/sys v0.30.0
)

// valkey-benchmark's report is read by the operator's parser
// (internal/benchparse), from this working tree.
replace github.com/uring-redis/uring-redis-operator => ../../..
