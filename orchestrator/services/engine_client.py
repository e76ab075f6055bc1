"""One Docker engine's client for a command's whole run: connected from the environment
(``DOCKER_HOST``, else the local socket) and always closed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from docker import DockerClient


@contextlib.contextmanager
def engine_client(env: Mapping[str, str]) -> Iterator[DockerClient]:
    """The engine's client (an engine that does not answer is ``EngineUnavailableError``,
    exit 3), closed when the block ends."""
    from orchestrator.adapters.docker import connect

    client = connect(env)
    try:
        yield client
    finally:
        client.close()
