"""Fixtures shared by several directories (registered by tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from support.engine import SecondEngine, new_second_engine

RUNNER_IMAGE = "orchestrator-runner:latest"


@pytest.fixture(scope="session")
def second_engine(docker_client: Any, runner_image_id: str) -> Iterator[SecondEngine]:
    """A second local Docker engine for the whole session, with the runner image loaded
    once; stopped, reaped, unmounted and removed at its end."""
    if os.geteuid() != 0:
        pytest.fail("starting a second dockerd needs root (make test runs as root)")
    engine = new_second_engine()
    try:
        engine.start()
        engine.load_image(docker_client, runner_image_id, RUNNER_IMAGE)
        yield engine
    finally:
        engine.remove()
        assert not engine.root.exists()


@pytest.fixture
def second(
    second_engine: SecondEngine, docker_client: Any, runner_image_id: str
) -> Iterator[SecondEngine]:
    """The second engine, answering and holding the runner image (restarted when a test
    killed it, the image loaded again when a test removed it); emptied after the test."""
    second_engine.restart()
    second_engine.load_image(docker_client, runner_image_id, RUNNER_IMAGE)
    yield second_engine
    second_engine.restart()
    second_engine.clean()
