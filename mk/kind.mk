# Kubernetes targets (included from the Makefile).
#   make controller-image   build the controller image (wheels fetched by the host's pip; no index in the build)
#   make kind-up            kind cluster + grader and controller images loaded + helm install
#   make e2e-kind           submit a 10-test reference run, wait, fetch results, assert all passed
#   make kind-down          delete the kind cluster
#   make bench-k8s          1,000 candidates on 10 kwok nodes against a real kube-apiserver + etcd (docs/scale.md)
#   make bench-k8s-scale    50,050 candidates on 100 kwok nodes (the same, at the issue's scale)
#   make kwok               build kwok and kwokctl v0.8.0 from their Go module (cached under /var/cache/wpbench/kwok)
#   make chart-lint         helm lint through helm-sdkpy (Python >= 3.12)
# kind >= 0.24 (NetworkPolicy enforced by kindnetd); written against kind 0.33 / Kubernetes 1.37.

KIND_CLUSTER ?= wpbench
CONTROLLER_IMAGE ?= wpbench-controller:dev
# The chart's default controller image is wpbench-controller:<appVersion>: controller-image tags that too,
# so a plain `helm install` finds the image it names.
CHART_APP_VERSION := $(shell sed -n 's/^appVersion: "\(.*\)"/\1/p' charts/wpbench-k8s/Chart.yaml)
CONTROLLER_PYTHON ?= 3.14  # the python3 of Debian sid (the image base); wheels are fetched for it
CONTROLLER_BASE ?= $(shell docker image inspect wpbench-base:sid >/dev/null 2>&1 && echo wpbench-base:sid || echo debian:sid-slim)
WHEELS := build/controller-wheels
PYTHON312 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python) $(shell command -v python3.12))

.PHONY: controller-wheels controller-image kind-up e2e-kind kind-down bench-k8s bench-k8s-scale kwok chart-lint chart-crd

controller-wheels: setup
	rm -rf $(WHEELS) && mkdir -p $(WHEELS)
	$(PY) -m pip wheel -q --no-deps -w $(WHEELS) .
	$(PY) -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml","rb"))["project"]["dependencies"]))' > $(WHEELS)/requirements.txt
	$(PY) -m pip download -q -d $(WHEELS) --only-binary=:all: --python-version $(CONTROLLER_PYTHON) \
	  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
	  --implementation cp -r $(WHEELS)/requirements.txt

controller-image: docker controller-wheels
	docker build -q -f controller/Dockerfile --build-arg BASE_IMAGE=$(CONTROLLER_BASE) -t $(CONTROLLER_IMAGE) $(WHEELS)
	docker tag $(CONTROLLER_IMAGE) wpbench-controller:$(CHART_APP_VERSION)

kind-up: runtime-image controller-image
	KIND_CLUSTER=$(KIND_CLUSTER) GRADER_IMAGE=$(IMAGE) CONTROLLER_IMAGE=$(CONTROLLER_IMAGE) scripts/kind-up.sh

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

chart-crd: setup
	$(PY) -c 'from wpbench_k8s.kube.crd import crd_yaml; print(crd_yaml(), end="")' > charts/wpbench-k8s/templates/crd.yaml

chart-lint:
	test -x build/helm-venv/bin/python || { test -n "$(PYTHON312)" || { echo "chart-lint: needs Python >= 3.12" >&2; exit 1; }; \
	  $(PYTHON312) -m venv build/helm-venv && build/helm-venv/bin/pip install -q helm-sdkpy; }
	build/helm-venv/bin/python -c 'import asyncio, json, sys, helm_sdkpy as h; r = asyncio.run(h.Lint(h.Configuration()).run("charts/wpbench-k8s")); print(json.dumps(r, default=str)); sys.exit(1 if r.get("Errors") else 0)'
