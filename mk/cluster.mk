# The local Kubernetes (included from the Makefile); needs root, Docker, Go >= 1.26, gcc, openssl.
#   make k8s-binaries   build/fetch Kubernetes v1.37.2, helm, kube-router, etcd, containerd, CNI (cached by version)
#   make cluster-up     start (or reuse) the single-node cluster, context wpbench-local, chart installed
#   make cluster-down   stop it (state kept for a fast restart; PURGE=1 removes it)
.PHONY: k8s-binaries cluster-up cluster-down

k8s-binaries:
	hack/k8s/build.sh
	hack/k8s/build-helm.sh
	hack/kube-router/build.sh
	hack/k8s/fetch-debs.sh
	hack/k8s/write-paths.sh

cluster-up: runtime-image controller-image
	GRADER_IMAGE=$(IMAGE) CONTROLLER_IMAGE=$(CONTROLLER_IMAGE) scripts/cluster-up.sh

cluster-down:
	scripts/cluster-down.sh
