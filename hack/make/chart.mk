##@ Chart

HELM_VERSION ?= v3.16.4
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
CHART_DIR := charts/uring-redis-operator

# The chart's copies of config/ (CRDs, ClusterRole rules), its seccomp profile,
# README and values schema are all generated; `make verify` checks them.
GENERATED += $(CHART_DIR)

generate: chart-generate

.PHONY: chart-generate
chart-generate: manifests ## Sync the chart's CRDs and RBAC from config/, generate its seccomp profile, README and values schema.
	rm -f $(CHART_DIR)/files/crds/*.yaml
	cp config/crd/bases/*.yaml $(CHART_DIR)/files/crds/
	cp config/rbac/role.yaml $(CHART_DIR)/files/rbac/role.yaml
	cd hack/seccomp-profile && go run . $(REPO_ROOT)/$(CHART_DIR)/files/io_uring.json
	go run ./hack/values-doc $(CHART_DIR)/values.yaml $(CHART_DIR)/README.md $(CHART_DIR)/values.schema.json

.PHONY: chart-lint
chart-lint: $(HELM) ## Lint the chart with every ci/*-values.yaml.
	for values in $(CHART_DIR)/ci/*-values.yaml; do \
		$(HELM) lint --strict $(CHART_DIR) --values "$$values"; done

.PHONY: build-installer
build-installer: $(KUSTOMIZE) ## Write dist/install.yaml (CRDs, RBAC, operator) for `kubectl apply -f`; IMG names the image.
	mkdir -p dist
	overlay=$$(mktemp -d) && trap 'rm -rf "$$overlay"' EXIT && \
		printf 'resources:\n- %s\n' "$(REPO_ROOT)/config/default" >"$$overlay/kustomization.yaml" && \
		(cd "$$overlay" && $(KUSTOMIZE) edit set image uring-redis-operator=$(IMG)) && \
		$(KUSTOMIZE) build "$$overlay" >dist/install.yaml

.PHONY: docker-build
docker-build: ## Build the operator image (IMG) with the root Dockerfile.
	docker build -t $(IMG) .

$(HELM):
	hack/go-install-tool.sh $@ helm.sh/helm/v3/cmd/helm $(HELM_VERSION)
