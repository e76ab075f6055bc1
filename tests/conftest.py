"""Shared fixtures: the real Docker engine and the runner image `make test` built; the
tiers of the suite.

No skipping: when the engine or the image is missing the tests that need them error
loudly, naming the make target that sets them up.

Tiers: every test that needs a Docker engine, a PostgreSQL server or a browser carries
the ``docker``, ``postgres`` or ``browser`` mark, set here from the fixtures it uses
(directly or through other fixtures) and from its directory, on top of the marks its
module sets itself. `make test` runs everything; `make test-fast` deselects those marks
(and ``slow``) with ``-m`` and sets ORCHESTRATOR_TEST_TIER=fast, under which the engine
fixtures fail and DOCKER_HOST names a socket nothing listens on: a test that needs the
engine but escaped its mark fails there, it never passes without one. That tier does not
even import the directories and modules whose every test the marks below would deselect.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from tiers import FAST_EXAMPLES, FAST_TIER

pytest_plugins = ["support.fixtures"]

TESTS = Path(__file__).resolve().parent
# A fixture a test uses (even through another fixture) -> the mark it needs.
MARK_OF_FIXTURE = {
    "docker_client": "docker",
    "runner_image_id": "docker",
    "second_engine": "docker",
    "postgres_server": "postgres",
}
# Directories whose every test needs the engine (a second dockerd, built images, replays).
DOCKER_DIRS = ("chaos", "engines", "image", "reproduce", "shrink")
# Modules that drive a browser.
BROWSER_MODULES = ("report/test_report_browser.py",)


# No deadline in either tier: a loaded machine is not a slow function, and speed is
# measured by bench/, never asserted. The inner loop also takes fewer examples per
# property (an explicit count goes through tiers.examples, which caps it there too);
# `make test` keeps Hypothesis' default count and every property's own.
hypothesis.settings.register_profile("whole", deadline=None)
hypothesis.settings.register_profile("fast", max_examples=FAST_EXAMPLES, deadline=None)
hypothesis.settings.load_profile("fast" if FAST_TIER else "whole")


def pytest_configure(config: pytest.Config) -> None:
    if FAST_TIER:
        # Nothing listens there: an engine call of an unmarked test fails, never passes.
        dead = Path(config.rootpath) / ".cache" / "test-fast-has-no-engine.sock"
        os.environ["DOCKER_HOST"] = f"unix://{dead}"


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """In the fast tier, skip importing what the marks would all deselect anyway: the
    engine's directories and the browser's modules (their imports cost seconds)."""
    if not FAST_TIER or not collection_path.is_relative_to(TESTS):
        return None
    where = collection_path.relative_to(TESTS).as_posix()
    if where in DOCKER_DIRS or where in BROWSER_MODULES:
        return True
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = getattr(item, "fixturenames", ())
        marks = {MARK_OF_FIXTURE[name] for name in used if name in MARK_OF_FIXTURE}
        where = item.path.relative_to(TESTS).as_posix() if item.path.is_relative_to(TESTS) else ""
        if where.split("/", 1)[0] in DOCKER_DIRS:
            marks.add("docker")
        if where in BROWSER_MODULES:
            marks.add("browser")
        for mark in sorted(marks - {m.name for m in item.iter_markers()}):
            item.add_marker(mark)


def _not_in_fast_tier(what: str) -> None:
    if FAST_TIER:
        pytest.fail(f"{what} in `make test-fast`: mark the test (tests/conftest.py)")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker.DockerClient for the engine at DOCKER_HOST (or the default socket)."""
    from orchestrator.adapters.docker import connect
    from orchestrator.errors import EngineUnavailableError

    _not_in_fast_tier("the Docker engine")
    try:
        client = connect(os.environ)
    except EngineUnavailableError as error:
        pytest.fail(f"{error} (`make test` starts it)", pytrace=False)
    yield client
    client.close()


@pytest.fixture
def docker_backend(docker_client: Any) -> Any:
    """That engine as a backend of the seam (orchestrator.core.backend.Backend), on the
    session's client (which outlives it)."""
    from orchestrator.adapters.docker import engine_url
    from orchestrator.services.sides.pool import DockerEngine

    return DockerEngine(
        index=0, url=engine_url(os.environ), runner_id="", client=docker_client, slots=2
    )


@pytest.fixture(scope="session")
def runner_image_id(docker_client: Any) -> str:
    """The ID (sha256:...) of orchestrator-runner:latest."""
    from orchestrator.adapters.docker import RUNNER_IMAGE, resolve_image
    from orchestrator.errors import ImageNotFoundError

    try:
        return resolve_image(docker_client, RUNNER_IMAGE).id
    except ImageNotFoundError as error:
        pytest.fail(f"{error} (`make test` builds it)", pytrace=False)
