# Rocklet developer commands. Everything installs into .venv; nothing is assumed
# preinstalled but Python >= 3.11 and make.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check
DATA   ?= ./data
HOST   ?= 127.0.0.1
PYTEST_ARGS ?=
# The interpreters `make test-pythons` runs the fast tier on, besides the default one;
# ":pure" runs that one with ROCKLET_PURE_PYTHON=1 (the Python twins of the compiled codecs).
EXTRA_PYTHONS ?= 3.12 3.13:pure

RUNTIME_STAMP := $(VENV)/.runtime-stamp
DEV_STAMP     := $(VENV)/.dev-stamp
# What the install builds from: a changed .pyx rebuilds the compiled codecs.
BUILD_INPUTS  := pyproject.toml setup.py $(wildcard */_speedups.pyx */*.pxi)

.PHONY: install dev tools bench-tools run cluster test test-pythons lint typecheck bench bench-tls bench-acl bench-vs-rocketmq prepare-pythons clean

$(BIN)/python:
	@echo "==> creating the virtual environment $(VENV) ($$($(PYTHON) --version))"
	$(PYTHON) -m venv $(VENV)
	@$(PIP) install --quiet --upgrade pip

## install: the runtime only (broker, name server, SDK, CLI), editable
$(RUNTIME_STAMP): $(BUILD_INPUTS) | $(BIN)/python
	@echo "==> installing rocklet and its runtime dependencies into $(VENV)"
	$(PIP) install --progress-bar on -e .
	@touch $@

install: $(RUNTIME_STAMP)

## dev: what the tests need too (linters, pytest, Spark, the official C++ client)
$(DEV_STAMP): $(BUILD_INPUTS) | $(BIN)/python
	@echo "==> installing rocklet with the test and lint tools into $(VENV)"
	$(PIP) install --progress-bar on -e '.[dev]'
	@$(MAKE) --no-print-directory tools
	@touch $@ $(RUNTIME_STAMP)

dev: $(DEV_STAMP)

## tools: system packages the tests use: docker-compose (Debian's 1.29) validates
## docker/docker-compose.yml. Installed with apt when missing and we are root;
## otherwise a note (tests/ops/test_docker.py then fails saying what is missing).
tools:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "==> installing docker-compose with apt (validates docker/docker-compose.yml)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; \
	  else \
	    echo "note: docker-compose is missing; run 'apt-get install docker-compose' as root" >&2; \
	  fi; }

## run: name server + broker in one process on $(DATA), listening on $(HOST) only
## (Ctrl-C stops cleanly). HOST=0.0.0.0 opens it to the network.
run: install
	@echo "==> starting rocklet standalone: name server $(HOST):9876, broker $(HOST):10911, data in $(DATA)"
	$(BIN)/rocklet standalone --data-dir $(DATA) --host $(HOST)

## cluster: name server + broker-a + broker-b + their slaves broker-a-s, broker-b-s as
## local processes (Ctrl-C stops them),
## each broker with a Prometheus endpoint (the metrics extra)
METRICS_STAMP := $(VENV)/.metrics-stamp
$(METRICS_STAMP): pyproject.toml $(RUNTIME_STAMP)
	@echo "==> installing the metrics extra (prometheus-client) into $(VENV)"
	$(PIP) install --progress-bar on -e '.[metrics]'
	@touch $@

cluster: $(METRICS_STAMP)
	$(BIN)/rocklet cluster --data-dir $(DATA)/cluster

## lint: ruff and mypy
lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/typecheck.py

typecheck: dev
	$(BIN)/python tools/typecheck.py

## test: lint, type-check, then the whole pytest suite
test: lint
	$(BIN)/python -m pytest --durations=25 $(PYTEST_ARGS)

## test-pythons: the fast tier (no Spark, no official C++ client, nothing marked slow, no
## adversity or replication process tiers)
## on each of $(EXTRA_PYTHONS) found through pyenv or on PATH, in .venv-<version>
test-pythons:
	@tools/test_pythons.sh $(EXTRA_PYTHONS)

## prepare-pythons: only build those environments (CI does it while `make test` runs)
prepare-pythons:
	@tools/test_pythons.sh --prepare $(EXTRA_PYTHONS)

## bench-tools: the peers `make bench` starts on loopback (Debian's redis-server,
## rabbitmq-server, nats-server), installed with apt when missing and we are root;
## otherwise a note (rocklet bench then skips them and says why).
bench-tools:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	test -x /usr/lib/rabbitmq/bin/rabbitmq-server || missing="$$missing rabbitmq-server"; \
	command -v nats-server >/dev/null 2>&1 || missing="$$missing nats-server"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else \
	    echo "note: missing$$missing; run 'apt-get install$$missing' as root" >&2; \
	  fi; \
	fi

BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): pyproject.toml $(DEV_STAMP)
	$(PIP) install --quiet -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

## bench: the benchmark suite, Rocklet beside Redis, RabbitMQ, NATS and the machine's
## limits (never part of make test; ~25 min); results go to bench-results/
bench: $(BENCH_STAMP) bench-tools
	$(BIN)/rocklet bench

## bench-tls: what TLS costs the broker, plain and TLS rounds alternated on one
## permissive broker (~3 min; BENCHMARKS.md, "TLS cost")
bench-tls: $(DEV_STAMP)
	$(BIN)/python bench/tls_bench.py

## bench-acl: ACL on vs off (send, pull, C++ send; alternating brokers, PAIRS pairs);
## BENCHMARKS.md "Security" has the figures
PAIRS ?= 2
bench-acl: $(DEV_STAMP)
	$(BIN)/python bench/acl_bench.py --pairs $(PAIRS)

## bench-vs-rocketmq: Rocklet beside a RocketMQ 4.x binary release, driven by the
## release's own Java benchmark tools (~25 min; needs java). RocketMQ binds 0.0.0.0.
## make bench-vs-rocketmq ROCKETMQ_HOME=DIR [VS_ROCKETMQ_ARGS='--pairs 3 --json vs.json']
VS_ROCKETMQ_ARGS ?=
bench-vs-rocketmq: $(DEV_STAMP)
	$(if $(ROCKETMQ_HOME),,$(error give ROCKETMQ_HOME=<a RocketMQ 4.x binary release>))
	$(BIN)/rocklet bench vs-rocketmq --rocketmq-home "$(ROCKETMQ_HOME)" $(VS_ROCKETMQ_ARGS)

clean:
	rm -rf $(VENV) $(VENV)-* build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
	rm -f */_speedups.c */_speedups.*.so
