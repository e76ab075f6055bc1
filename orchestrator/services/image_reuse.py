"""The one way an image we make is built or reused: tagged by a digest of its inputs,
found under that tag, or else built, while a lock keeps a second build of the same
inputs on this machine waiting (it then finds the first one's image and reuses it).

Both the runner image (:mod:`orchestrator.services.runner_image`) and a project's
(:mod:`orchestrator.services.image`) go through here, each step with its own build.
"""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.log import get_logger

if TYPE_CHECKING:
    from docker import DockerClient

log = get_logger(__name__)


@dataclass(frozen=True, kw_only=True)
class Made:
    """An image a step ended with: built now, or found under its tag (``reused``)."""

    image_id: str
    reused: bool


@contextlib.contextmanager
def build_lock(name: str) -> Iterator[None]:
    """One build under ``name`` at a time on this machine: a second waits, then reuses.

    An exclusive ``flock`` on a file in the temporary folder; the kernel releases it if
    the process dies. Not reentrant: a step runs under its caller's lock or its own."""
    path = Path(tempfile.gettempdir()) / f"orchestrator-image-{name}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def reuse_or_build(
    client: DockerClient,
    tag: str,
    *,
    build: Callable[[], str],
    reused_event: str,
    building_event: str,
    **building: object,
) -> Made:
    """The image under ``tag`` when there is one, else ``build()``'s (an image ID). Run
    under a :func:`build_lock`, so that two builds of one tag never race.

    The step logs ``reused_event`` or ``building_event`` (with ``building``'s fields)."""
    from orchestrator.adapters import docker as docker_adapter

    found = docker_adapter.find_image(client, tag)
    if found is not None:
        log.info(reused_event, tag=tag, id=found.id)
        return Made(image_id=found.id, reused=True)
    log.info(building_event, tag=tag, **building)
    return Made(image_id=build(), reused=False)
