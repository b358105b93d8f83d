# The local Kubernetes (included from the Makefile); needs root, Docker, Go >= 1.26, gcc, openssl.
#   make k8s-binaries   build/fetch Kubernetes v1.37.2, helm, kube-router, etcd, containerd, CNI (cached by version)
#   make cluster-up     start (or reuse) the single-node cluster, context wpbench-local, chart installed
#   make cluster-down   stop it (state kept for a fast restart; PURGE=1 removes it)
#   make kueue          build Kueue v0.17.0's manager from its Go module (cached under /var/cache/wpbench/kueue)
#   make kueue-up       install Kueue into the running cluster (`KUEUE=1 make cluster-up` does it as it starts)
.PHONY: k8s-binaries cluster-up cluster-down kueue kueue-up

# Kueue admits grader Jobs of runs that name a LocalQueue (docs/kubernetes.md). On by default, so `make test`
# requires its tests; its cold build costs about 354 CPU-seconds (docs/kubernetes.md); KUEUE=0 leaves it out
# (and its tests then skip).
KUEUE ?= 1

k8s-binaries:
	hack/k8s/binaries.sh

CLUSTER_UP = KUEUE=$(KUEUE) GRADER_IMAGE=$(IMAGE) CONTROLLER_IMAGE=$(CONTROLLER_IMAGE) scripts/cluster-up.sh
cluster-up: runtime-image controller-image
	$(CLUSTER_UP)

cluster-down:
	scripts/cluster-down.sh

kueue:
	hack/kueue/build.sh >/dev/null

kueue-up: setup docker
	scripts/kueue-up.sh
