"""The one way an image we make is built or reused: tagged by a digest of its inputs,
found under that tag, or else built, while a lock keeps a second build of the same
inputs on this machine waiting (it then finds the first one's image and reuses it).

The locks live in this user's private folder (``<tmp>/orchestrator-locks-<uid>``, 0700),
are opened without following a symbolic link, and are waited for with a timeout: another
user can neither plant a lock (a link that would make us create its target) nor hold one
for ever.

Both the runner image (:mod:`orchestrator.services.runner_image`) and a project's
(:mod:`orchestrator.services.image`) go through here, each step with its own build.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import interrupts
from orchestrator.errors import InfrastructureError, LockTimeoutError
from orchestrator.log import get_logger

if TYPE_CHECKING:
    from docker import DockerClient

log = get_logger(__name__)


@dataclass(frozen=True, kw_only=True)
class Made:
    """An image a step ended with: built now, or found under its tag (``reused``)."""

    image_id: str
    reused: bool


# A build of one set of inputs takes minutes; a lock held this long is a hung build.
LOCK_TIMEOUT_S = 3600.0
_LOCK_POLL_S = 0.2
_LOCK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def lock_folder(root: Path | None = None) -> Path:
    """This user's private folder of build locks, ``<tmp>/orchestrator-locks-<uid>``: made
    0700 when missing; a folder there that is a symbolic link, not ours, or open to others
    is refused (someone else could plant or hold our locks in it)."""
    uid = os.geteuid()
    folder = (root or Path(tempfile.gettempdir())) / f"orchestrator-locks-{uid}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    status = os.lstat(folder)
    problem = None
    if stat.S_ISLNK(status.st_mode) or not stat.S_ISDIR(status.st_mode):
        problem = "is not a folder (a symbolic link, or a file)"
    elif status.st_uid != uid:
        problem = f"belongs to uid {status.st_uid}, not to this user (uid {uid})"
    elif status.st_mode & 0o077:
        problem = f"is open to others (mode {stat.S_IMODE(status.st_mode):o}, not 700)"
    if problem is not None:
        raise InfrastructureError(
            f"{folder} {problem}: the build locks need a private folder; remove it"
        )
    return folder


@contextlib.contextmanager
def build_lock(
    name: str, *, timeout_s: float = LOCK_TIMEOUT_S, root: Path | None = None
) -> Iterator[None]:
    """One build under ``name`` at a time on this machine: a second waits, then reuses.

    An exclusive ``flock`` on a file in this user's private lock folder (:func:`lock_folder`),
    opened relative to the folder's descriptor without following a symbolic link; the
    kernel releases it if the process dies. Past ``timeout_s`` of waiting: one
    :class:`LockTimeoutError` line, not a hang. Not reentrant: a step runs under its
    caller's lock or its own."""
    if not _LOCK_NAME.fullmatch(name):
        raise ValueError(f"not a lock name: {name!r}")
    folder = lock_folder(root)
    folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = os.open(f"image-{name}.lock", _OPEN_FLAGS, 0o600, dir_fd=folder_fd)
    except OSError as error:
        raise InfrastructureError(
            f"{folder}/image-{name}.lock: cannot be opened as a lock ({error.strerror})"
        ) from None
    finally:
        os.close(folder_fd)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.geteuid():
            raise InfrastructureError(
                f"{folder}/image-{name}.lock: not a lock file of this user; remove it"
            )
        _acquire(fd, name, timeout_s)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, name: str, timeout_s: float) -> None:
    """Take the lock, waiting in short steps (a Ctrl-C is acted on between them) up to
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    waited = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LockTimeoutError(
                f"build lock {name!r} still held after {timeout_s:g} s: another build of the "
                "same inputs runs or hangs; let it finish (or stop it) and try again"
            )
        if not waited:
            log.info("image.lock_waiting", lock=name, timeout_s=timeout_s)
            waited = True
        time.sleep(min(_LOCK_POLL_S, remaining))
        interrupts.checkpoint()


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
