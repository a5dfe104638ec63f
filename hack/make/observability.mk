##@ Observability

DASHBOARDS_DIR := charts/uring-redis-operator/dashboards
RULES_FILE := charts/uring-redis-operator/files/prometheus-rules.yaml
GENERATED += $(DASHBOARDS_DIR)

.PHONY: dashboards
dashboards: ## Render the Grafana dashboards (internal/dashboards) into the chart.
	mkdir -p $(DASHBOARDS_DIR)
	go run ./internal/dashboards/cmd/gen-dashboards $(DASHBOARDS_DIR)

generate: dashboards

.PHONY: observability-tools
observability-tools: ## Fetch prometheus/promtool (Debian) and build redis_exporter (pinned) into bin/ for the tests (cached).
	hack/prometheus-tools.sh >/dev/null
	hack/redis-exporter.sh >/dev/null

test: observability-tools

.PHONY: check-rules
check-rules: observability-tools ## Check the PrometheusRule groups with promtool.
	$$(hack/prometheus-tools.sh)/promtool check rules $(RULES_FILE)

.PHONY: bench-report
bench-report: ## Render benchmark results as PNG: BENCHMARK=name [NAMESPACE=ns], RESULTS=file, or neither for local servers in four modes.
	hack/bench-report.sh
