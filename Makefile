# ebb: developer entry points. `make test` runs every test, including the integration tests on
# real servers (see docs/infrastructure.md).
SHELL := /bin/bash

export UV_PYTHON_DOWNLOADS := never
# The virtualenv's interpreter: Debian's python3.11 where there is one. It has libpython linked into the executable;
# a python3.11 built with --enable-shared (pyenv's, on this project's machines) calls into libpython.so through the
# PLT and executes 9% more instructions for the same back-test (docs/benchmarks.md, "The interpreter").
export UV_PYTHON := $(shell test -x /usr/bin/python3.11 && echo /usr/bin/python3.11 || echo python3.11)
export GOTOOLCHAIN := local

# uv from PATH, else as a module of the system Python (where `pip install uv` puts it on a fresh machine)
UV ?= $(shell command -v uv >/dev/null 2>&1 && echo uv || echo python3.11 -m uv)
INFRA := deploy/local/infra.sh

.PHONY: help install test lint bench run plan infra-install infra-up infra-down infra-status helm manifests image \
	up down

help:
	@echo "make install        uv sync (the workspace venv in .venv, compiled to bytecode)"
	@echo "make test           all tests; integration tests start (and stop) the servers they need"
	@echo "make lint           ruff check, mypy --strict, lint-imports"
	@echo "make bench          benchmarks (python -m bench), written to docs/benchmarks.md#results"
	@echo "make run            ebb run (the embedded mode) on examples/cluster.yaml, in virtual time (deterministic)"
	@echo "make plan           ebb plan --until-stable on examples/cluster.yaml (the dry run)"
	@echo "make infra-install  fetch/build Kafka, Kubernetes, etcd, kwok, Karpenter into ~/.cache/ebb"
	@echo "make infra-up       start the local servers; settings in .infra/env.sh and .infra/env.json"
	@echo "make infra-down     stop them"
	@echo "make helm           build Helm (the Go module proxy) into ~/.cache/ebb/helm-<version>; print its path"
	@echo "make manifests      render charts/ebb into deploy/kubernetes (after a change to the chart)"
	@echo "make image          build the container image (an OCI archive) without a Docker engine; print it, its digest"
	@echo "make up / down      docker compose up -d / down (needs a Docker engine)"

# Compiled to bytecode at install: with PYTHONDONTWRITEBYTECODE set (as on the project's machines) Python never
# writes it, and every process would compile every module it imports again (about 1.4 s of each `ebb` command's
# start); the workspace's own sources too, whose stale files Python recompiles in memory until the next install.
install:
	@$(UV) --version >/dev/null 2>&1 || python3.11 -m pip install --quiet uv
	$(UV) sync --compile-bytecode
	$(UV) run --no-sync python -m compileall -q libs/ebb/src services/*/src apps/*/src bench >/dev/null

test: install
	$(UV) run pytest

lint: install
	$(UV) run ruff check .
	$(UV) run mypy
	$(UV) run lint-imports

bench: install
	$(UV) run python -m bench all --write docs/benchmarks.md

run: install
	$(UV) run ebb run -f examples/cluster.yaml --start 2026-11-23T18:30:00Z --duration 4h --until-stable --stable-for 1h

plan: install
	$(UV) run ebb plan -f examples/cluster.yaml --now 2026-11-23T18:30:00Z --until-stable

infra-install:
	$(INFRA) install

infra-up: install
	$(INFRA) up

infra-down:
	$(INFRA) down

infra-status:
	$(INFRA) status

helm:
	deploy/local/helm.sh path

manifests:
	deploy/local/helm.sh manifests

# Debian's mmdebstrap and the workspace's wheels, no base image, no daemon (deploy/image/build.sh; needs root)
image:
	deploy/image/build.sh build

up:
	docker compose up -d

down:
	docker compose down
