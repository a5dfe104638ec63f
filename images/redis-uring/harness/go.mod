module github.com/uring-redis/uring-redis-operator/images/redis-uring/harness

go 1.23

require golang.org/x/sys v0.26.0
