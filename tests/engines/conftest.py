"""Fixtures for the scale-out tests: the machine's engine and a second one started here."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from second_engine import CLI, SecondEngine, new_second_engine

from fixtures.build_example import ExampleRepo, build_example


@pytest.fixture(scope="session")
def second_engine() -> Iterator[SecondEngine]:
    """A second local Docker engine for the whole session, removed at its end."""
    if os.geteuid() != 0:
        pytest.fail("starting a second dockerd needs root (make test runs as root)")
    engine = new_second_engine()
    try:
        engine.start()
        yield engine
    finally:
        engine.remove()
        assert not engine.root.exists()


@pytest.fixture
def second(second_engine: SecondEngine) -> Iterator[SecondEngine]:
    """The second engine, answering (restarted when a test killed it)."""
    second_engine.restart()
    yield second_engine
    second_engine.restart()


@pytest.fixture
def second_client(second: SecondEngine) -> Iterator[Any]:
    client = second.client()
    yield client
    client.close()


@pytest.fixture(scope="session")
def main_url() -> str:
    from orchestrator.adapters.docker import engine_url

    return engine_url(os.environ)


@pytest.fixture
def with_image(second_client: Any, docker_client: Any, runner_image_id: str) -> str:
    """The runner image on the second engine too (loaded here when missing)."""
    from orchestrator.adapters.docker import image_state, ship_image

    if not image_state(second_client, runner_image_id, runner_image_id).present:
        ship_image(docker_client, second_client, runner_image_id, tag=None)
    return runner_image_id


@pytest.fixture
def example(tmp_path: Path) -> ExampleRepo:
    return build_example(tmp_path / "example")


@pytest.fixture(autouse=True)
def _cli_exists() -> None:
    if not CLI.exists():
        pytest.fail(f"{CLI} is missing: run `make venv`")
