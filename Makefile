# Targets CI also uses: setup lint typecheck test bench verify.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
IMAGE ?= wpbench-grader:dev
CONCURRENCY ?= 2

.PHONY: setup docker browser runtime-image demo test test-prereqs test-images go-builds test-scale test-unit lint typecheck bench verify schema clean kind-up e2e-kind kind-down controller-image

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	PYTHONWARNINGS=ignore $(PY) -m pip install -q -e '.[dev]'  # no setuptools editable-install banner
	touch $@

docker:
	scripts/ensure-docker.sh

# Headless Chromium for the report's browser test (Debian's packages; nothing when both are there).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver; }

runtime-image: docker
	runtime/build.sh $(IMAGE)

# The main job: a reference-solution check of a stratified subset on local Docker.
demo: setup runtime-image
	$(BIN)/wpbench-k8s run --check-reference-solution --limit 12 --execution-concurrency $(CONCURRENCY) --report
	@echo ""
	@echo "Next:"
	@echo "  open the report named on the line 'report:' above (one self-contained HTML file)"
	@echo "  source .venv/bin/activate"
	@echo "  wpbench-k8s runs                                      # the runs in output/"
	@echo "  wpbench-k8s run --check-exploits --limit 12            # trivial cheats must all fail"
	@echo "  wpbench-k8s run --model-name gpt-4o --limit 20 --report # a model (needs OPENAI_API_KEY)"

# The Kubernetes tests run against the real local cluster: it is started (or reused) first.
# With KUEUE=1 (the default, mk/cluster.mk) Kueue is installed and its tests are required; KUEUE=0 skips them.
# The kwok scale scenario (tests/scale) is `make test-scale`'s and `make bench-k8s`'s: its cold kwok build and
# its run cost about 5 min of a cold CI run (issue 23), and its controller behaviour is tested on the real cluster.
test: test-prereqs
	WPBENCH_KUEUE=$(KUEUE) $(BIN)/pytest -q --durations=25 -m 'not scale' --junitxml=output/junit-test.xml -n 2 --dist load

# Two lanes, so one's downloads and I/O overlap the other's compiling: the images (pip, apt, debootstrap, docker
# build; every use of the host's dpkg is in this lane) and the Go builds (private module and apt caches). Each lane
# is serial; the cluster starts when both are done.
test-prereqs:
	$(MAKE) -j2 --output-sync=line test-images go-builds
	$(CLUSTER_UP)

test-images:
	$(MAKE) setup
	$(MAKE) runtime-image
	$(MAKE) controller-image
	$(MAKE) browser

go-builds:
	$(MAKE) k8s-binaries
	$(if $(filter 1,$(KUEUE)),$(MAKE) kueue)

test-scale: setup kwok
	$(BIN)/pytest -q -m scale tests/scale

test-unit: setup
	$(BIN)/pytest -q tests/unit

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy cli runtime/wpbench_runtime controller bench

bench: setup runtime-image
	PYTHONPATH=bench $(PY) -m wpbench_gradebench --image $(IMAGE)

schema: setup
	$(PY) -m wpbench_runtime.schema
	$(PY) -m wpbench_k8s.summary.schema

verify: lint typecheck test

clean:
	rm -rf output build .pytest_cache .mypy_cache .ruff_cache

# Kubernetes targets: controller-image kind-up e2e-kind kind-down bench-k8s chart-lint.
include mk/kind.mk
include mk/cluster.mk
