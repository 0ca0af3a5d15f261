# backgen's front door. Every target sets itself up on a fresh machine (a .venv next to this file).
# TORCH_SPEC pins the local CPU build; a GPU user may override it, e.g. `make TORCH_SPEC=torch test`.
PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The names data: a local copy when one is at hand, otherwise train/ downloads and verifies it.
DATA ?= $(firstword $(wildcard ../shared/data/names.txt))
TRAIN_ARGS ?=
OP ?=

.PHONY: help venv generate test lint format train check-generated clean

help:
	@echo "make train     train the makemore MLP with the generated backward (DATA=path/to/names.txt)"
	@echo "make test      run the test suite"
	@echo "make generate  derive and emit generated/ from the op catalogue"
	@echo "make lint      ruff + black --check"
	@echo "make format    black + ruff --fix"

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

generate: $(STAMP)
	$(PY) -m derive generate $(sort $(wildcard ops/*.py)) --out generated

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check derive train tests
	$(PY) -m black --check derive train tests generated

format: $(STAMP)
	$(PY) -m black derive train tests
	$(PY) -m ruff check --fix derive train tests

train: $(STAMP)
	$(PY) -m train $(if $(DATA),--data $(DATA)) $(TRAIN_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
