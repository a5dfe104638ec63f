##@ Server

.PHONY: test-server
test-server: test-server-tcl test-server-harness test-server-harness-tls ## All the server's tests: the Tcl suites and the durability harness, plain and over TLS.

.PHONY: test-server-tcl
test-server-tcl: server-build ## Upstream AOF suites and a broad subset (posix always, uring durable, uring fast), plus our Tcl tests.
	$(MAKE) -C images/redis-uring test

.PHONY: test-server-full
test-server-full: server-build ## The whole upstream Tcl suite with the engine forced to uring durable and fast (long; not in CI).
	$(MAKE) -C images/redis-uring test-full

.PHONY: test-server-harness
test-server-harness: server-build ## Quick harness suite (root, ~5 min): power cut (ext4 on loop, EXT4_IOC_SHUTDOWN), failover, disk full, correctness.
	$(MAKE) -C images/redis-uring/harness test

.PHONY: test-server-harness-tls
test-server-harness-tls: server-build ## The quick harness suite over TLS (root, ~2 min): TLS-only servers, client certificates, TLS replication; fewer trials.
	$(MAKE) -C images/redis-uring/harness test-tls

.PHONY: durability
durability: server-build ## >= 50 power-cut trials per durable mode (always, uring durable).
	$(MAKE) -C images/redis-uring/harness durability

.PHONY: failover
failover: server-build ## Failover power cuts: the primary's node lost and its replica power-cut at once; ack-replicas 1 must lose nothing, 0 is measured.
	$(MAKE) -C images/redis-uring/harness failover

.PHONY: loss-window
loss-window: server-build ## 100 power cuts per fast mode (everysec, uring fast): the loss window's p50, p99 and max.
	$(MAKE) -C images/redis-uring/harness loss-window

.PHONY: bench-server
bench-server: server-build ## Every persistence mode side by side (commands, client sweep, pipelines, read-heavy; 3 interleaved reps): table, JSON, CSV.
	$(MAKE) -C images/redis-uring/harness bench $(if $(BASELINE_BIN_DIR),BASELINE_BIN_DIR=$(abspath $(BASELINE_BIN_DIR)))

.PHONY: bench-sentinel-failover
bench-sentinel-failover: server-build ## Time from SENTINEL FAILOVER to the new primary's address, 1 primary + 2 replicas + 1 Sentinel (BASELINE_BIN_DIR: another build alternately).
	images/redis-uring/bench-sentinel-failover.sh $(abspath bin/redis-uring/install/bin) $(if $(BASELINE_BIN_DIR),$(abspath $(BASELINE_BIN_DIR)))

.PHONY: bench-replicas
bench-replicas: server-build ## What aof-uring-ack-replicas 1 costs: uring durable alone, with a replica, with its acknowledgement; posix always (replicas on this machine).
	$(MAKE) -C images/redis-uring/harness bench-replicas

.PHONY: bench-replies
bench-replies: server-build ## The reply path side by side (unmodified, io-uring-replies, io-threads 2): GET/SET, 50/200 clients, 64 B-8 KiB, pipelines 1/4/16.
	$(MAKE) -C images/redis-uring/harness bench-replies

# `make test` runs the server's Tcl suites and the durability harness' quick
# suite (root: loop devices and mounts) beside go test (Makefile).
