##@ End-to-end

# E2E_CLUSTER=local (default): e2e/cluster, a one-node Kubernetes built from
# source that boots offline on this machine. E2E_CLUSTER=kind: e2e/kind, a kind
# cluster of a control plane and three workers named uring-e2e, its node image
# built here from the same sources; its registry is kind's local-registry recipe
# on localhost:5001 and its volumes are ext4 loop disks on every worker.
E2E_CLUSTER ?= local
# A release named like the chart keeps object names short (fullname = release name).
E2E_RELEASE ?= uring-redis-operator
E2E_NAMESPACE ?= uring-redis-system
KUBECTL ?= $(ENVTEST_ASSETS)/kubectl
# The registry on the e2e node (e2e/cluster/cluster.sh): e2e-images releases this
# tree there with `make release`'s script, and the chart is installed from it.
ifeq ($(E2E_CLUSTER),kind)
E2E_REGISTRY ?= localhost:5001
else
E2E_REGISTRY ?= localhost:5000
endif
E2E_CHART := oci://$(E2E_REGISTRY)/charts/uring-redis-operator
# The test bed's nodes have this machine's architecture, so its releases build for that
# platform alone, as before multi-arch images (make release adds linux/arm64, built in
# part under qemu-user; make smoke-arm64 runs that server image). Set it to
# "linux/amd64 linux/arm64" to release indexes to the test bed as make release does.
E2E_PLATFORMS ?= linux/$(shell go env GOARCH)
E2E_DIST := $(LOCALBIN)/e2e/dist
# The release before this one, for the lifecycle test's upgrade N-1 -> N: the same
# images and chart released under a lower version (a semver pre-release of VERSION),
# which costs a second push of the same layers rather than a second build.
E2E_PREVIOUS_VERSION ?= $(VERSION)-e2e.previous
# The release users run today, for the upgrade test (make e2e-upgrade): the commit
# whose CHANGELOG closed 0.2.0, with the build fixes cherry-picked that let its pinned
# Debian inputs be fetched today (hack/released.sh), released to the node's registry
# under a pre-release name (this tree's VERSION is still 0.2.0).
E2E_RELEASED_COMMIT ?= 2662d2362a0774eb9445c5e88b528562448277ac
E2E_RELEASED_FIXES ?= cf9d381c5d8a5247e47e7949f97a2e57e5da8cac a20ca09d454afa678d3438e62e2329c40a616552
E2E_RELEASED_VERSION ?= 0.2.0-e2e.released
# kube-router enforces NetworkPolicies on both clusters: TestDefaultInstanceIsClosed
# tries the refusal (E2E_NETWORK_POLICY= on a cluster that enforces none).
export E2E_NETWORK_POLICY ?= enforced
# Local ext4 volumes on the offline cluster: the full suite holds up to 12 at once, the
# sharded cluster test 8 (4 shards of 2 servers).
export E2E_DISKS ?= 24
ifeq ($(E2E_CLUSTER),kind)
E2E_KUBECONFIG ?= $(LOCALBIN)/e2e/kind.kubeconfig
# The workers' ext4 disks are published by the chart's localNvme preset, as on the offline cluster.
export E2E_STORAGE ?= chart
# kind's nodes are containers of this daemon (e2e/kind/kind.sh): TestNodeLost stops one.
export E2E_NODE_DOCKER ?= unix:///run/uring-kind/docker.sock
E2E_HELM_ARGS ?= --set global.imageRegistry=$(E2E_REGISTRY) --values $(REPO_ROOT)/e2e/kind/operator-values.yaml
else
E2E_KUBECONFIG ?= $(LOCALBIN)/e2e/kubeconfig
# e2e/cluster makes the node's ext4 disks; the chart's localNvme preset
# (ci/e2e-values.yaml) publishes them with local-static-provisioner, as in production.
export E2E_STORAGE ?= chart
E2E_HELM_ARGS ?=
endif

.PHONY: e2e-up
e2e-up: ## Bring up the e2e cluster (binaries cached under bin/; seconds once built).
	hack/k8s-binaries.sh kubectl >/dev/null
ifeq ($(E2E_CLUSTER),kind)
	$(MAKE) --no-print-directory $(KIND)
	KIND=$(KIND) E2E_KUBECONFIG=$(E2E_KUBECONFIG) e2e/kind/kind.sh up
else
	e2e/cluster/cluster.sh up
endif

.PHONY: e2e-images
e2e-images: ## Release this tree (as VERSION and E2E_PREVIOUS_VERSION) to the cluster's registry: images from the Dockerfiles, the chart.
	$(MAKE) --no-print-directory release PLATFORMS="$(E2E_PLATFORMS)" VERSION=$(E2E_PREVIOUS_VERSION) REGISTRY=$(E2E_REGISTRY) DIST=$(E2E_DIST)/$(E2E_PREVIOUS_VERSION)
	$(MAKE) --no-print-directory release PLATFORMS="$(E2E_PLATFORMS)" VERSION=$(VERSION) REGISTRY=$(E2E_REGISTRY) DIST=$(E2E_DIST)/$(VERSION)

# The release namespace enforces the Pod Security level restricted, as the chart README advises: the operator passes
# it, and the chart runs its privileged node agents in a namespace of their own.
.PHONY: e2e-install
e2e-install: $(HELM) ## Install or upgrade the operator on the e2e cluster with the chart VERSION from the cluster's registry.
	printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    pod-security.kubernetes.io/enforce: restricted\n    pod-security.kubernetes.io/warn: restricted\n    pod-security.kubernetes.io/audit: restricted\n' \
		$(E2E_NAMESPACE) | $(KUBECTL) --kubeconfig $(E2E_KUBECONFIG) apply -f -
	$(HELM) upgrade --install $(E2E_RELEASE) $(E2E_CHART) --version $(VERSION) --plain-http --kubeconfig $(E2E_KUBECONFIG) \
		--namespace $(E2E_NAMESPACE) --create-namespace --values charts/uring-redis-operator/ci/e2e-values.yaml \
		$(E2E_HELM_ARGS) --wait --timeout 5m

# The test bed's own fixtures, not part of a release: SeaweedFS, the object store
# the backup tests write to, and Prometheus, which the demo runs in the cluster
# (make demo passes E2E_FIXTURES=prometheus). Built once into bin/e2e/images (which
# `cluster.sh up` imports into a re-created node) and imported into the running node.
E2E_FIXTURES ?= seaweedfs
.PHONY: e2e-fixtures
e2e-fixtures: ## Build the fixture images E2E_FIXTURES names (SeaweedFS for the suite) unless bin/e2e/images has them.
	for f in $(E2E_FIXTURES); do [[ -f $(LOCALBIN)/e2e/images/$$f.tar ]] || e2e/images/build.sh $$f; done
ifeq ($(E2E_CLUSTER),kind)
	KIND=$(KIND) E2E_KUBECONFIG=$(E2E_KUBECONFIG) e2e/kind/kind.sh load
endif

# The suite's tier (e2e/tiers_test.go): full runs every scenario whole; ci,
# which .ci/run runs, every feature once, with the list of what it leaves out
# and why printed first.
export E2E_TIER ?= full

.PHONY: e2e
e2e: e2e-up e2e-fixtures e2e-images e2e-install ## Run the e2e suite on a real cluster (E2E_TIER=ci: the tier CI runs; times: bin/e2e/times.txt).
	$(MAKE) --no-print-directory e2e-suite

.PHONY: e2e-suite
e2e-suite: $(HELM) $(COSIGN) ## Run the e2e suite on the cluster as `make e2e` left it, without bringing anything up first.
	mkdir -p $(LOCALBIN)/e2e
	KUBECONFIG=$(E2E_KUBECONFIG) KUBECTL=$(KUBECTL) E2E_HELM=$(HELM) E2E_RELEASE=$(E2E_RELEASE) \
		E2E_NAMESPACE=$(E2E_NAMESPACE) E2E_HELM_ARGS="$(E2E_HELM_ARGS)" E2E_INSTALL_YAML=$(E2E_DIST)/$(VERSION)/install.yaml \
		E2E_COSIGN=$(COSIGN) E2E_DIST=$(E2E_DIST) \
		E2E_CHART=$(E2E_CHART) E2E_VERSION=$(VERSION) E2E_PREVIOUS_VERSION=$(E2E_PREVIOUS_VERSION) \
		E2E_ARTIFACTS=$(LOCALBIN)/e2e go test -tags e2e ./e2e -count=1 -v -timeout 60m -json $(E2E_ARGS) \
		| $(TESTTIMES) -v -tests -1 -json $(LOCALBIN)/e2e/go-test.json -table $(LOCALBIN)/e2e/times.txt

# Not part of `make e2e` (nor CI): RedisBenchmarks of a uring durable server with
# a dataset, alone and during back-to-back RedisBackups, side by side; the
# README's backup cost figure comes from its last log line.
.PHONY: bench-backup
bench-backup: ## Measure what backups cost a running server (throughput and p99 during backups) on the e2e cluster.
	E2E_BACKUP_COST=1 $(MAKE) e2e E2E_ARGS="-run '^TestBackupCost' $(E2E_ARGS)"

# Part of `make e2e` (the full tier), not of CI: a steady writer through day-2
# operations, on Sentinels and on a sharded instance; the tables in
# docs/replication.md are the ones they write.
.PHONY: e2e-availability
e2e-availability: ## Measure write availability through scale, upgrade, image, option and shard changes on the e2e cluster (tables: bin/e2e/availability*.md).
	$(MAKE) e2e E2E_ARGS="-run '^TestWriteAvailabilityThrough' $(E2E_ARGS)"

# Not part of `make e2e` (nor CI): RedisBenchmarks of one uring durable server and
# of a 3-shard cluster of them, side by side; the README's scale-out ratio comes
# from its last log line.
.PHONY: bench-cluster
bench-cluster: ## Measure what sharding buys: one server vs a 3-shard cluster, in one RedisBenchmark on the e2e cluster.
	E2E_CLUSTER_BENCH=1 $(MAKE) e2e E2E_ARGS="-run '^TestClusterScaleOut' $(E2E_ARGS)"

# Not part of `make e2e` (nor CI): it builds a second tree's images, and needs a cluster
# with no operator installed, which it installs itself from the release.
.PHONY: e2e-upgrade
e2e-upgrade: e2e-up $(HELM) $(KUSTOMIZE) $(COSIGN) ## On a cluster without the operator: helm install the release users run (E2E_RELEASED_COMMIT), instances with data, helm upgrade to this tree.
	E2E_KEEP_BUILDER=1 $(MAKE) --no-print-directory release PLATFORMS="$(E2E_PLATFORMS)" VERSION=$(VERSION) REGISTRY=$(E2E_REGISTRY) DIST=$(E2E_DIST)/$(VERSION)
	HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) hack/released.sh $(E2E_RELEASED_COMMIT) $(E2E_RELEASED_VERSION) $(E2E_REGISTRY) \
		$(E2E_DIST)/$(E2E_RELEASED_VERSION) $(E2E_RELEASED_FIXES)
	KUBECONFIG=$(E2E_KUBECONFIG) KUBECTL=$(KUBECTL) E2E_HELM=$(HELM) E2E_RELEASE=$(E2E_RELEASE) \
		E2E_NAMESPACE=$(E2E_NAMESPACE) E2E_HELM_ARGS="$(E2E_HELM_ARGS)" E2E_CHART=$(E2E_CHART) E2E_VERSION=$(VERSION) \
		E2E_COSIGN=$(COSIGN) E2E_DIST=$(E2E_DIST) E2E_RELEASED_VERSION=$(E2E_RELEASED_VERSION) go test -tags e2e ./e2e -count=1 -v -timeout 30m -run '^TestUpgradeFromRelease$$'

.PHONY: e2e-down
e2e-down: ## Remove the e2e cluster and everything it made (caches under bin/ stay).
ifeq ($(E2E_CLUSTER),kind)
	KIND=$(KIND) E2E_KUBECONFIG=$(E2E_KUBECONFIG) e2e/kind/kind.sh down
else
	e2e/cluster/cluster.sh down
endif

.PHONY: print-e2e-kubeconfig print-kubectl
print-e2e-kubeconfig: ; @echo $(E2E_KUBECONFIG)
print-kubectl: ; @echo $(KUBECTL)

##@ Demo

.PHONY: demo
demo: ## The main job: cluster, images, chart, one RedisPersistence per mode, a RedisBenchmark, the comparison table, PNG and Prometheus.
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Remove everything `make demo` made, the cluster included (caches under bin/ stay).
	hack/demo.sh down
