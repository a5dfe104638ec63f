// Pins the redis_exporter release that e2e/images/redis-exporter/Dockerfile builds;
// go.sum is its checksum (the Go checksum database does not list this version).
module github.com/uring-redis/uring-redis-operator/e2e/images/redis-exporter

go 1.22.0

require github.com/oliver006/redis_exporter v1.74.0

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gomodule/redigo v1.9.2 // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/mna/redisc v1.4.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.22.0 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.62.0 // indirect
	github.com/prometheus/procfs v0.15.1 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	golang.org/x/sys v0.30.0 // indirect
	google.golang.org/protobuf v1.36.6 // indirect
)
