# Kubernetes targets (included from the Makefile).
#   make controller-image   build the controller image (wheels fetched by the host's pip; no index in the build)
#   make kind-up            kind cluster wpbench (1 control plane, 2 workers) + images kind-loaded + helm install
#   make test-kind          the real-cluster tests that hold on any cluster, and the multi-node ones, on it
#   make e2e-kind           submit a 10-test reference run, wait, fetch results, assert all passed
#   make kind-down          remove the cluster (and our engine, if kind-up started one; PURGE=1 its data too)
#   make bench-k8s          1,000 candidates on 10 kwok nodes against a real kube-apiserver + etcd (docs/scale.md)
#   make bench-k8s-scale    50,050 candidates on 100 kwok nodes (the same, at the issue's scale)
#   make bench-k8s-scale-fast  the same in fast mode, 50 candidates a grader pod (--candidates-per-pod 50)
#   make kwok               build kwok and kwokctl v0.8.0 from their Go module (cached under /var/cache/wpbench/kwok)
#   make chart-lint         helm lint through helm-sdkpy (Python >= 3.12)
# kind v0.33.0, built from its Go module (hack/kind/build.sh). Where kind's node image cannot be pulled the node
# image is built here (hack/kind/build-node-image.sh), where the machine's Docker cannot start kind's nodes a
# Docker 28.5.2 of our own runs beside it (scripts/kind-engine.sh): docs/kubernetes.md, "kind".
# Not part of `make test` (CI): a cold make kind-up costs 13 min (its Go builds and node image) on top of the local
# cluster and the kind tests 12 min on this machine, past the 60-minute budget for a cold .ci/run; make test-kind
# runs them.

KIND_CLUSTER ?= wpbench
CONTROLLER_IMAGE ?= wpbench-controller:dev
# The chart's default controller image is wpbench-controller:<appVersion>: controller-image tags that too,
# so a plain `helm install` finds the image it names.
CHART_APP_VERSION := $(shell sed -n 's/^appVersion: "\(.*\)"/\1/p' charts/wpbench-k8s/Chart.yaml)
CONTROLLER_PYTHON ?= 3.14  # the python3 of Debian sid (the image base); wheels are fetched for it
CONTROLLER_BASE ?= $(shell docker image inspect wpbench-base:sid >/dev/null 2>&1 && echo wpbench-base:sid || echo debian:sid-slim)
WHEELS := build/controller-wheels
PYTHON312 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python) $(shell command -v python3.12))

.PHONY: controller-wheels controller-image kind-up test-kind e2e-kind kind-down bench-k8s bench-k8s-scale bench-k8s-scale-fast kwok chart-lint chart-crd

controller-wheels: setup
	rm -rf $(WHEELS) && mkdir -p $(WHEELS)
	# A fixed date in the wheel's zip: the same code gives the same bytes, so a warm controller-image (and kind-up's
	# image load) reuses what it built.
	SOURCE_DATE_EPOCH=315532800 $(PY) -m pip wheel -q --no-deps -w $(WHEELS) .
	$(PY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml","rb"))["project"]["dependencies"]))' > $(WHEELS)/requirements.txt
	$(PY) -m pip download -q -d $(WHEELS) --only-binary=:all: --python-version $(CONTROLLER_PYTHON) \
	  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
	  --implementation cp -r $(WHEELS)/requirements.txt

controller-image: docker controller-wheels
	docker build -q -f controller/Dockerfile --build-arg BASE_IMAGE=$(CONTROLLER_BASE) -t $(CONTROLLER_IMAGE) $(WHEELS)
	docker tag $(CONTROLLER_IMAGE) wpbench-controller:$(CHART_APP_VERSION)

kind-up: runtime-image controller-image
	KIND_CLUSTER=$(KIND_CLUSTER) GRADER_IMAGE=$(IMAGE) CONTROLLER_IMAGE=$(CONTROLLER_IMAGE) scripts/kind-up.sh

# The cluster tests that are not about the single-node build (those carry the local_cluster marker and skip),
# then the multi-node ones (tests/k8s/test_kind_multinode.py).
KIND_TESTS ?= tests/k8s/test_cluster_path.py::test_reference_check_through_submit_matches_the_local_run \
  tests/k8s/test_node_cluster.py::test_deny_all_policy_refuses_a_grader_pod_the_api_server_other_pods_and_the_world \
  tests/k8s/test_requeue_cache.py tests/k8s/test_models_cluster.py tests/k8s/test_failure_parity.py \
  tests/k8s/test_kind_multinode.py
test-kind: setup kind-up
	CLUSTER=kind KIND_CLUSTER=$(KIND_CLUSTER) WPBENCH_IMAGE=$(IMAGE) WPBENCH_CONTROLLER_IMAGE=$(CONTROLLER_IMAGE) \
	  $(BIN)/pytest -q -p no:cacheprovider $(KIND_TESTS)

e2e-kind: setup
	KIND_CLUSTER=$(KIND_CLUSTER) GRADER_IMAGE=$(IMAGE) WPBENCH=$(BIN)/wpbench-k8s scripts/kind-e2e.sh

kind-down:
	KIND_CLUSTER=$(KIND_CLUSTER) scripts/kind-down.sh

kwok:
	hack/kwok/build.sh >/dev/null

bench-k8s: setup kwok
	PYTHONPATH=bench $(PY) -m wpbench_scale --tests 50 --variants 20 --nodes 10 --json output/bench-k8s.json

bench-k8s-scale: setup kwok
	PYTHONPATH=bench $(PY) -m wpbench_scale --tests 350 --variants 143 --nodes 100 --timeout 3600 --json output/bench-k8s-scale.json

bench-k8s-scale-fast: setup kwok
	PYTHONPATH=bench $(PY) -m wpbench_scale --tests 350 --variants 143 --nodes 100 --candidates-per-pod 50 \
	  --timeout 3600 --json output/bench-k8s-scale-fast.json

chart-crd: setup
	$(PY) -c 'from wpbench_k8s.kube.crd import crd_yaml; print(crd_yaml(), end="")' > charts/wpbench-k8s/templates/crd.yaml

chart-lint:
	test -x build/helm-venv/bin/python || { test -n "$(PYTHON312)" || { echo "chart-lint: needs Python >= 3.12" >&2; exit 1; }; \
	  $(PYTHON312) -m venv build/helm-venv && build/helm-venv/bin/pip install -q helm-sdkpy; }
	build/helm-venv/bin/python -c 'import asyncio, json, sys, helm_sdkpy as h; r = asyncio.run(h.Lint(h.Configuration()).run("charts/wpbench-k8s")); print(json.dumps(r, default=str)); sys.exit(1 if r.get("Errors") else 0)'
