"""Fixtures for the project-image tests: a scratch project, its local wheelhouse, and its
image, built twice (once per session; removed at the end)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from image_project import (
    CACHE,
    ScratchRepo,
    build_args,
    local_wheelhouse,
    orchestrator,
    pip_env,
    remove_images,
    scratch_repo,
)


@dataclass(frozen=True, kw_only=True)
class Built:
    repo: ScratchRepo
    wheels: Path
    first: dict[str, Any]
    second: dict[str, Any]

    @property
    def image_id(self) -> str:
        return str(self.first["image_id"])


@pytest.fixture(scope="session")
def wheelhouse_cache() -> Path:
    if not any(CACHE.glob("pytest-8*.whl")) or not any(CACHE.glob("pytest-9*.whl")):
        pytest.fail(f"{CACHE} lacks the pytest wheels: run `make wheelhouse` (make test does)")
    return CACHE


@pytest.fixture(scope="session")
def local_wheels(tmp_path_factory: pytest.TempPathFactory, wheelhouse_cache: Path) -> Path:
    return local_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> ScratchRepo:
    return scratch_repo(tmp_path_factory.mktemp("scratch") / "repo")


@pytest.fixture(scope="session")
def built(docker_client: Any, scratch: ScratchRepo, local_wheels: Path) -> Iterator[Built]:
    """The scratch project's image, built twice from the same inputs."""
    env = pip_env(local_wheels)
    args = build_args(
        scratch.path, "--rev", scratch.base, "--group", "test",
        "--requirements", "requirements-dev.txt",
    )  # fmt: skip
    made: list[str] = []
    try:
        first = orchestrator(*args, env=env)
        report = first.json()
        made.append(report["image_id"])
        second = orchestrator(*args, env=env)
        yield Built(repo=scratch, wheels=local_wheels, first=report, second=second.json())
    finally:
        remove_images(docker_client, made)
