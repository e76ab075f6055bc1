"""Fixtures for the scale-out tests: the machine's engine and a second one (the session's
one, tests/support/fixtures.py: ``second_engine``, ``second``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from second_engine import CLI
from support.engine import SecondEngine

from fixtures.build_example import ExampleRepo, build_example


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
def with_image(second: SecondEngine, runner_image_id: str) -> str:
    """The runner image, on the second engine too (``second`` loads it)."""
    return runner_image_id


@pytest.fixture
def example(tmp_path: Path) -> ExampleRepo:
    return build_example(tmp_path / "example")


@pytest.fixture(autouse=True)
def _cli_exists() -> None:
    if not CLI.exists():
        pytest.fail(f"{CLI} is missing: run `make venv`")
