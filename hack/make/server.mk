##@ Server

.PHONY: test-server
test-server: server-build ## The server's tests: upstream AOF Tcl suites in both engines, our Tcl tests, power cut, disk full, correctness.
	$(MAKE) -C images/redis-uring test
	$(MAKE) -C images/redis-uring/harness test

.PHONY: durability
durability: server-build ## >= 50 power-cut trials per durable mode (always, uring durable).
	$(MAKE) -C images/redis-uring/harness durability

.PHONY: bench-server
bench-server: server-build ## Benchmark every persistence mode on one volume: table, JSON and CSV.
	$(MAKE) -C images/redis-uring/harness bench
