##@ End-to-end

# E2E_CLUSTER=local (default): e2e/cluster, a one-node Kubernetes built from
# source that boots offline on this machine. E2E_CLUSTER=kind: a kind cluster
# named uring-e2e, for machines with Docker and kind (images are loaded with
# `kind load`, volumes come from kind's local-path class).
E2E_CLUSTER ?= local
# A release named like the chart keeps object names short (fullname = release name).
E2E_RELEASE ?= uring-redis-operator
E2E_NAMESPACE ?= uring-redis-system
KUBECTL ?= $(ENVTEST_ASSETS)/kubectl
E2E_IMAGES := redis-uring uring-redis-operator redis-exporter uring-redis-bench
# A second tag of the server image the chart runs by default: the lifecycle test's
# `helm upgrade --set redisImage=...` rolls the instances onto it. No registry is
# reachable, so it is tagged in the node's image store.
E2E_REDIS_IMAGE := redis-uring:8.1.1
E2E_UPGRADE_REDIS_IMAGE ?= redis-uring:8.1.1-e2e-upgrade
# The offline cluster's containerd (e2e/cluster/cluster.sh); its image store
# holds the tag only while the cluster is up, so `make e2e` tags after e2e-up.
E2E_CONTAINERD := /run/uring-e2e/containerd/containerd.sock
# Local ext4 volumes on the offline cluster: the full suite holds up to 12 at once.
export E2E_DISKS ?= 16
ifeq ($(E2E_CLUSTER),kind)
E2E_KUBECONFIG ?= $(LOCALBIN)/e2e/kind.kubeconfig
# kind's nodes have no local disks to discover: its local-path class backs local-nvme.
E2E_HELM_ARGS ?= --set storageClasses.localNvme.create=false --set storageClasses.localNvme.name=standard
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
	grep -qx uring-e2e <<<"$$(kind get clusters)" || kind create cluster --name uring-e2e --kubeconfig $(E2E_KUBECONFIG)
else
	e2e/cluster/cluster.sh up
endif

.PHONY: e2e-images
e2e-images: ## Build the images from the repository's Dockerfiles and load them into the cluster.
ifeq ($(E2E_CLUSTER),kind)
	docker build -t uring-redis-operator:dev .
	docker build -t redis-uring:8.1.1 -f images/redis-uring/Dockerfile .
	docker build -t uring-redis-bench:dev -f images/bench/Dockerfile .
	docker build -t oliver006/redis_exporter:$$(awk '$$1 == "require" {print $$3}' e2e/images/redis-exporter/go.mod) e2e/images/redis-exporter
	docker tag $(E2E_REDIS_IMAGE) $(E2E_UPGRADE_REDIS_IMAGE)
	kind load docker-image --name uring-e2e uring-redis-operator:dev redis-uring:8.1.1 uring-redis-bench:dev \
		oliver006/redis_exporter:$$(awk '$$1 == "require" {print $$3}' e2e/images/redis-exporter/go.mod) $(E2E_UPGRADE_REDIS_IMAGE)
else
	e2e/images/build.sh $(E2E_IMAGES)
	[[ ! -S $(E2E_CONTAINERD) ]] || ctr --address $(E2E_CONTAINERD) -n k8s.io images tag --force \
		docker.io/library/$(E2E_REDIS_IMAGE) docker.io/library/$(E2E_UPGRADE_REDIS_IMAGE) >/dev/null
endif

.PHONY: e2e-install
e2e-install: $(HELM) ## Install or upgrade the operator on the e2e cluster with the Helm chart.
	$(HELM) upgrade --install $(E2E_RELEASE) charts/uring-redis-operator --kubeconfig $(E2E_KUBECONFIG) \
		--namespace $(E2E_NAMESPACE) --create-namespace --values charts/uring-redis-operator/ci/e2e-values.yaml \
		$(E2E_HELM_ARGS) --wait --timeout 5m

.PHONY: e2e
e2e: e2e-up e2e-images e2e-install build-installer ## Run the e2e suite on a real cluster (E2E_ARGS=-short: the quick subset).
	KUBECONFIG=$(E2E_KUBECONFIG) KUBECTL=$(KUBECTL) E2E_HELM=$(HELM) E2E_RELEASE=$(E2E_RELEASE) \
		E2E_NAMESPACE=$(E2E_NAMESPACE) E2E_HELM_ARGS="$(E2E_HELM_ARGS)" E2E_INSTALL_YAML=$(CURDIR)/dist/install.yaml \
		E2E_UPGRADE_REDIS_IMAGE=$(E2E_UPGRADE_REDIS_IMAGE) \
		go test -tags e2e ./e2e -count=1 -v -timeout 60m $(E2E_ARGS)

.PHONY: e2e-down
e2e-down: ## Remove the e2e cluster and everything it made (caches under bin/ stay).
ifeq ($(E2E_CLUSTER),kind)
	kind delete cluster --name uring-e2e
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
