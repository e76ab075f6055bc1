# Two commands do all set-up on a fresh machine: `make test` and `make replay`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help venv engine image doctor test lint replay clean

help:
	@echo "make test    set up everything and run the whole test suite"
	@echo "make replay  set up everything and replay the bundled example"
	@echo "make image   build (or reuse) the runner image and print its ID"
	@echo "make lint    ruff and mypy"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(STAMP)

lint: venv
	$(BIN)/ruff check orchestrator tests bench
	$(BIN)/ruff format --check orchestrator tests bench
	$(BIN)/mypy

test: venv
	$(BIN)/python -m pytest
