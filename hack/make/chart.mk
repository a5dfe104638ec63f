##@ Chart

HELM_VERSION ?= v3.16.4
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
CHART_DIR := charts/uring-redis-operator

# The chart's copies of config/ (CRDs, ClusterRole rules, and those rules split
# by scope for watchNamespaces), its seccomp profile, README (values reference
# and alert list) and values schema are all generated; `make verify` checks them.
GENERATED += $(CHART_DIR)

generate: chart-generate

.PHONY: chart-generate
chart-generate: manifests ## Sync the chart's CRDs and RBAC from config/ (and split the RBAC by scope), generate its seccomp profile, README (values, alerts with their runbooks) and values schema.
	rm -f $(CHART_DIR)/files/crds/*.yaml
	cp config/crd/bases/*.yaml $(CHART_DIR)/files/crds/
	cp config/rbac/role.yaml config/rbac/node_labeler_role.yaml config/rbac/metrics_reader_role.yaml $(CHART_DIR)/files/rbac/
	go run ./hack/chart-rbac config/rbac/role.yaml $(CHART_DIR)/files/rbac
	cd hack/seccomp-profile && go run . $(REPO_ROOT)/$(CHART_DIR)/files/io_uring.json
	go run ./hack/values-doc $(CHART_DIR)/values.yaml $(CHART_DIR)/README.md $(CHART_DIR)/values.schema.json
	go run ./hack/alerts-doc $(CHART_DIR)/files/prometheus-rules.yaml docs/runbooks $(CHART_DIR)/README.md

.PHONY: chart-lint
chart-lint: $(HELM) ## Lint the chart with every ci/*-values.yaml.
	for values in $(CHART_DIR)/ci/*-values.yaml; do \
		$(HELM) lint --strict $(CHART_DIR) --values "$$values"; done

.PHONY: build-installer
build-installer: $(KUSTOMIZE) ## Write dist/install.yaml (CRDs, RBAC, operator) for `kubectl apply -f`, naming IMG, REDIS_IMG, BENCH_IMG, EXPORTER_IMG (`make release` writes it by digest).
	@for image in $(IMG) $(REDIS_IMG) $(BENCH_IMG) $(EXPORTER_IMG); do [[ $$image != /* ]] || { echo "build-installer: set REGISTRY (or IMG, REDIS_IMG, BENCH_IMG and EXPORTER_IMG)" >&2; exit 2; }; done
	KUSTOMIZE=$(KUSTOMIZE) hack/installer.sh $(DIST)/install.yaml $(IMG) $(REDIS_IMG) $(BENCH_IMG) $(EXPORTER_IMG)

.PHONY: docker-build
docker-build: ## Build the operator image (IMG, from REGISTRY and VERSION) with the root Dockerfile.
	@[[ "$(IMG)" != /* ]] || { echo "docker-build: set REGISTRY (or IMG)" >&2; exit 2; }
	docker build -t $(IMG) .

# Stamped like a release build (helm's own Makefile): without the Kubernetes
# version, `helm template` assumes v1.20 and fails the chart's kubeVersion.
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	$(foreach pkg,chartutil lint/rules,-X helm.sh/helm/v3/pkg/$(pkg).k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/$(pkg).k8sVersionMinor=31)

$(HELM):
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		GOBIN=$$tmp go install -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) && \
		mv "$$tmp/helm" $@ && ln -sf $(notdir $@) $(LOCALBIN)/helm
