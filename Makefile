# Rocklet developer commands. Everything installs into .venv; nothing is assumed preinstalled.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DATA   ?= ./data
PYTEST_ARGS ?=

.PHONY: install tools bench-tools run cluster test lint typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(MAKE) --no-print-directory tools
	touch $(STAMP)

install: $(STAMP)

## tools: system packages the tests use: docker-compose (Debian's 1.29) validates
## docker/docker-compose.yml. Installed with apt when missing and we are root;
## otherwise a note (tests/ops/test_docker.py then fails saying what is missing).
tools:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; \
	  else \
	    echo "note: docker-compose is missing; run 'apt-get install docker-compose' as root" >&2; \
	  fi; }

## run: name server + broker in one process on $(DATA) (Ctrl-C stops cleanly)
run: install
	$(BIN)/rocklet standalone --data-dir $(DATA)

## cluster: name server + broker-a + broker-b as local processes (Ctrl-C stops them)
cluster: install
	$(BIN)/rocklet cluster --data-dir $(DATA)/cluster

## lint: ruff and mypy
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/typecheck.py

typecheck: install
	$(BIN)/python tools/typecheck.py

## test: lint, type-check, then the whole pytest suite
test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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
$(BENCH_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

## bench: the benchmark suite, Rocklet beside Redis, RabbitMQ, NATS and the machine's
## limits (never part of make test; ~20 min); results go to bench-results/
bench: $(BENCH_STAMP) bench-tools
	$(BIN)/rocklet bench

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
