# uring-redis-operator
#
# Tools are pinned below and installed into ./bin by the targets that need
# them; nothing is expected on the machine beyond Go, make, gcc and apt.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

REPO_ROOT := $(shell pwd)
LOCALBIN ?= $(REPO_ROOT)/bin
export PATH := $(LOCALBIN):$(PATH)
# bin/ holds tools, caches and fetched sources; a go.mod there keeps them out of ./...
$(shell mkdir -p $(LOCALBIN) && [ -f $(LOCALBIN)/go.mod ] || printf 'module ignored\n' >$(LOCALBIN)/go.mod)

## Tool versions
CONTROLLER_TOOLS_VERSION ?= v0.16.5
KUSTOMIZE_VERSION ?= v5.4.3
GOLANGCI_LINT_VERSION ?= v2.15.0
CRD_REF_DOCS_VERSION ?= v0.3.0
KIND_VERSION ?= v0.30.0
# make release signs with cosign and makes its SBOMs with syft (hack/sign.sh).
COSIGN_VERSION ?= v2.6.5
SYFT_VERSION ?= v1.57.1
# crane assembles a release's multi-arch indexes (e2e/images/build.sh) and reads them (hack/sign.sh).
CRANE_VERSION ?= v0.22.1
KUBERNETES_VERSION := $(shell awk '$$1 == "require" && $$2 == "k8s.io/kubernetes" {print $$3}' hack/k8s/go.mod)

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
CRD_REF_DOCS ?= $(LOCALBIN)/crd-ref-docs-$(CRD_REF_DOCS_VERSION)
KIND ?= $(LOCALBIN)/kind-$(KIND_VERSION)
COSIGN ?= $(LOCALBIN)/cosign-$(COSIGN_VERSION)
SYFT ?= $(LOCALBIN)/syft-$(SYFT_VERSION)
CRANE ?= $(LOCALBIN)/crane-$(CRANE_VERSION)
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s/$(KUBERNETES_VERSION)

# What `make generate` writes; `make verify` fails when any of it differs from git.
GENERATED := api config/crd config/rbac/role.yaml docs/api.md

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: manifests api-docs ## Generate deepcopy code, CRDs and RBAC (everything `verify` checks).
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: api-docs
api-docs: $(CRD_REF_DOCS) ## Generate the CRD reference (docs/api.md) from the API types' comments and markers.
	$(CRD_REF_DOCS) --source-path=./api --config=hack/api-docs.yaml --renderer=markdown --output-path=docs/api.md >/dev/null

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRDs and RBAC role from the API types and markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: verify
verify: generate markdown-check ## Fail if generated files differ from what is committed, the Markdown does not render as meant, or the user guide does not build.
	@drift=$$(git status --porcelain -- $(GENERATED)); if [[ -n $$drift ]]; then \
		git --no-pager diff --stat -- $(GENERATED); echo "$$drift"; \
		echo "verify: generated files are out of date; run 'make generate' and commit the result" >&2; exit 1; fi

.PHONY: markdown-check
markdown-check: ## Fail on Markdown that renders other than meant (a fence never closed, headings inside a code block) or links a missing file.
	go run ./internal/mdcheck/cmd/check-markdown $$(git ls-files '*.md' ':(exclude)*/testdata/*')

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) shellcheck ## Run golangci-lint and shellcheck.
	$(GOLANGCI_LINT) run ./...

# The scripts the operator embeds run as `sh -c` under the image's dash: they
# are checked as POSIX sh, and carry no shebang for shellcheck to read.
.PHONY: shellcheck
shellcheck: ## Run shellcheck (Debian's, pinned in hack/shellcheck.sh) on the scripts the operator runs in pods and the test bed's.
	hack/shellcheck.sh --shell=sh internal/specs/scripts/*.sh
	hack/shellcheck.sh .ci/run hack/*.sh images/redis-uring/*.sh e2e/cluster/*.sh e2e/images/*.sh e2e/kind/kind.sh e2e/kind/runc-host-caps

##@ Test

# hack/testtimes prints go test's output as go test does, keeps its -json
# stream in bin/<suite>/go-test.json and writes where the time went (packages
# and top-level tests, slowest first) to bin/<suite>/times.txt, a failed run's too.
TESTTIMES := go run ./hack/testtimes

.PHONY: test
# Three suites at once, each marked in the output but go test: the server's
# Tcl suites ([tcl]), which keep a CPU busy, its durability harness
# ([harness]: power cuts on loop devices, plain and over TLS; it waits on
# disks), and go test, whose suites wait on servers and reconciles far more
# than they compute. The Tcl suites are the longest and the most sensitive to
# a starved CPU (upstream's waits are short), so the other two run at nice 10
# and take the CPU they leave. Run one after the other they took 1 065-1 209 s
# in CI; side by side 820-900 s (bin/test/times.txt and the [tcl] lines say
# where it went). (`make`, not $(MAKE): a recipe that names $(MAKE) runs even
# under make -n.)
test: envtest-assets server-build $(COSIGN) $(SYFT) $(CRANE) ## Run every test: unit, envtest against a real kube-apiserver and etcd, backups against a real SeaweedFS S3, release signing against a real registry (times: bin/test/times.txt).
	mkdir -p $(LOCALBIN)/test
	e2e/cluster/host-deps.sh docker-registry jq
	( make --no-print-directory -C images/redis-uring test 2>&1 | sed -u 's/^/[tcl] /' ) & tcl=$$!; \
	( nice -n 10 make --no-print-directory -C images/redis-uring/harness test test-tls 2>&1 | sed -u 's/^/[harness] /' ) & harness=$$!; \
	rc=0; KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) PROMETHEUS_OPERATOR_CRDS=$$(hack/prometheus-operator-crds.sh) \
		CERT_MANAGER_CRDS=$$(hack/cert-manager-crds.sh) SEAWEEDFS_BIN=$$(hack/seaweedfs.sh) COSIGN=$(COSIGN) SYFT=$(SYFT) CRANE=$(CRANE) \
		nice -n 10 go test ./... -count=1 -timeout 25m -coverprofile=bin/cover.out -json \
		| $(TESTTIMES) -json $(LOCALBIN)/test/go-test.json -table $(LOCALBIN)/test/times.txt || rc=$$?; \
	hrc=0; wait $$harness || hrc=$$?; \
	[[ $$hrc == 0 ]] || echo "make test: the server's durability harness failed (exit status $$hrc): see its [harness] lines"; \
	trc=0; wait $$tcl || trc=$$?; \
	[[ $$trc == 0 ]] || echo "make test: the server's Tcl suites failed (exit status $$trc): see its [tcl] lines"; \
	exit $$(( rc != 0 ? rc : hrc != 0 ? hrc : trc ))

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver, kube-controller-manager, kube-scheduler from source and fetch etcd into bin/k8s/<version> (cached).
	hack/k8s-binaries.sh kube-apiserver kube-controller-manager kube-scheduler etcd >/dev/null

##@ Build

.PHONY: server-build
server-build: ## Build the server (Valkey 8.1.1 + the io_uring AOF engine) into bin/redis-uring (cached).
	$(MAKE) -C images/redis-uring deps build

.PHONY: build
build: kubectl-uring ## Build the operator binary and the kubectl plugin.
	go build -trimpath -o bin/operator ./cmd/operator

.PHONY: kubectl-uring
kubectl-uring: ## Build the kubectl plugin into bin/kubectl-uring (`kubectl uring` with bin/ on the PATH).
	go build -trimpath -o bin/kubectl-uring ./cmd/kubectl-uring

.PHONY: run
run: ## Run the operator against the current kubeconfig.
	go run ./cmd/operator

##@ Tools

$(CONTROLLER_GEN):
	hack/go-install-tool.sh $@ sigs.k8s.io/controller-tools/cmd/controller-gen $(CONTROLLER_TOOLS_VERSION)

$(KUSTOMIZE):
	hack/go-install-tool.sh $@ sigs.k8s.io/kustomize/kustomize/v5 $(KUSTOMIZE_VERSION)

$(GOLANGCI_LINT):
	hack/go-install-tool.sh $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint $(GOLANGCI_LINT_VERSION)

$(CRD_REF_DOCS):
	hack/go-install-tool.sh $@ github.com/elastic/crd-ref-docs $(CRD_REF_DOCS_VERSION)

$(COSIGN):
	hack/go-install-tool.sh $@ github.com/sigstore/cosign/v2/cmd/cosign $(COSIGN_VERSION)

$(SYFT):
	hack/go-install-tool.sh $@ github.com/anchore/syft/cmd/syft $(SYFT_VERSION) "-X main.version=$(SYFT_VERSION:v%=%)"

$(KIND):
	hack/go-install-tool.sh $@ sigs.k8s.io/kind $(KIND_VERSION)

# Each area's targets live beside the Makefile in hack/make/<area>.mk
# (chart, e2e, observability, server); `make help` lists them too.
include $(sort $(wildcard hack/make/*.mk))
