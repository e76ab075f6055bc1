"""Fixtures for the reliability tests (helpers live in replay_helpers.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from replay_helpers import CLI, Runner, volume_names

from fixtures.build_example import ExampleRepo, build_example


@pytest.fixture
def runner(tmp_path: Path) -> Runner:
    return Runner(tmp_path)


@pytest.fixture
def example(tmp_path: Path) -> ExampleRepo:
    return build_example(tmp_path / "example")


@pytest.fixture
def volumes_before(docker_client: Any) -> set[str]:
    return volume_names(docker_client)


@pytest.fixture
def image(runner_image_id: str) -> str:
    return runner_image_id


@pytest.fixture
def cli() -> Path:
    if not CLI.exists():
        pytest.fail(f"{CLI} is missing: run `make venv`")
    return CLI
