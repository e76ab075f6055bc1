"""Fixtures for the reliability tests (helpers live in replay_helpers.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from replay_helpers import CLI, InProcess, Run, Runner, volume_names
from support.cli import invoke

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


@pytest.fixture
def in_process(
    runner: Runner, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> InProcess:
    """Run a command line in this process (what is refused before any container starts
    needs no process of its own), with the runner's TMPDIR and CI=1 as a child's."""
    monkeypatch.setenv("TMPDIR", str(runner.scratch))
    monkeypatch.setenv("CI", "1")
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again

    def run(args: Sequence[str], out: Path) -> Run:
        return invoke(capsys, args, out=out)

    return run
