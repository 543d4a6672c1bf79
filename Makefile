# Rocklet developer commands. Everything installs into .venv; nothing is assumed preinstalled.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DATA   ?= ./data
PYTEST_ARGS ?=

.PHONY: install run test lint typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## run: name server + broker in one process on $(DATA) (Ctrl-C stops cleanly)
run: install
	$(BIN)/rocklet standalone --data-dir $(DATA)

## lint: ruff and mypy
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

typecheck: install
	$(BIN)/mypy

## test: lint, type-check, then the whole pytest suite
test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## bench: benchmarks (never part of make test); results go to bench-results/
bench: install
	$(BIN)/rocklet bench

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
