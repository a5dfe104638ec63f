module github.com/uring-redis/uring-redis-operator

go 1.23
