"""Shared fixtures: the real Docker engine and the runner image `make test` built.

No skipping: when the engine or the image is missing the tests that need them error
loudly, naming the make target that sets them up.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker.DockerClient for the engine at DOCKER_HOST (or the default socket)."""
    from orchestrator.adapters.docker import connect
    from orchestrator.errors import EngineUnavailableError

    try:
        client = connect(os.environ)
    except EngineUnavailableError as error:
        pytest.fail(f"{error} (`make test` starts it)", pytrace=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def runner_image_id(docker_client: Any) -> str:
    """The ID (sha256:...) of orchestrator-runner:latest."""
    from orchestrator.adapters.docker import RUNNER_IMAGE, resolve_image
    from orchestrator.errors import ImageNotFoundError

    try:
        return resolve_image(docker_client, RUNNER_IMAGE).id
    except ImageNotFoundError as error:
        pytest.fail(f"{error} (`make test` builds it)", pytrace=False)
