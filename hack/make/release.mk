##@ Release

# One version for the whole release: the operator and benchmark images, the chart
# (version and appVersion) and the server image, tagged <Valkey version>-uring<VERSION>.
# VERSION is the one place it is set; `make generate` writes it into Chart.yaml.
VERSION ?= $(shell cat VERSION)
VALKEY_VERSION := $(shell awk -F'"' '$$1 ~ /uringredis.io\/valkey-version/ {print $$2}' charts/uring-redis-operator/Chart.yaml)
EXPORTER_VERSION := $(shell awk '$$1 == "require" {print $$3}' e2e/images/redis-exporter/go.mod)
# Where `make release` pushes; the chart goes to oci://$(REGISTRY)/charts.
REGISTRY ?=
IMG ?= $(REGISTRY)/uring-redis-operator:$(VERSION)
REDIS_IMG ?= $(REGISTRY)/redis-uring:$(VALKEY_VERSION)-uring$(VERSION)
BENCH_IMG ?= $(REGISTRY)/uring-redis-bench:$(VERSION)
EXPORTER_IMG ?= $(REGISTRY)/oliver006/redis_exporter:$(EXPORTER_VERSION)
DIST ?= dist
# The platforms of every released image: each image is pushed as one OCI index of them.
PLATFORMS ?= linux/amd64 linux/arm64

$(CRANE):
	hack/go-install-tool.sh $@ github.com/google/go-containerregistry/cmd/crane $(CRANE_VERSION)

.PHONY: release
release: $(HELM) $(KUSTOMIZE) $(CRANE) $(COSIGN) $(SYFT) ## Build every image for PLATFORMS, push each as one index, package and push the chart (OCI), sign them all and attest each image's SBOM (COSIGN_KEY, COSIGN_PASSWORD), write dist/ (VERSION=x.y.z REGISTRY=host[:port][/path]).
	@[[ -n "$(REGISTRY)" ]] || { echo "release: set REGISTRY=host[:port][/path], where the images and the chart go" >&2; exit 2; }
	HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) CRANE=$(CRANE) PLATFORMS="$(PLATFORMS)" COSIGN=$(COSIGN) SYFT=$(SYFT) hack/release.sh $(VERSION) $(REGISTRY) $(DIST)

.PHONY: release-test
release-test: $(COSIGN) $(SYFT) $(CRANE) ## Sign a small image and a chart-like artifact as `make release` does, in a local docker-registry, and verify them with the release's key and with another (part of `make test`).
	e2e/cluster/host-deps.sh docker-registry jq
	COSIGN=$(COSIGN) SYFT=$(SYFT) CRANE=$(CRANE) go test ./hack -count=1 -v

.PHONY: smoke-arm64
smoke-arm64: ## Build the linux/arm64 server image and run it under qemu-user: PING, writes with appendfsync always, SIGKILL, AOF reload; the uring engine must fall back and say why.
	e2e/images/smoke-arm64.sh

# Where the plugin's archives are downloaded from, for its krew manifest.
PLUGIN_URL ?= https://github.com/uring-redis/uring-redis-operator/releases/download/v$(VERSION)

.PHONY: release-plugin
release-plugin: ## Cross-compile kubectl-uring for linux/amd64 and linux/arm64 into DIST as krew archives with .sha256 files, and DIST/uring.yaml, the krew manifest naming them (PLUGIN_URL).
	hack/release-plugin.sh $(VERSION) $(DIST) $(PLUGIN_URL)

chart-generate: chart-version

.PHONY: chart-version
chart-version: ## Write VERSION into the chart's version and appVersion.
	sed -i -e 's/^version: .*/version: $(VERSION)/' -e 's/^appVersion: .*/appVersion: "$(VERSION)"/' $(CHART_DIR)/Chart.yaml

.PHONY: build-arm64
build-arm64: ## Cross-compile the Go binaries (operator, seccomp-installer, bench, kubectl-uring) for linux/arm64 into bin/arm64/.
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath -ldflags "-s -w" -o bin/arm64/ ./cmd/operator ./cmd/seccomp-installer ./cmd/bench ./cmd/kubectl-uring
