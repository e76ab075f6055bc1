"""The backend seam: what a run needs from a place that runs its containers, and the
values that cross it. Pure types and protocols, no engine named.

A backend is one class implementing :class:`Backend` (its containers implementing
:class:`SideContainer`); the Docker one (Podman too, through the same API) is
:class:`orchestrator.services.sides.pool.DockerEngine`, the only module of the services
that imports the Docker adapter for running sides. The pool hands out backends; the
services that run sides (a replay's containers, collection, ``reproduce``, ``serve``)
see only this module's names. A Kubernetes backend (docs/scale-out.md) would be one more
class implementing the same methods.

The values: a container's :class:`Mount` and :class:`Limits`, one container described
without naming an engine (:class:`SideJob`), how waiting for it ended (:class:`Exit`),
the run's inputs on this machine (:class:`Inputs`), how they reach one backend's
containers (:class:`Staging`), and the image as a backend holds it (:class:`ImageFacts`).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from orchestrator.core.labels import ContainerFacts
from orchestrator.core.reproduce import IDLE_COMMAND
from orchestrator.core.side_spec import SRC

# ---------------------------------------------------------------- values


@dataclass(frozen=True, kw_only=True)
class Mount:
    """A host path (bind mount, a local engine only) or a volume's name (any engine)."""

    source: Path | str
    target: str
    read_only: bool = True


@dataclass(frozen=True, kw_only=True)
class Limits:
    memory: str = "512m"
    pids: int = 256
    cpus: float = 1.0
    tmp_size: str = "64m"
    file_bytes: int = 1024 * 1024 * 1024  # RLIMIT_FSIZE: no single file past 1 GiB
    open_files: int = 4096  # RLIMIT_NOFILE


@dataclass(frozen=True, kw_only=True)
class Exit:
    """How waiting for a container (or a process in it) ended."""

    status_code: int | None
    killed_at_deadline: bool
    cancelled: bool


NEVER_WAITED = Exit(status_code=None, killed_at_deadline=False, cancelled=False)


class Cancelled(Exception):
    """The run was cancelled after the container was created and before it started."""


@dataclass(frozen=True, kw_only=True)
class SideJob:
    """One side's container, as any backend would make it."""

    name: str
    image_id: str
    mounts: tuple[Mount, ...]
    environment: Mapping[str, str]
    labels: Mapping[str, str]
    limits: Limits
    tmpfs: Mapping[str, str]
    # Its own process; by default it only idles and the driver runs in it with an exec,
    # so that the container outlives the driver and its results can be read back.
    command: tuple[str, ...] = IDLE_COMMAND


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What every container of a run reads: each side's exported tree, the probe, the
    fixture (a private copy), the recorded durations its workers split by (a private
    copy, with ``--jobs``), and, for the volume path, each of them as a tar file."""

    trees: Mapping[str, Path]
    probe: Path
    fixture: Path | None
    durations: Path | None = None
    tars: Mapping[str, Path] = field(default_factory=dict)  # side -> tar of its tree
    probe_tar: Path | None = None


@dataclass(frozen=True, kw_only=True)
class ImageFacts:
    """An image as a backend holds it: its ID and labels (never pulled)."""

    id: str
    repo_digests: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Shipped:
    """One image copied from one backend to another."""

    image_id: str
    bytes: int
    seconds: float


# ---------------------------------------------------------------- protocols


class Owner(Protocol):
    """Who owns what a run makes (``orchestrator.adapters.owners.Owner``): the labels
    written on each container and volume, read back by a sweep."""

    @property
    def run_id(self) -> str: ...

    @property
    def host(self) -> str: ...

    def labels(self, side: str) -> dict[str, str]: ...


class Staging(Protocol):
    """How one backend's containers get their inputs (results come back the same way on
    every backend: :func:`orchestrator.services.sides.side_run.read_back`)."""

    @property
    def tree_path(self) -> str:
        """Where the read-only tree is mounted when the run copies it (writable_tree)."""

    def mounts(self, side: str, *, tree_target: str = SRC) -> list[Mount]: ...


class Terminal(Protocol):
    """A process started on a terminal in a container: its socket (raw bytes both
    ways), its size, its exit code."""

    @property
    def socket(self) -> socket.socket: ...

    def resize(self, rows: int, columns: int) -> None: ...

    def exit_code(self) -> int | None: ...

    def close(self) -> None: ...


class SideContainer(Protocol):
    """A side's running container: what the services do with it."""

    @property
    def name(self) -> str: ...

    def exec_stream(
        self,
        command: Sequence[str],
        *,
        environment: Mapping[str, str],
        on_output: Callable[[bytes], None],
        deadline: float,
        kill_at_deadline: bool = True,
    ) -> Exit: ...

    def exec_chunks(
        self,
        command: Sequence[str],
        *,
        deadline: float,
        user: str | None = None,
        workdir: str | None = None,
    ) -> tuple[Iterator[bytes], Callable[[], int | None]]: ...

    def exec_terminal(
        self, command: Sequence[str], *, environment: Mapping[str, str]
    ) -> Terminal: ...

    def facts(self, exit_: Exit) -> ContainerFacts: ...

    def settled(self, exit_: Exit) -> tuple[ContainerFacts, bool]: ...

    def ended(self, exit_: Exit) -> ContainerFacts: ...

    def wait(self, *, deadline: float, poll_s: float = 2.0) -> Exit: ...

    def kill(self) -> None: ...

    def close(self) -> None: ...

    def follow_logs(self, on_line: Callable[[str], None]) -> threading.Thread: ...


class LiveContainers:
    """Containers this process has started and not yet removed, whichever backend made
    them: a Ctrl-C kills (and cleanup removes) them from the main thread while other
    threads own them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._containers: dict[int, SideContainer] = {}

    def add(self, container: SideContainer) -> None:
        with self._lock:
            self._containers[id(container)] = container

    def discard(self, container: SideContainer) -> None:
        with self._lock:
            self._containers.pop(id(container), None)

    def snapshot(self) -> list[SideContainer]:
        with self._lock:
            return list(self._containers.values())

    def kill_all(self) -> None:
        for container in self.snapshot():
            container.kill()

    def remove_all(self) -> None:
        for container in self.snapshot():
            container.close()


class Backend(Protocol):
    """One place that runs a run's containers (one engine of the pool).

    - ``container``: a job's container, created and started on enter (never once
      ``cancelled`` is set: :class:`Cancelled`), listed in ``live`` meanwhile, killed
      and removed on exit (unless ``keep``: left running for ``reproduce --keep``).
    - ``staging``: the run's inputs where this backend's containers can mount them, for
      as long as the block runs (bind mounts, or labelled volumes filled from tars).
    - ``sweep``: remove the leftovers (containers, volumes) of this host's dead runs,
      by their owner labels; return what went.
    - ``resolve_image`` pins a tag or ID (never pulls: ``ImageNotFoundError``);
      ``images_labelled`` lists the images carrying a label (``key`` or ``key=value``),
      newest first;
      ``hold_image`` makes this backend hold the image the run pinned on ``source``
      (shipping it; ``EngineRefused`` when its tag names another image).
    - ``answers``, ``cpus``: is it there, how many CPUs it gives containers.
    Engine failures raise :class:`~orchestrator.errors.EngineError` with a reason.
    """

    index: int
    url: str
    runner_id: str
    slots: int
    shipped: Shipped | None  # the image this run shipped here, if it did

    @property
    def local(self) -> bool:
        """Its containers can bind-mount this machine's folders."""

    def answers(self) -> bool: ...

    def cpus(self) -> int | None: ...

    def sweep(self, host: str) -> list[str]: ...

    def resolve_image(self, ref: str) -> ImageFacts: ...

    def images_labelled(self, label: str) -> list[ImageFacts]: ...

    def hold_image(self, image_id: str, ref: str, source: Backend) -> None: ...

    def staging(
        self, inputs: Inputs, *, volumes: bool, owner: Owner, image_id: str
    ) -> AbstractContextManager[Staging]: ...

    def container(
        self,
        job: SideJob,
        *,
        live: LiveContainers | None = None,
        cancelled: threading.Event | None = None,
        keep: bool = False,
    ) -> AbstractContextManager[SideContainer]: ...

    def close(self) -> None: ...
