"""The Docker engines of one run: a pool, the image on each, and the inputs staged there.

``replay --engine URL`` (repeatable) names the pool; without it the pool is the one
engine at ``DOCKER_HOST`` or the local socket. Each engine is reached with
the Docker SDK (``unix://``, ``tcp://`` with ``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH``,
``ssh://`` through paramiko) and is a :class:`DockerEngine`: the Docker implementation of
:class:`orchestrator.core.backend.Backend`, the interface a run needs from a place that
runs containers (a Kubernetes backend would implement the same; see docs/scale-out.md).
This module is the one place of the services that runs sides through the Docker adapter
(``tests/unit/test_layers.py``): the pool (:func:`open_pool`, :func:`open_backend`)
hands out backends, and the services above see only the seam.

- The image is pinned by ID on the first engine. Another engine that holds the ID is
  used as is; one that holds nothing under the run's reference gets the image shipped
  from the first (``save`` streamed into ``load``, the ID checked), once; one whose tag
  names another image is refused for the run (:class:`EngineRefused`): whatever it would
  have run is ``harness_error`` / ``image_mismatch``, never run elsewhere in silence.
- Inputs (each side's exported tree, the probe package, the fixture) reach containers
  in one of two ways (:class:`Staging`): bind mounts of local folders for a single local
  engine (:class:`BindStaging`: nothing to copy), or labelled volumes filled from tars
  (``put_archive``) and mounted read-only (:class:`VolumeStaging`) for a remote engine
  and for every engine of a pool of several, so that the tests exercise that path.
  Volumes are removed with the run, and swept by label after a crash.
"""

from __future__ import annotations

import contextlib
import os
import re
import tarfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters import tree_files
from orchestrator.core.backend import (
    Backend,
    ImageFacts,
    Inputs,
    LiveContainers,
    Mount,
    Owner,
    Shipped,
    SideJob,
    Staging,
)
from orchestrator.core.pool import check_engine_urls, runner_ids
from orchestrator.core.side_spec import DURATIONS, FIXTURE, PROBE_ROOT, SRC, TREE
from orchestrator.errors import EngineError, EngineUnavailableError, InputError, one_line
from orchestrator.log import get_logger

if TYPE_CHECKING:
    from docker import DockerClient

log = get_logger(__name__)

# With writable_tree the read-only tree is copied into /src per replay; on the volume path
# it cannot sit under /replay (the fixture's read-only volume), so it has its own place.
VOLUME_TREE = "/replay-tree"
FIXTURE_NAME = "fixture.json"
DURATIONS_NAME = "durations.json"


class EngineRefused(Exception):
    """An engine of the pool may not run this run (its tag names another image)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------- staging


@dataclass(frozen=True, kw_only=True)
class BindStaging:
    """Bind mounts of local folders (read-only): the single local engine."""

    inputs: Inputs
    tree_path: str = TREE

    def mounts(self, side: str, *, tree_target: str = SRC) -> list[Mount]:
        mounts = [
            Mount(source=self.inputs.trees[side], target=tree_target),
            Mount(source=self.inputs.probe, target=f"{PROBE_ROOT}/orchestrator"),
        ]
        if self.inputs.fixture is not None:
            mounts.append(Mount(source=self.inputs.fixture, target=FIXTURE))
        if self.inputs.durations is not None:
            mounts.append(Mount(source=self.inputs.durations, target=DURATIONS))
        return mounts


@dataclass(frozen=True, kw_only=True)
class VolumeStaging:
    """Labelled volumes filled from tars, mounted read-only. Works for an engine on
    another machine."""

    sources: Mapping[str, str]  # side -> volume name
    probe: str
    fixture: str | None  # the volume mounted at /replay: the fixture and the durations
    tree_path: str = VOLUME_TREE

    def mounts(self, side: str, *, tree_target: str = SRC) -> list[Mount]:
        mounts = [
            Mount(source=self.sources[side], target=tree_target),
            Mount(source=self.probe, target=PROBE_ROOT),
        ]
        if self.fixture is not None:
            mounts.append(Mount(source=self.fixture, target="/replay"))
        return mounts


def _readable(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Owned by root, readable by everyone (the replays run as uid 1000); no caches."""
    if "__pycache__" in Path(info.name).parts:
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode |= 0o555 if info.isdir() or info.mode & 0o100 else 0o444
    return info


def write_tar(folder: Path, dest: Path, *, arcname: str = ".") -> Path:
    """``folder`` (an exported tree, or the probe) as a tar file at ``dest`` (readable by
    everyone, no ``__pycache__``), read without following a link (``tree_files``)."""
    return tree_files.tar_tree(folder, dest, arcname=arcname, adjust=_readable)


# ---------------------------------------------------------------- engines


@dataclass(eq=False, kw_only=True)
class DockerEngine:
    """One Docker engine of the pool, through the Docker adapter."""

    index: int
    url: str
    runner_id: str
    client: DockerClient
    slots: int
    identity: str = ""
    shipped: Shipped | None = None

    @property
    def local(self) -> bool:
        return self.url.startswith("unix://")

    def answers(self) -> bool:
        return docker_adapter.ping(self.client)

    def cpus(self) -> int | None:
        return docker_adapter.engine_cpus(self.client)

    def resolve_image(self, ref: str) -> ImageFacts:
        return _facts(docker_adapter.resolve_image(self.client, ref))

    def images_labelled(self, label: str) -> list[ImageFacts]:
        return [_facts(pin) for pin in docker_adapter.images_labelled(self.client, label)]

    def container(
        self,
        job: SideJob,
        *,
        live: LiveContainers | None = None,
        cancelled: threading.Event | None = None,
        keep: bool = False,
    ) -> docker_adapter.Container:
        """The job's container (see :class:`~orchestrator.core.backend.Backend`)."""
        return docker_adapter.Container(
            self.client,
            docker_adapter.job_config(job),
            live=live,
            cancelled=cancelled,
            keep=keep,
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    def sweep(self, host: str) -> list[str]:
        """Leftovers (containers, volumes) of dead runs of this host, by their labels."""
        return docker_adapter.sweep_leftovers(self.client, host=host)

    def hold_image(self, image_id: str, ref: str, source: Backend) -> None:
        """Make sure this engine holds ``image_id``: ship it from ``source`` when it holds
        nothing under ``ref``; :class:`EngineRefused` when ``ref`` names another image."""
        state = docker_adapter.image_state(self.client, image_id, ref)
        if state.refused:
            raise EngineRefused(
                f"{self.url}: {ref} is {state.other_id} there, the run pinned {image_id}"
            )
        if state.present:
            return
        if not isinstance(source, DockerEngine):
            raise TypeError("images are shipped between Docker engines only")
        log.info("engine.shipping_image", engine=self.url, image_id=image_id, source=source.url)
        self.shipped = docker_adapter.ship_image(source.client, self.client, image_id, tag=ref)
        log.info(
            "engine.image_shipped",
            engine=self.url,
            image_id=image_id,
            megabytes=round(self.shipped.bytes / 1e6, 1),
            seconds=round(self.shipped.seconds, 2),
        )

    @contextlib.contextmanager
    def staging(
        self, inputs: Inputs, *, volumes: bool, owner: Owner, image_id: str
    ) -> Iterator[Staging]:
        """The run's inputs on this engine, for as long as the block runs."""
        if not volumes:
            yield BindStaging(inputs=inputs)
            return
        if inputs.probe_tar is None or set(inputs.tars) != set(inputs.trees):
            raise ValueError("the volume path needs a tar of every tree and of the probe")
        prefix = volume_prefix(owner.run_id, self.index)
        contents: dict[str, Path | bytes] = {
            f"src-{side}": tar for side, tar in inputs.tars.items()
        }
        contents["probe"] = inputs.probe_tar
        # The fixture and the durations share the volume mounted at /replay.
        replay_files = [
            (name, path.read_bytes(), 0o444)
            for name, path in ((FIXTURE_NAME, inputs.fixture), (DURATIONS_NAME, inputs.durations))
            if path is not None
        ]
        if replay_files:
            contents["fixture"] = docker_adapter.tar_of(replay_files)
        with contextlib.ExitStack() as stack:
            made = {
                purpose: stack.enter_context(
                    docker_adapter.Volume(
                        self.client,
                        f"{prefix}-{purpose}",
                        labels=owner.labels(purpose),
                        image_id=image_id,
                    )
                )
                for purpose in contents
            }

            def fill(purpose: str) -> None:
                content = contents[purpose]
                if isinstance(content, bytes):
                    made[purpose].fill(content)
                    return
                with content.open("rb") as stream:
                    made[purpose].fill(stream)

            # Filled at once: each is a round trip through a helper container.
            with ThreadPoolExecutor(max_workers=len(contents)) as pool:
                for done in [pool.submit(fill, purpose) for purpose in contents]:
                    done.result()
            yield VolumeStaging(
                sources={side: made[f"src-{side}"].name for side in inputs.tars},
                probe=made["probe"].name,
                fixture=made["fixture"].name if "fixture" in made else None,
            )


def _facts(pin: docker_adapter.ImagePin) -> ImageFacts:
    return ImageFacts(id=pin.id, repo_digests=pin.repo_digests, tags=pin.tags, labels=pin.labels)


@dataclass(frozen=True, kw_only=True)
class Absent:
    """An engine named with ``--engine`` that did not answer when the run started."""

    url: str
    reason: str


@dataclass(kw_only=True)
class Pool:
    """The engines of one run, in the order named (the first pins the image)."""

    engines: tuple[Backend, ...]
    volumes: bool  # inputs go through volumes (several engines, or one not local)
    named: bool = False  # --engine was given
    image_ref: str | None = None  # the run's --image: a tag another engine must agree on
    absent: tuple[Absent, ...] = ()
    durations: Mapping[str, float] = field(default_factory=dict)

    @property
    def first(self) -> Backend:
        return self.engines[0]

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(engine.url for engine in self.engines)

    def close(self) -> None:
        for engine in self.engines:
            engine.close()

    def describe(self) -> list[dict[str, Any]]:
        """The pool for the run log: each engine's URL, runner id and slots."""
        described: list[dict[str, Any]] = [
            {"url": e.url, "runner_id": e.runner_id, "slots": e.slots} for e in self.engines
        ]
        described += [
            {"url": a.url, "runner_id": None, "slots": 0, "status": "unreachable"}
            for a in self.absent
        ]
        return described


def single_pool(backend: Backend, *, runner_id: str) -> Pool:
    """The pool of one backend (named ``runner_id`` for the run), bind mounts and one
    batch: the run without ``--engine``."""
    backend.runner_id = runner_id
    return Pool(engines=(backend,), volumes=False)


@contextlib.contextmanager
def open_backend(
    env: Mapping[str, str], *, url: str | None = None, runner_id: str = "", slots: int = 2
) -> Iterator[Backend]:
    """The one engine at ``url`` (default: ``DOCKER_HOST``, else the local socket) as a
    backend, for a command's whole run (one that does not answer is
    ``EngineUnavailableError``, exit 3), closed when the block ends."""
    client = docker_adapter.connect(env, url=url)
    engine = DockerEngine(
        index=0,
        url=url or docker_adapter.engine_url(env),
        runner_id=runner_id,
        client=client,
        slots=slots,
    )
    try:
        yield engine
    finally:
        engine.close()


def open_pool(
    urls: Sequence[str],
    env: Mapping[str, str],
    *,
    runner_id: str | None,
    slots: int | None,
    durations: Mapping[str, float] | None = None,
    timeout_s: float = docker_adapter.API_TIMEOUT_S,
) -> Pool:
    """Connect to every engine named (or the default one) and size each.

    The first engine must answer (it pins the image): else :class:`EngineUnavailableError`
    (exit 3). Another that does not answer is left out of the run and recorded as
    unreachable. Two URLs that reach one daemon are bad input (exit 2).
    """
    named = bool(urls)
    wanted = check_engine_urls(urls) if named else (docker_adapter.engine_url(env),)
    ids = runner_ids(wanted, runner_id, named=named)
    engines: list[DockerEngine] = []
    absent: list[Absent] = []
    try:
        for position, (url, rid) in enumerate(zip(wanted, ids, strict=True)):
            try:
                client = docker_adapter.connect(env, url=url, timeout_s=timeout_s)
            except EngineUnavailableError as error:
                if position == 0:
                    raise
                log.warning("engine.unreachable", engine=url, error=error.message)
                absent.append(Absent(url=url, reason=error.message))
                continue
            engine = DockerEngine(
                index=len(engines), url=url, runner_id=rid, client=client, slots=slots or 1
            )
            engines.append(engine)
            try:
                facts = docker_adapter.engine_facts(client)
            except EngineError as error:
                if position == 0:
                    raise
                log.warning("engine.unreachable", engine=url, error=error.message)
                absent.append(Absent(url=url, reason=one_line(error)))
                engines.pop().client.close()
                continue
            twin = next((e for e in engines[:-1] if e.identity == facts.identity), None)
            if twin is not None:
                raise InputError(f"--engine {url} reaches the same engine as {twin.url}")
            engine.identity = facts.identity
            engine.slots = slots or facts.cpus
    except BaseException:
        for engine in engines:
            engine.client.close()
        raise
    local = len(engines) == 1 and engines[0].url.startswith("unix://")
    return Pool(
        engines=tuple(engines),
        volumes=not local,
        named=named,
        absent=tuple(absent),
        durations=dict(durations or {}),
    )


def sweep(backends: Sequence[Backend], host: str) -> None:
    """The one sweep at the start of whatever runs sides (a replay, ``reproduce``, a warm
    container): each backend's leftovers (containers, volumes) of this host's dead runs,
    by host id and process (another host's only once they are a day old), and this
    machine's scratch folders of dead runs. The first backend's failure is the run's;
    another's is logged (that backend will fail its batches on its own)."""
    for backend in backends:
        try:
            backend.sweep(host)
        except EngineError:
            if backend.index == 0:
                raise
            log.warning("engine.sweep_failed", engine=backend.url)
    git_adapter.sweep_scratch()


def volume_prefix(run_id: str, index: int) -> str:
    """``orchestrator-<run id>-e<n>``: the names of a run's volumes on engine n. Pure."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", run_id)
    return f"orchestrator-{safe}-e{index + 1}"


def probe_package() -> Path:
    """The folder of the ``orchestrator`` package: the probe the containers import."""
    import orchestrator

    return Path(os.path.dirname(orchestrator.__file__))
