# gpuburst: one entry point for people and CI. `make demo` and `make test` work on a fresh clone.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTHON ?= python3
EXTRAS ?= dev,plot,infra,ansible,tune

.PHONY: setup demo test lint pytest ansible-test image-test lock chart bench clean kube-build kube-up kube-down \
	scheduler-diff

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS)]'
	touch $@

demo: setup
	$(PY) -m scaler simulate --trace scaler/sim/data/philly-sample.csv --pools examples/pools-aws.yaml \
		--report demo-report.json --plot demo-timeline.png

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	@if [ -x tests/lint-extra.sh ]; then tests/lint-extra.sh; fi

pytest: setup kube-build
	$(PY) -m pytest

# The real Kubernetes control plane the tests run (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager of 1.37, built from upstream's Go modules into .cache/kube/bin; reused while
# tests/controlplane/go.mod is unchanged). `make kube-up` starts one on loopback and prints
# `export KUBECONFIG=...` last; `make kube-down` stops every process it started.
kube-build:
	tests/controlplane/build.sh

kube-up: setup kube-build
	$(PY) -m tests.controlplane.plane up

kube-down:
	@if [ -x $(PY) ]; then $(PY) -m tests.controlplane.plane down; else echo "stopped: nothing was running"; fi

# The planner against the real kube-scheduler on random clusters, DRA included; prints a table by
# feature and last `agree=N disagree=M pods=K dra=D`.
scheduler-diff: setup kube-build
	$(PY) -m tests.controlplane.scheduler_diff

# The Ansible collection's checks (ansible-lint, galaxy build, molecule scenarios).
ansible-test: setup
	@if [ -x tests/ansible/run.sh ]; then PATH=$(abspath $(VENV))/bin:$$PATH tests/ansible/run.sh; \
	else echo "ansible-test: no tests/ansible/run.sh yet"; fi

# Build scaler/Dockerfile with podman and run it read-only as its non-root user (skipped, saying so,
# where podman cannot run; .ci/run makes that a failure).
image-test:
	tests/image/run.sh

test: lint pytest ansible-test image-test

# The image's locked dependency set (versions and hashes for every platform), from pyproject.toml.
lock: setup
	$(VENV)/bin/uv pip compile pyproject.toml scaler/build-requirements.in --generate-hashes --universal \
		--python-version 3.11 --custom-compile-command "make lock" -q -o scaler/requirements.lock

# charts/gpuburst-scaler's generated files: its RBAC rules (scaler.permissions) and values.schema.json's
# `config` (scaler.core.config). tests/platform/test_charts.py fails while they are stale.
chart: setup
	$(PY) -m scaler.chart

# Prints the figures the docs quote and writes each into its block of README.md or docs/ (between the markers
# <!-- bench/...: begin --> and <!-- bench/...: end -->, bench/doc_blocks.py); no figure there is typed by hand.
bench: setup
	$(PY) bench/plan_scale.py --readme README.md
	$(PY) bench/plan_scale.py --mix dra --readme README.md
	$(PY) bench/plan_scale.py --scale xl --readme README.md
	$(PY) bench/simulate_traces.py --readme README.md --plots out  # out/repair.png: repair on beside off
	$(PY) bench/repair_seeds.py --readme docs/simulator.md  # repair on against off, seeds 0-4 of each pair

clean:
	rm -rf $(VENV) .cache/kube/run .mypy_cache .ruff_cache .pytest_cache .hypothesis demo-report.json demo-timeline.png
