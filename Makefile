# Two commands do all set-up on a fresh machine: `make test` and `make replay`.
# Set-up = a virtualenv with the package (reinstalled only when pyproject.toml changes),
# a Docker engine (scripts/ensure-docker) and the runner image (scripts/build-images,
# skipped when its build context is unchanged).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNNER_IMAGE := orchestrator-runner:latest
# Wheels the project-image tests install offline (--no-index), downloaded before pytest starts.
WHEELHOUSE := .cache/wheelhouse
WHEELHOUSE_LISTS := $(wildcard tests/wheelhouse/*.txt)

# ORCHESTRATOR_DOCKERD_ROOT=DIR: use a private engine under DIR (scripts/ensure-docker).
ifneq ($(strip $(ORCHESTRATOR_DOCKERD_ROOT)),)
export DOCKER_HOST ?= unix://$(abspath $(ORCHESTRATOR_DOCKERD_ROOT))/docker.sock
endif

# make test-fast PYTEST_ARGS="-x -k lanes": extra pytest arguments.
PYTEST_ARGS ?=

# make replay REPO=path/to/repo [BASE=main] [PATCH=HEAD] [ARGS="--fixture f.json --replays 9"]
REPO ?=
BASE ?= main
PATCH ?= HEAD
ARGS ?=

.PHONY: help venv engine image postgres podman wheelhouse browser junit-xsd gitlab-ci-local doctor test test-fast lint docs replay stop-engine

help:
	@echo "make test         set up everything and run the whole test suite"
	@echo "make test-fast    the inner loop: the tests that need no Docker engine, no"
	@echo "                  PostgreSQL and no browser (pure, unit, in-process CLI tests)"
	@echo "make replay       set up everything and replay the bundled example"
	@echo "                  (or: make replay REPO=path BASE=rev PATCH=rev)"
	@echo "make image        build (or reuse) the runner image and print its ID"
	@echo "make doctor       engine, runner image, git and Python: one line each"
	@echo "make lint         ruff and mypy"
	@echo "make docs         build the documentation site (docs/, mkdocs.yml) into .cache/site"
	@echo "make wheelhouse   download the wheels the project-image tests install offline"
	@echo "make engine       start a Docker engine unless one answers"
	@echo "make venv         create .venv and install the package with its dev extra"
	@echo "make stop-engine  stop the Docker engine this project started (never another)"

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
		rm -rf $(VENV) && scripts/apt-install python3-venv && $(PYTHON) -m venv $(VENV); }

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

venv: $(STAMP)

engine:
	@scripts/ensure-docker

# Prints the runner image ID (sha256:...) on stdout; progress goes to stderr.
image: venv engine
	@scripts/build-images

# The ledger tests start a throwaway PostgreSQL server: make sure its binaries exist.
postgres:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
		|| scripts/apt-install postgresql-15 || scripts/apt-install postgresql

# The Podman tests (tests/engines/test_podman.py) run when Debian's podman and its init
# (catatonit) are there; installed here when this machine allows it, skipped otherwise.
podman:
	@{ command -v podman && test -e /usr/libexec/podman/catatonit; } >/dev/null 2>&1 \
		|| scripts/apt-install podman catatonit \
		|| echo "make: podman is not installed: its tests are skipped" >&2

# Each list is resolved on its own (they pin different pytest versions) with the host's pip.
$(WHEELHOUSE)/.done: $(WHEELHOUSE_LISTS) | $(STAMP)
	@mkdir -p $(WHEELHOUSE)
	@for list in $(WHEELHOUSE_LISTS); do \
		$(BIN)/python -m pip download --quiet --disable-pip-version-check \
			--dest $(WHEELHOUSE) --requirement $$list || exit 1; \
	done
	@touch $@

wheelhouse: $(WHEELHOUSE)/.done

# The report tests drive headless Chromium: Debian's browser and its driver.
browser:
	@{ command -v chromium && command -v chromedriver; } >/dev/null \
		|| scripts/apt-install chromium chromium-driver

# The report tests validate JUnit XML against a published schema: Jenkins' junit-10.xsd,
# which pytest's source distribution carries (testing/example_scripts/junit-10.xsd).
JUNIT_XSD_PYTEST := 9.2.0
JUNIT_XSD_SDIST := $(VENV)/cache/pytest-$(JUNIT_XSD_PYTEST).tar.gz

$(JUNIT_XSD_SDIST): | $(BIN)/python
	$(BIN)/python -m pip download --quiet --disable-pip-version-check --no-deps \
		--no-binary :all: --dest $(VENV)/cache pytest==$(JUNIT_XSD_PYTEST)

junit-xsd: $(JUNIT_XSD_SDIST)

# The GitLab recipe (docs/ci/gitlab-ci.yml) runs for real in the tests with gitlab-ci-local,
# an npm package (pinned: 4.74 and later need Node.js 22 or newer), installed
# under .cache/npm rather than globally; it runs shell jobs with rsync.
GITLAB_CI_LOCAL_VERSION := 4.73.0
GITLAB_CI_LOCAL := .cache/npm/node_modules/.bin/gitlab-ci-local

$(GITLAB_CI_LOCAL):
	@command -v npm >/dev/null || scripts/apt-install nodejs npm
	@command -v rsync >/dev/null || scripts/apt-install rsync
	npm install --prefix .cache/npm --no-audit --no-fund --loglevel=error \
		gitlab-ci-local@$(GITLAB_CI_LOCAL_VERSION)

gitlab-ci-local: $(GITLAB_CI_LOCAL)
	@command -v rsync >/dev/null || scripts/apt-install rsync

doctor: venv engine image
	$(BIN)/orchestrator doctor

lint: venv
	$(BIN)/ruff check orchestrator tests bench
	$(BIN)/ruff format --check orchestrator tests bench
	$(BIN)/mypy

# The documentation site: docs/ laid out by mkdocs.yml, built strictly (a broken link or a
# page missing from the navigation stops it), offline, into a git-ignored folder.
# NO_MKDOCS_2_WARNING silences the theme's banner about MkDocs 2, which is no warning of ours.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	@echo "the site: .cache/site/index.html (site_dir in mkdocs.yml)"

# The scale-out tests (tests/engines/) start a second local Docker engine of their own with
# scripts/ensure-docker under a private root, and stop and remove only that one at the end.
test: venv engine image postgres podman wheelhouse browser junit-xsd gitlab-ci-local
	ORCHESTRATOR_JUNIT_XSD_SDIST=$(JUNIT_XSD_SDIST) $(BIN)/python -m pytest

# The inner loop: no engine, no PostgreSQL, no browser started. tests/conftest.py marks
# every test that needs one (from the fixtures it uses and its directory); -m deselects
# them (with `slow`: end-to-end runs whose parts the fast tests cover), and
# ORCHESTRATOR_TEST_TIER=fast makes an engine call of an unmarked test fail, caps
# Hypothesis at 20 examples per property and skips importing the engine's directories.
# Its tests share no files, ports or environment, so pytest-xdist spreads them over the
# cores (FAST_WORKERS=0: one process, for --pdb). Compiled bytecode, pytest's rewritten
# test modules included, is kept in __pycache__ between runs even where
# PYTHONDONTWRITEBYTECODE is set: compiling them again was half of the collection.
FAST_MARKS := not docker and not postgres and not browser and not slow
FAST_WORKERS ?= auto

test-fast: venv junit-xsd
	env -u PYTHONDONTWRITEBYTECODE ORCHESTRATOR_TEST_TIER=fast \
		ORCHESTRATOR_JUNIT_XSD_SDIST=$(JUNIT_XSD_SDIST) \
		$(BIN)/python -m pytest -m "$(FAST_MARKS)" -n $(FAST_WORKERS) $(PYTEST_ARGS)

replay: venv engine image
ifeq ($(strip $(REPO)),)
	ORCHESTRATOR=$(BIN)/orchestrator RUNNER_IMAGE=$(RUNNER_IMAGE) scripts/replay-example
else
	$(BIN)/orchestrator replay --repo $(REPO) --base $(BASE) --patch $(PATCH) --image $(RUNNER_IMAGE) $(ARGS)
endif

stop-engine:
	@scripts/stop-docker
