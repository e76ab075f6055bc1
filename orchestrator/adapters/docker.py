"""The Docker engine, one adapter: connect, ping, pin an image, describe the engine,
sweep leftovers, and run one hermetic container as a context manager.

Everything the Docker SDK and its transport raise (``docker.errors.*``,
``requests.exceptions.*`` and the socket errors they wrap) is translated here into
one :class:`~orchestrator.errors.EngineError` with a ``reason`` (``engine_gone``,
``docker_api``, ``image_not_found``); no other module names an SDK exception.

The tool never pulls: an image is either present locally (``orchestrator image runner``)
or an :class:`~orchestrator.errors.ImageNotFoundError`; another engine of a pool that
lacks it gets it from the first engine (:func:`ship_image`: ``save`` streamed into
``load``, its ID checked). Sources reach an engine that cannot see this machine's
files as a tar copied into a labelled volume (:class:`Volume`); a container gives its
results back the same way (:meth:`Container.get_archive`). Containers are made with
``containers.create`` + ``start`` from an image *ID* (``run`` would pull;
``auto_remove`` races with ``wait``) by :class:`Container`, which always removes
them. Each container and volume carries labels naming its run, this process's
session, its owning pid (with the pid's start time, so a reused pid is not taken for
the owner) and host; :func:`sweep_leftovers` removes the containers and volumes of
this host's owners that are gone, another host's only once they are a day old, and
never a live run's.

Tenacity retries only infrastructure calls (ping, inspect, create-by-name,
remove). ``start``, ``wait`` and ``kill`` are never retried: retrying them could
run a replay twice or hide the failure that decides a label.

The SDK is imported at the top: only commands that talk to the engine import this
module (``orchestrator --help`` and the engine-free commands never do).
"""

from __future__ import annotations

import contextlib
import io
import queue
import re
import socket
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import requests.exceptions
import urllib3.exceptions
from tenacity import (
    retry,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_fixed,
)

from orchestrator import interrupts
from orchestrator.adapters.host import current_owner, host_id, pid_alive
from orchestrator.core.labels import ContainerFacts
from orchestrator.core.owners import (
    FOREIGN_MAX_AGE_S,
    ProcessOwner,
    SweepVerdict,
    local_owner,
    sweep_verdict,
)
from orchestrator.errors import (
    EngineError,
    EngineReason,
    EngineUnavailableError,
    ImageBuildError,
    ImageNotFoundError,
    one_line,
)
from orchestrator.log import get_logger


@contextlib.contextmanager
def _held_back(module: str) -> Iterator[None]:
    """Imports of ``module`` fail inside the block (unless it is loaded already)."""
    if module in sys.modules:
        yield
        return
    sys.modules[module] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        del sys.modules[module]


# The SDK loads its ssh:// transport as soon as it is imported whenever paramiko is
# installed (the docker[ssh] extra), and paramiko brings invoke, cryptography and PyNaCl:
# about 0.1 s of CPU on every run, before any container starts. Only ssh:// engines use
# it, so the SDK is imported without it and :func:`_load_ssh_transport` adds it for the
# first ssh:// engine. paramiko is held back only while the SDK itself is imported.
with _held_back("paramiko"):
    import docker
    import docker.api.client
    import docker.errors
    import docker.transport
    import docker.types
    import docker.utils
    from docker.models.containers import Container as SdkContainer

RUNNER_IMAGE = "orchestrator-runner:latest"
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
PING_ATTEMPTS = 3
PING_WAIT_S = 0.5
API_TIMEOUT_S = 60

LABEL_MARK = "orchestrator.replay"
LABEL_RUN = "orchestrator.run-id"
LABEL_SESSION = "orchestrator.session"
LABEL_PID = "orchestrator.pid"
LABEL_PID_START = "orchestrator.pid-start"
LABEL_HOST = "orchestrator.host"  # the host id (adapters/host.py), where the pid means something
LABEL_HOSTNAME = "orchestrator.hostname"
LABEL_SIDE = "orchestrator.side"

# One id per process: every container this process makes shares it.
SESSION = uuid.uuid4().hex[:12]

# What the SDK and its transport raise. requests' exceptions are OSErrors, and so are
# the socket errors urllib3 lets through on a streamed read; urllib3's own errors are not.
# ssh:// engines go through paramiko, whose errors are its own (added with its transport).
_FAILURES: tuple[type[BaseException], ...] = (
    docker.errors.DockerException,
    requests.exceptions.RequestException,
    urllib3.exceptions.HTTPError,
    OSError,
)
_ssh_transport_lock = threading.Lock()
_ssh_transport_loaded = False


def _load_ssh_transport() -> None:
    """Give the SDK the ssh:// transport held back at import (once; thread-safe).

    Without paramiko installed nothing is added, and the SDK says itself that ssh://
    needs it."""
    global _FAILURES, _ssh_transport_loaded
    with _ssh_transport_lock:
        if _ssh_transport_loaded:
            return
        try:
            import paramiko
            from docker.transport.sshconn import SSHHTTPAdapter
        except ImportError:  # pragma: no cover - the extra is a dependency; bare installs
            return
        # Where the SDK looks for it: the names its own guarded imports would have bound.
        vars(docker.transport)["SSHHTTPAdapter"] = SSHHTTPAdapter
        vars(docker.api.client)["SSHHTTPAdapter"] = SSHHTTPAdapter
        _FAILURES = (*_FAILURES, paramiko.SSHException)
        _ssh_transport_loaded = True


log = get_logger(__name__)


# ---------------------------------------------------------------- errors


def _unreachable_reason(error: BaseException) -> str:
    """A short cause for an engine that does not answer (requests' messages are long)."""
    text = str(error)
    for needle, reason in (
        ("FileNotFoundError", "no socket there"),
        ("No such file or directory", "no socket there"),
        ("Connection refused", "connection refused"),
        ("Permission denied", "permission denied"),
        ("timed out", "timed out"),
    ):
        if needle in text:
            return reason
    line = one_line(error)
    return line if len(line) <= 160 else line[:157] + "..."


def _failure_reason(client: docker.DockerClient, error: BaseException) -> EngineReason:
    """Why an engine call failed: the image is missing, the engine vanished, or it refused."""
    if isinstance(error, docker.errors.ImageNotFound):
        return "image_not_found"
    return "docker_api" if ping(client) else "engine_gone"


@contextlib.contextmanager
def _translated(client: docker.DockerClient) -> Iterator[None]:
    """Turn whatever the SDK raises inside the block into an :class:`EngineError`."""
    try:
        yield
    except _FAILURES as error:
        raise EngineError(_failure_reason(client, error), one_line(error)) from error


def _transient(error: BaseException) -> bool:
    if isinstance(error, requests.exceptions.ConnectionError):
        return True
    return isinstance(error, docker.errors.APIError) and bool(error.is_server_error())


_infra_retry = retry(
    retry=retry_if_exception(_transient),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.1, max=1.0),
    reraise=True,
)


# ---------------------------------------------------------------- the engine


@dataclass(frozen=True, kw_only=True)
class ImagePin:
    """An image as the engine holds it: what a replay records instead of a mutable tag."""

    id: str  # "sha256:..."
    repo_digests: tuple[str, ...]
    tags: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class EngineInfo:
    server_version: str
    api_version: str
    storage_driver: str
    operating_system: str


def engine_url(env: Mapping[str, str]) -> str:
    """``DOCKER_HOST`` when set (and not empty), else the default local socket."""
    return env.get("DOCKER_HOST", "").strip() or DEFAULT_SOCKET


def client_arguments(url: str, env: Mapping[str, str]) -> dict[str, Any]:
    """``base_url`` (and TLS) of the client for one engine URL. Pure but for the files
    TLS names: ``tcp://`` takes the usual ``DOCKER_TLS_VERIFY`` and ``DOCKER_CERT_PATH``
    (as the docker CLI does); ``unix://`` and ``ssh://`` (through paramiko) need none."""
    if url.startswith("tcp://"):
        return dict(docker.utils.kwargs_from_env(environment={**env, "DOCKER_HOST": url}))
    return {"base_url": url}


def connect(
    env: Mapping[str, str], *, url: str | None = None, timeout_s: float = API_TIMEOUT_S
) -> docker.DockerClient:
    """A client for the engine at ``url`` (default: ``DOCKER_HOST``, else the local socket)
    that answered a ping.

    Raises :class:`EngineUnavailableError` with a one-line reason when nothing answers
    after a few quick attempts (a daemon that is still starting gets them).
    """
    url = url or engine_url(env)
    if url.startswith("ssh://"):
        _load_ssh_transport()

    @retry(
        retry=retry_if_exception_type(_FAILURES),
        stop=stop_after_attempt(PING_ATTEMPTS),
        wait=wait_fixed(PING_WAIT_S),
        reraise=True,
    )
    def open_and_ping() -> docker.DockerClient:
        # version="auto" asks the engine for its API version: a first round trip.
        client = docker.DockerClient(
            **client_arguments(url, env), version="auto", timeout=int(timeout_s)
        )
        try:
            client.ping()
        except BaseException:
            client.close()
            raise
        return client

    try:
        return open_and_ping()
    except _FAILURES as error:
        raise EngineUnavailableError(
            f"no Docker engine answers at {url} ({_unreachable_reason(error)}); "
            "start one (e.g. `sudo systemctl start docker`; in a checkout, `make engine`) "
            "or point DOCKER_HOST at one"
        ) from None


def ping(client: docker.DockerClient) -> bool:
    """Does the engine answer? Never raises."""
    try:
        return bool(client.ping())
    except _FAILURES:
        return False


def resolve_image(client: docker.DockerClient, ref: str) -> ImagePin:
    """Pin ``ref`` (a tag or an ID) to the local image's ID. Never pulls."""
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        raise ImageNotFoundError(
            f"image {ref} is not present on the engine (the tool never pulls); build it: "
            "`orchestrator image runner` makes the runner image, `orchestrator image build` "
            "a project's"
        ) from None
    except _FAILURES as error:
        raise EngineError(
            _failure_reason(client, error), f"image {ref} cannot be inspected: {one_line(error)}"
        ) from None
    return _pin(image)


def _pin(image: Any) -> ImagePin:
    config = image.attrs.get("Config") or {}
    return ImagePin(
        id=str(image.id),
        repo_digests=tuple(sorted(image.attrs.get("RepoDigests") or ())),
        tags=tuple(sorted(image.tags)),
        labels=dict(config.get("Labels") or {}),
    )


def find_image(client: docker.DockerClient, ref: str) -> ImagePin | None:
    """The local image ``ref`` names, or None when there is none. Never pulls."""
    try:
        return resolve_image(client, ref)
    except ImageNotFoundError:
        return None


def images_labelled(client: docker.DockerClient, label: str) -> list[ImagePin]:
    """Local images carrying ``label`` (``key`` or ``key=value``), newest first."""
    with _translated(client):
        images = client.images.list(filters={"label": label})
    images.sort(key=lambda image: str(image.attrs.get("Created", "")), reverse=True)
    return [_pin(image) for image in images]


def engine_info(client: docker.DockerClient) -> EngineInfo:
    """Server version, API version, storage driver and OS of the engine ``client`` talks to."""
    try:
        version = client.version()
        info = client.info()
    except _FAILURES as error:
        raise EngineUnavailableError(
            f"the Docker engine stopped answering ({_unreachable_reason(error)})"
        ) from None
    return EngineInfo(
        server_version=str(version.get("Version", "unknown")),
        api_version=str(version.get("ApiVersion", "unknown")),
        storage_driver=str(info.get("Driver", "unknown")),
        operating_system=str(info.get("OperatingSystem", "unknown")),
    )


def engine_cpus(client: docker.DockerClient) -> int | None:
    """How many CPUs the engine can give containers (its ``NCPU``); None when it does not
    say (a scheduling hint only: asking never fails a run)."""
    try:
        value = client.info().get("NCPU")
    except _FAILURES:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


@dataclass(frozen=True, kw_only=True)
class EngineFacts:
    """What tells engines apart and sizes their share of a run."""

    identity: str  # the daemon's ID and data root: two URLs of one daemon share it
    cpus: int
    name: str  # the engine's host name, for people


def engine_facts(client: docker.DockerClient) -> EngineFacts:
    """Identity, CPU count and host name of the engine ``client`` talks to."""
    with _translated(client):
        info = client.info()
    # Daemons on one machine may share an ID (it lives in /etc/docker); the data root
    # tells them apart.
    return EngineFacts(
        identity=f"{info.get('ID', '?')}:{info.get('DockerRootDir', '?')}",
        cpus=max(1, int(info.get("NCPU") or 1)),
        name=str(info.get("Name", "unknown")),
    )


@dataclass(frozen=True, kw_only=True)
class ImageState:
    """Whether an engine may run a pinned image: it holds the ID (``present``), it holds
    nothing under the reference (``absent``: ship it), or the reference names another
    image there (``other_id``: that engine is refused)."""

    present: bool
    other_id: str | None = None

    @property
    def refused(self) -> bool:
        return self.other_id is not None


def is_image_id(ref: str) -> bool:
    """``sha256:<64 hex>`` names content; anything else is a tag that may move. Pure."""
    return ref.startswith("sha256:") and len(ref) == 71


def image_state(client: docker.DockerClient, image_id: str, ref: str) -> ImageState:
    """Does this engine hold ``image_id``, and does ``ref`` (a tag) name it there too?"""

    def find(name: str) -> str | None:
        try:
            return str(client.images.get(name).id)
        except docker.errors.ImageNotFound:
            return None

    with _translated(client):
        held = find(image_id) is not None
        tagged = None if is_image_id(ref) else find(ref)
    if tagged is not None and tagged != image_id:
        return ImageState(present=held, other_id=tagged)
    return ImageState(present=held)


@dataclass(frozen=True, kw_only=True)
class Shipped:
    """One image copied from one engine to another."""

    image_id: str
    bytes: int
    seconds: float


def ship_image(
    source: docker.DockerClient, target: docker.DockerClient, image_id: str, *, tag: str | None
) -> Shipped:
    """Copy ``image_id`` from ``source`` to ``target``: ``save`` streamed into ``load``
    (no file in between, never a registry), then the ID checked on ``target``. ``tag``
    (the run's image reference, when it is a tag) is set on ``target`` when it names
    nothing there yet, so both engines read the same name the same way."""
    started = time.monotonic()
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        for chunk in source.api.get_image(image_id):
            sent += len(chunk)
            yield chunk

    with _translated(target):
        for line in target.api.load_image(chunks()) or ():  # type: ignore[no-untyped-call]
            if isinstance(line, Mapping) and line.get("error"):
                raise EngineError("docker_api", f"loading {image_id}: {line['error']}")
        try:
            loaded = target.images.get(image_id)
        except docker.errors.ImageNotFound:
            raise EngineError(
                "docker_api", f"{image_id} is not on the engine after loading it"
            ) from None
        if str(loaded.id) != image_id:  # content-addressed: another ID is another image
            raise EngineError("docker_api", f"loaded {loaded.id}, expected {image_id}")
        if tag is not None and not is_image_id(tag):
            with contextlib.suppress(docker.errors.ImageNotFound):
                target.images.get(tag)
                tag = None  # already names something there (checked before shipping)
            if tag is not None:
                repository, _, version = tag.rpartition(":")
                if not repository or "/" in version:
                    repository, version = tag, "latest"
                loaded.tag(repository, version)
    return Shipped(image_id=image_id, bytes=sent, seconds=time.monotonic() - started)


# ---------------------------------------------------------------- owners and the sweep


@dataclass(frozen=True, kw_only=True)
class Owner:
    """Who owns a container: labels written on it, read back by the sweep.

    ``host`` is the host id (``orchestrator.adapters.host.host_id``: machine, boot and
    pid namespace), the only place where ``pid`` means something; ``hostname`` is for
    people reading the labels."""

    run_id: str
    session: str
    pid: int
    pid_start: str
    host: str
    hostname: str = ""

    @classmethod
    def current(cls, run_id: str) -> Owner:
        me = current_owner()
        return cls(
            run_id=run_id,
            session=SESSION,
            pid=me.pid,
            pid_start=me.start,
            host=me.host_id,
            hostname=socket.gethostname(),
        )

    def labels(self, side: str) -> dict[str, str]:
        return {
            LABEL_MARK: "1",
            LABEL_RUN: self.run_id,
            LABEL_SESSION: self.session,
            LABEL_PID: str(self.pid),
            LABEL_PID_START: self.pid_start,
            LABEL_HOST: self.host,
            LABEL_HOSTNAME: self.hostname,
            LABEL_SIDE: side,
        }


def owner_of(labels: Mapping[str, str]) -> ProcessOwner | None:
    """The process a container's labels name (None when they name none). Pure."""
    pid_text = labels.get(LABEL_PID, "")
    host = labels.get(LABEL_HOST, "")
    if not re.fullmatch(r"[0-9]+", pid_text) or not host:
        return None
    return ProcessOwner(host_id=host, pid=int(pid_text), start=labels.get(LABEL_PID_START, ""))


def owner_gone(labels: Mapping[str, str], *, host: str, is_alive: Callable[..., bool]) -> bool:
    """Is the container's owner a process of host ``host`` that is gone?"""
    owner = owner_of(labels)
    if owner is None or owner.host_id != host:
        return False  # another host's run: its pid means nothing here
    return not is_alive(owner.pid, owner.start or None)


def sweep_leftovers(
    client: docker.DockerClient,
    *,
    host: str | None = None,
    is_alive: Callable[..., bool] = pid_alive,
    now: float | None = None,
    foreign_max_age_s: float = FOREIGN_MAX_AGE_S,
) -> list[str]:
    """Remove the tool's containers, then its volumes, that no live run owns; return the
    names removed.

    One of this host (``host``, default this process's host id) goes when its owning
    process is gone, never while it lives. Another host's (or one whose owner labels
    cannot be read) goes only once it is older than ``foreign_max_age_s``, and the log
    says so. One that cannot be removed is logged and left for the next sweep; an engine
    that cannot list them is an :class:`EngineError`.
    """
    host = host or host_id()
    now = time.time() if now is None else now
    containers: list[str] = []
    with _translated(client):
        summaries = _list_ours(client)
    # The low-level list carries labels and creation times without an inspect each.
    for summary in summaries:
        created = summary.get("Created")
        age_s = now - float(created) if isinstance(created, int | float) else None
        verdict = _sweep_verdict(
            summary.get("Labels") or {},
            host=host,
            is_alive=is_alive,
            age_s=age_s,
            foreign_max_age_s=foreign_max_age_s,
        )
        if not verdict.remove:
            continue
        name = (summary.get("Names") or [summary["Id"]])[0].lstrip("/")
        try:
            _remove_by_id(client, summary["Id"])
        except _FAILURES as error:
            log.warning("sweep.remove_failed", container=name, error=str(error))
            continue
        containers.append(name)
        if verdict.foreign:
            log.warning("sweep.foreign_removed", container=name, why=verdict.why)
    volumes: list[str] = []
    with _translated(client):
        listed = _list_our_volumes(client)
    for volume in listed:
        name = str(volume["Name"])
        verdict = _sweep_verdict(
            volume.get("Labels") or {},
            host=host,
            is_alive=is_alive,
            age_s=_volume_age_s(volume.get("CreatedAt"), now),
            foreign_max_age_s=foreign_max_age_s,
        )
        if not verdict.remove:
            continue
        try:
            _remove_volume(client, name)
        except _FAILURES as error:
            log.warning("sweep.remove_failed", volume=name, error=str(error))
            continue
        volumes.append(name)
        if verdict.foreign:
            log.warning("sweep.foreign_removed", volume=name, why=verdict.why)
    if containers or volumes:
        log.info("sweep.removed", containers=containers, volumes=volumes)
    log.debug(
        "sweep.done", what="containers", removed=len(containers), volumes=len(volumes), host=host
    )
    return containers + volumes


def _sweep_verdict(
    labels: Mapping[str, str],
    *,
    host: str,
    is_alive: Callable[..., bool],
    age_s: float | None,
    foreign_max_age_s: float,
) -> SweepVerdict:
    """What the sweep does with a container or volume carrying ``labels``."""
    owner = owner_of(labels)
    alive = None
    if owner is not None and local_owner(owner, host):
        alive = is_alive(owner.pid, owner.start or None)
    return sweep_verdict(
        owner, host_id=host, owner_alive=alive, age_s=age_s, foreign_max_age_s=foreign_max_age_s
    )


def _volume_age_s(created_at: object, now: float) -> float | None:
    """A volume's age from the engine's ``CreatedAt`` (RFC 3339; None when unreadable)."""
    if not isinstance(created_at, str) or not created_at:
        return None
    text = created_at.strip().replace("Z", "+00:00")
    # The engine may give nanoseconds; fromisoformat takes at most microseconds.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        created = datetime.fromisoformat(text)
    except ValueError:
        return None
    if created.tzinfo is None:
        return None
    return now - created.timestamp()


@_infra_retry
def _list_ours(client: docker.DockerClient) -> list[dict[str, Any]]:
    return list(client.api.containers(all=True, filters={"label": f"{LABEL_MARK}=1"}))


@_infra_retry
def _list_our_volumes(client: docker.DockerClient) -> list[dict[str, Any]]:
    found = client.api.volumes(filters={"label": f"{LABEL_MARK}=1"}) or {}
    return list(found.get("Volumes") or ())


@_infra_retry
def _remove_by_id(client: docker.DockerClient, container_id: str) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_container(container_id, force=True, v=True)


@_infra_retry
def _remove_volume(client: docker.DockerClient, name: str) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_volume(name, force=True)


# ---------------------------------------------------------------- one container


@dataclass(frozen=True, kw_only=True)
class Mount:
    """A host path (bind mount, the local engine only) or a volume's name (any engine)."""

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


NPROC = 8192  # RLIMIT_NPROC counts the user's processes across every container
# json-file, one file of at most 1 MiB: what the tool reads comes through its own streams.
LOG_OPTIONS: Mapping[str, str] = {"max-size": "1m", "max-file": "1"}
# A line longer than this is cut (the rest up to its newline is dropped): a container
# that prints without newlines costs the host a bounded buffer.
LINE_BYTES = 64 * 1024


class BoundedLines:
    """Splits a byte stream into lines of at most :data:`LINE_BYTES` for ``on_line``."""

    def __init__(self, on_line: Callable[[str], None], *, line_bytes: int = LINE_BYTES) -> None:
        self._on_line = on_line
        self._line_bytes = line_bytes
        self._pending = bytearray()
        self._dropping = False  # inside a line that was already cut

    def feed(self, chunk: bytes) -> None:
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if not self._dropping:
                room = self._line_bytes - len(self._pending)
                self._pending += chunk[start : start + max(0, min(room, end - start))]
                if end - start > room:
                    self._emit(cut=True)
                    self._dropping = True
            if newline < 0:
                return
            if not self._dropping:
                self._emit(cut=False)
            self._dropping = False
            start = newline + 1

    def close(self) -> None:
        if self._pending and not self._dropping:
            self._emit(cut=False)

    def _emit(self, *, cut: bool) -> None:
        line = self._pending.decode("utf-8", errors="replace")
        self._pending.clear()
        self._on_line(line + (" [line cut]" if cut else ""))


def container_config(
    *,
    image_id: str,
    name: str,
    command: Sequence[str],
    mounts: Sequence[Mount],
    environment: Mapping[str, str],
    labels: Mapping[str, str],
    limits: Limits,
    working_dir: str = "/src",
    tmpfs: Mapping[str, str] | None = None,
    scratch_volumes: Sequence[str] = (),
) -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` for a hermetic replay. Pure.

    No network, read-only root with a tmpfs for /tmp (plus ``tmpfs``: mount point ->
    options), a non-root user, no capabilities, no privilege gain, memory/pids/CPU
    limits, an init process, and only the environment given here (nothing from the host).
    ``scratch_volumes`` are writable paths backed by anonymous volumes: they outlive the
    container's stop (a tmpfs does not), so :meth:`Container.get_archive` can read them,
    and they go with the container.
    """
    config: dict[str, Any] = {
        "image": image_id,
        "name": name,
        "command": list(command),
        "working_dir": working_dir,
        "environment": dict(environment),
        "labels": dict(labels),
        "volumes": {
            str(mount.source): {"bind": mount.target, "mode": "ro" if mount.read_only else "rw"}
            for mount in mounts
        },
        "network_mode": "none",
        "read_only": True,
        "tmpfs": {
            # exec: suites run scripts they write to tmp_path, as on any machine
            "/tmp": f"rw,nosuid,nodev,exec,size={limits.tmp_size},mode=1777",
            **(tmpfs or {}),
        },
        "user": "1000:1000",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "mem_limit": limits.memory,
        "memswap_limit": limits.memory,  # no swap: past the limit means OOM, not slowness
        "pids_limit": limits.pids,
        "nano_cpus": int(limits.cpus * 1_000_000_000),
        "init": True,
        # The container's own log: capped (a flood fills no disk under the data root).
        "log_config": docker.types.LogConfig(
            type=docker.types.LogConfig.types.JSON, config=dict(LOG_OPTIONS)
        ),
        # Each file a process writes, and the files it holds open, are bounded too.
        "ulimits": [
            docker.types.Ulimit(name="fsize", soft=limits.file_bytes, hard=limits.file_bytes),
            docker.types.Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
            # Named with the others: Podman, given any, would set this one to the host's
            # maximum, which a machine that caps it refuses. The pids limit is the bound.
            docker.types.Ulimit(name="nproc", soft=NPROC, hard=NPROC),
        ],
        "detach": True,
        "stdin_open": False,
        "tty": False,
    }
    if scratch_volumes:
        config["mounts"] = [
            docker.types.Mount(target, None, type="volume", labels=dict(labels))
            for target in scratch_volumes
        ]
    return config


@dataclass(frozen=True, kw_only=True)
class Exit:
    """How waiting for a container ended."""

    status_code: int | None
    killed_at_deadline: bool
    cancelled: bool


class Cancelled(Exception):
    """The run was cancelled after the container was created and before it started."""


class Container:
    """One hermetic container as a context manager (cibuildwheel's ``OCIContainer`` style).

    On enter it is created from ``config`` (see :func:`container_config`; created by
    name, so a retried create adopts the container it made) and started. On exit it
    is killed unless it already stopped, and removed with its volumes - always: when
    the body returns, raises, or is interrupted (``KeyboardInterrupt``). A removal
    the engine refuses is logged, never raised over the body's outcome; the
    container stays in ``live`` for a later :meth:`LiveContainers.remove_all`, and its
    owner labels let :func:`sweep_leftovers` remove it after a crash.

    ``cancelled`` (set by another thread) stops it from starting (:class:`Cancelled`)
    and ends :meth:`wait` early. ``before_start`` runs between create and start (to
    copy files in with :meth:`put_archive`). Engine failures raise :class:`EngineError`.

    ``keep`` is the one exception to the removal (``reproduce --keep``): a container
    that started is left as it is on exit, running, for ``docker exec``; its owner
    labels still let :func:`sweep_leftovers` remove it once this process is gone. One
    that failed to start is removed all the same.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        config: Mapping[str, Any],
        *,
        live: LiveContainers | None = None,
        cancelled: threading.Event | None = None,
        keep: bool = False,
        before_start: Callable[[Container], None] | None = None,
    ) -> None:
        self.name = str(config["name"])
        self._client = client
        self._config = dict(config)
        self._before_start = before_start
        self._live = live
        self._cancelled = cancelled if cancelled is not None else threading.Event()
        self._keep = keep
        self._handle: SdkContainer | None = None
        self._started = False
        self._stopped = False  # it exited, or we killed it: nothing left to kill
        self._removed = False

    def __enter__(self) -> Container:
        with _translated(self._client):
            self._handle = _create(self._client, self._config)
        if self._live is not None:
            self._live.add(self)
        try:
            if self._before_start is not None:
                self._before_start(self)
            if self._cancelled.is_set():
                raise Cancelled(f"{self.name}: cancelled before start")
            with _translated(self._client):
                self._handle.start()  # never retried: a retry could run the replay twice
        except BaseException:
            self._close()
            raise
        self._started = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _sdk(self) -> SdkContainer:
        if self._handle is None:
            raise RuntimeError(f"{self.name}: not created (use the container as a context)")
        return self._handle

    @property
    def id(self) -> str:
        return str(self._sdk().id)

    def put_archive(self, path: str, data: bytes | Iterable[bytes] | io.BufferedReader) -> None:
        """Unpack a tar into ``path`` (a volume's path in a read-only container)."""
        with _translated(self._client):
            if not self._sdk().put_archive(path, data):
                raise EngineError("docker_api", f"{self.name}: copying into {path} failed")

    def get_archive(self, path: str) -> bytes:
        """``path`` as a tar (also after the container stopped, from a volume)."""
        with _translated(self._client):
            stream, _stat = self._sdk().get_archive(path)
            return b"".join(stream)

    def follow_logs(self, on_line: Callable[[str], None]) -> threading.Thread:
        """Feed the container's output, line by line, to ``on_line`` on a daemon thread."""
        handle = self._sdk()

        def pump() -> None:
            lines = BoundedLines(on_line)
            try:
                for chunk in handle.logs(stream=True, follow=True, stdout=True, stderr=True):
                    lines.feed(chunk)
            except Exception:  # the stream ends however the container ends
                return
            lines.close()

        thread = threading.Thread(target=pump, name=f"logs-{self.name}", daemon=True)
        thread.start()
        return thread

    def wait(self, *, deadline: float, poll_s: float = 2.0) -> Exit:
        """Wait for the container against our own monotonic deadline; kill it past the
        deadline, or as soon as ``cancelled`` is set.

        ``wait(timeout=…)`` only bounds one HTTP read (and raises a connection error,
        not a timeout), so we loop with short waits. A wait returns as soon as the
        container exits, so polling adds no latency.
        """
        handle = self._sdk()
        with _translated(self._client):
            while True:
                if self._cancelled.is_set():
                    self._kill_or_raise()
                    return Exit(
                        status_code=self._final_status(), killed_at_deadline=False, cancelled=True
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._kill_or_raise()
                    return Exit(
                        status_code=self._final_status(), killed_at_deadline=True, cancelled=False
                    )
                try:
                    result = handle.wait(timeout=max(0.05, min(poll_s, remaining)))
                except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as error:
                    if ping(self._client):
                        continue  # our own short read timed out; the container still runs
                    raise EngineError("engine_gone", str(error)) from error
                self._stopped = True
                status = result.get("StatusCode") if isinstance(result, Mapping) else None
                return Exit(
                    status_code=int(status) if isinstance(status, int) else None,
                    killed_at_deadline=False,
                    cancelled=self._cancelled.is_set(),
                )

    def facts(self, exit_: Exit) -> ContainerFacts:
        """The container's final state as facts: image ID, exit code, OOM kill. Never raises:
        an engine that fails the inspection is a fact too."""
        try:
            attrs = _inspect(self._sdk())
        except _FAILURES as error:
            return ContainerFacts(
                engine_error=_failure_reason(self._client, error),
                message=f"inspect after exit failed: {error}",
                killed_at_deadline=exit_.killed_at_deadline,
                cancelled=exit_.cancelled,
            )
        state = attrs.get("State", {})
        exit_code = state.get("ExitCode", exit_.status_code)
        return ContainerFacts(
            image_id=attrs.get("Image"),
            exit_code=exit_code if isinstance(exit_code, int) else exit_.status_code,
            oom_killed=bool(state.get("OOMKilled")),
            killed_at_deadline=exit_.killed_at_deadline,
            cancelled=exit_.cancelled,
            running=bool(state.get("Running")),
        )

    # -- processes run in the started container (``docker exec``) -----------------

    def _exec_create(
        self, command: Sequence[str], environment: Mapping[str, str], *, tty: bool
    ) -> str:
        with _translated(self._client):
            created = self._client.api.exec_create(
                self.id,
                list(command),
                stdout=True,
                stderr=True,
                stdin=tty,
                tty=tty,
                environment=dict(environment),
            )
        return str(created["Id"])

    def exec_exit_code(self, exec_id: str) -> int | None:
        """The exit code of a finished ``exec`` (None while it runs, or unknown)."""
        with _translated(self._client):
            state = self._client.api.exec_inspect(exec_id)
        code = state.get("ExitCode")
        return code if isinstance(code, int) and not state.get("Running") else None

    def exec_stream(
        self,
        command: Sequence[str],
        *,
        environment: Mapping[str, str],
        on_output: Callable[[bytes], None],
        deadline: float,
        kill_at_deadline: bool = True,
    ) -> Exit:
        """Run ``command`` in the container (its user, folder and environment, plus
        ``environment``), no terminal, no stdin; hand its output (stdout and stderr as
        they come) to ``on_output``. Past our monotonic ``deadline`` (or once
        ``cancelled`` is set) the container is killed, which ends the process too;
        with ``kill_at_deadline`` false it is left running for the caller to read
        what it left (then kill it), and the exit says the deadline passed."""
        exec_id = self._exec_create(command, environment, tty=False)
        failure: list[BaseException] = []

        def pump() -> None:
            try:
                with _translated(self._client):
                    for chunk in self._client.api.exec_start(exec_id, stream=True):
                        on_output(chunk)
            except BaseException as error:  # handed to the waiting thread
                failure.append(error)

        thread = threading.Thread(target=pump, name=f"exec-{self.name}", daemon=True)
        thread.start()
        # Joined in short steps up to the deadline (the stream ends when the process does):
        # a Ctrl-C is acted on between them (orchestrator.interrupts).
        while thread.is_alive() and (remaining := deadline - time.monotonic()) > 0:
            thread.join(timeout=min(0.5, remaining))
            interrupts.checkpoint()
            if self._cancelled.is_set():
                break
        cancelled = self._cancelled.is_set() and thread.is_alive()
        late = thread.is_alive() and not cancelled
        if cancelled or (late and kill_at_deadline):
            with _translated(self._client):
                self._kill_or_raise()
            thread.join(timeout=10)
        if failure and not (late or cancelled):
            raise failure[0]
        status = None if late and not kill_at_deadline else self.exec_exit_code(exec_id)
        return Exit(status_code=status, killed_at_deadline=late, cancelled=cancelled)

    def exec_chunks(
        self, command: Sequence[str], *, deadline: float
    ) -> tuple[Iterator[bytes], Callable[[], int | None]]:
        """Run ``command`` (no terminal, no stdin) and hand back its standard output as
        chunks, and a function for its exit code once they are consumed; the standard
        error is dropped. Past our monotonic ``deadline`` the container is killed, which
        ends the stream."""
        exec_id = self._exec_create(command, {}, tty=False)
        chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=64)

        def pump() -> None:
            try:
                with _translated(self._client):
                    for out, _err in self._client.api.exec_start(exec_id, stream=True, demux=True):
                        if out:
                            chunks.put(out)
            except BaseException as error:  # the reading side decides what it means
                chunks.put(error)
            else:
                chunks.put(None)

        threading.Thread(target=pump, name=f"read-{self.name}", daemon=True).start()

        def taken() -> Iterator[bytes]:
            while True:
                remaining = deadline - time.monotonic()
                try:
                    item = chunks.get(timeout=max(0.01, remaining))
                except queue.Empty:
                    self.kill()  # the stream ends short: what was read is refused whole
                    return
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item

        return taken(), lambda: self.exec_exit_code(exec_id)

    def exec_terminal(
        self, command: Sequence[str], *, environment: Mapping[str, str]
    ) -> ExecTerminal:
        """Start ``command`` in the container on a terminal of its own (a TTY, with stdin);
        the caller relays its socket to the user's terminal (``adapters.terminal``)."""
        exec_id = self._exec_create(command, environment, tty=True)
        with _translated(self._client):
            hijacked = self._client.api.exec_start(exec_id, tty=True, socket=True)
        # The SDK hands back its socket wrapper (``SocketIO`` on a Unix socket): reads and
        # writes go to the socket itself, with select() on it.
        raw = getattr(hijacked, "_sock", hijacked)
        if not isinstance(raw, socket.socket):
            with contextlib.suppress(Exception):
                hijacked.close()
            raise EngineError("docker_api", "the engine's exec stream is not a socket here")
        return ExecTerminal(client=self._client, exec_id=exec_id, socket=raw, owner=self)

    def kill(self) -> None:
        """Kill it now (from any thread); a container that already stopped, or an engine
        that is gone, is left to the removal to decide."""
        if self._handle is None or self._stopped:
            return
        with contextlib.suppress(*_FAILURES):
            self._handle.kill()

    def close(self) -> None:
        """Kill unless stopped, then remove (with its volumes); a started container made
        with ``keep`` is left running instead. Idempotent; never raises an engine failure
        (it is logged, and the container stays in ``live``)."""
        if self._keep and self._started:
            if self._live is not None:
                self._live.discard(self)
            log.info("container.kept", container=self.name)
            return
        self._close()

    def _close(self) -> None:
        if self._handle is None or self._removed:
            return
        try:
            self.kill()
        finally:
            try:
                _remove(self._handle)
            except _FAILURES as error:
                log.warning("container.remove_failed", container=self.name, error=str(error))
            else:
                self._removed = True
                if self._live is not None:
                    self._live.discard(self)

    def _kill_or_raise(self) -> None:
        try:
            self._sdk().kill()
        except docker.errors.APIError as error:
            if error.status_code != 409:  # 409: it already stopped
                raise
        self._stopped = True

    def _final_status(self) -> int | None:
        try:
            result = self._sdk().wait(timeout=10)
        except _FAILURES:
            return None
        status = result.get("StatusCode") if isinstance(result, Mapping) else None
        return int(status) if isinstance(status, int) else None


@dataclass(frozen=True, kw_only=True)
class ExecTerminal:
    """A process started by :meth:`Container.exec_terminal`: its terminal's socket (raw
    bytes both ways), its size, its exit code."""

    client: docker.DockerClient
    exec_id: str
    socket: socket.socket
    owner: Container

    def resize(self, rows: int, columns: int) -> None:
        """Tell the process's terminal its size; a process already gone is not a failure."""
        with contextlib.suppress(*_FAILURES):
            self.client.api.exec_resize(self.exec_id, height=rows, width=columns)

    def exit_code(self) -> int | None:
        return self.owner.exec_exit_code(self.exec_id)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.close()


def _create(client: docker.DockerClient, config: Mapping[str, Any]) -> SdkContainer:
    """Create by name; a retry that finds the name taken adopts the container it made."""
    attempts = 0

    @_infra_retry
    def attempt() -> SdkContainer:
        nonlocal attempts
        attempts += 1
        try:
            return client.containers.create(**config)
        except docker.errors.APIError as error:
            if error.status_code == 409 and attempts > 1:
                return client.containers.get(str(config["name"]))
            raise

    return attempt()


@_infra_retry
def _remove(handle: SdkContainer) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        handle.remove(force=True, v=True)


@_infra_retry
def _inspect(handle: SdkContainer) -> Mapping[str, Any]:
    handle.reload()
    return dict(handle.attrs)


@dataclass
class LiveContainers:
    """Containers this process has created and not yet removed (for Ctrl-C cleanup from
    the main thread while other threads own them)."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _containers: dict[int, Container] = field(default_factory=dict)

    def add(self, container: Container) -> None:
        with self._lock:
            self._containers[id(container)] = container

    def discard(self, container: Container) -> None:
        with self._lock:
            self._containers.pop(id(container), None)

    def snapshot(self) -> list[Container]:
        with self._lock:
            return list(self._containers.values())

    def kill_all(self) -> None:
        for container in self.snapshot():
            container.kill()

    def remove_all(self) -> None:
        for container in self.snapshot():
            container.close()


# ---------------------------------------------------------------- volumes

FILL_TARGET = "/fill"


class Volume:
    """A named volume for one run, as a context manager: created with its owner's labels
    on enter, removed on exit - always (a removal the engine refuses is logged; the
    labels let :func:`sweep_leftovers` remove it after a crash).

    :meth:`fill` copies a tar into it through a container that is created and never
    started (``put_archive`` writes into the volume it mounts), so nothing runs and
    nothing but the Docker API reaches the engine: this works for an engine on another
    machine, where a bind mount of a local folder cannot.
    """

    def __init__(
        self, client: docker.DockerClient, name: str, *, labels: Mapping[str, str], image_id: str
    ) -> None:
        self.name = name
        self._client = client
        self._labels = dict(labels)
        self._image_id = image_id
        self._created = False

    def __enter__(self) -> Volume:
        with _translated(self._client):
            _create_volume(self._client, self.name, self._labels)
        self._created = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def fill(self, data: bytes | Iterable[bytes] | io.BufferedReader) -> None:
        """Unpack a tar into the volume's root."""
        config = {
            "image": self._image_id,
            "name": f"{self.name}-fill",
            "command": ["true"],
            "volumes": {self.name: {"bind": FILL_TARGET, "mode": "rw"}},
            "labels": self._labels,
            "network_mode": "none",
            "read_only": True,
            "detach": True,
        }
        with _translated(self._client):
            helper = _create(self._client, config)
        try:
            with _translated(self._client):
                if not helper.put_archive(FILL_TARGET, data):
                    raise EngineError("docker_api", f"copying into volume {self.name} failed")
        finally:
            try:
                _remove_keeping_volumes(helper)
            except _FAILURES as error:
                log.warning("volume.helper_remove_failed", volume=self.name, error=str(error))

    def remove(self) -> None:
        """Remove the volume (idempotent; never raises an engine failure)."""
        if not self._created:
            return
        try:
            _remove_volume(self._client, self.name)
        except _FAILURES as error:
            log.warning("volume.remove_failed", volume=self.name, error=str(error))
        else:
            self._created = False


@_infra_retry
def _create_volume(client: docker.DockerClient, name: str, labels: Mapping[str, str]) -> None:
    client.volumes.create(name=name, labels=dict(labels))


@_infra_retry
def _remove_keeping_volumes(handle: SdkContainer) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        handle.remove(force=True)


def tar_of(entries: Iterable[tuple[str, bytes | None, int]]) -> bytes:
    """A small tar in memory: ``(name, data, mode)``, a folder when ``data`` is None. Pure."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# ---------------------------------------------------------------- images we build

BUILD_TIMEOUT_S = 3600  # one build step may install wheels for minutes without output


def build_image(
    client: docker.DockerClient,
    context: Path,
    *,
    tag: str,
    labels: Mapping[str, str],
    buildargs: Mapping[str, str],
    on_line: Callable[[str], None] | None = None,
) -> str:
    """Build ``context`` (its ``Dockerfile``) with the engine's classic builder, with no
    network and never pulling (the ``FROM`` lines name local image IDs); tag it and return
    its image ID. A step that fails is an :class:`ImageBuildError` with the build's last
    lines; the engine failing is an :class:`EngineError`.
    """
    lines: list[str] = []
    with _translated(client):
        stream = client.api.build(
            path=str(context),
            tag=tag,
            labels=dict(labels),
            buildargs=dict(buildargs),
            network_mode="none",
            pull=False,
            rm=True,
            forcerm=True,
            decode=True,
            timeout=BUILD_TIMEOUT_S,
            use_config_proxy=False,
        )
        for chunk in stream:
            text = chunk.get("stream") or chunk.get("status") or ""
            for line in str(text).splitlines():
                if line.strip():
                    lines.append(line.rstrip())
                    if on_line is not None:
                        on_line(line.rstrip())
            error = chunk.get("error")
            if error:
                tail = " | ".join(lines[-6:])
                raise ImageBuildError(f"the image build failed: {_first_line(error)}; {tail}")
        pin = resolve_image(client, tag)
    return pin.id


def _first_line(text: Any) -> str:
    lines = str(text).strip().splitlines()
    return lines[0] if lines else "no detail"


def prune_stage(client: docker.DockerClient, label: str, value: str) -> None:
    """Remove the dangling images of one build's install stage (``label=value``); they
    only held the wheelhouse. A failure is logged: at worst an unused image stays."""
    try:
        client.images.prune(filters={"dangling": True, "label": f"{label}={value}"})
    except _FAILURES as error:
        log.warning("image.prune_failed", label=f"{label}={value}", error=one_line(error))


def import_rootfs(
    client: docker.DockerClient, tarball: Path, *, tag: str, changes: Sequence[str]
) -> str:
    """``docker import`` through the SDK: a root file system tarball as an image."""
    repository, _, name = tag.rpartition(":")
    with _translated(client):
        client.api.import_image_from_file(
            str(tarball), repository=repository, tag=name, changes=list(changes)
        )
        return resolve_image(client, tag).id


def tag_image(client: docker.DockerClient, image_id: str, tag: str) -> None:
    """Point ``tag`` (``repository:name``) at ``image_id`` (moved from another image)."""
    repository, _, name = tag.rpartition(":")
    with _translated(client):
        client.api.tag(image_id, repository, name, force=True)


def run_command(
    client: docker.DockerClient,
    image_id: str,
    command: Sequence[str],
    *,
    purpose: str,
    timeout_s: float = 120.0,
) -> tuple[int | None, str]:
    """Run ``command`` once in a hermetic container of ``image_id`` (no network, read-only,
    uid 1000) and return its exit code and output; the container is always removed."""
    owner = Owner.current(f"{purpose}-{uuid.uuid4().hex[:8]}")
    config = container_config(
        image_id=image_id,
        name=f"orchestrator-{owner.run_id}",
        command=command,
        mounts=(),
        environment={"HOME": "/tmp"},
        labels=owner.labels(purpose),
        limits=Limits(),
        working_dir="/tmp",
    )
    output: list[str] = []
    with Container(client, config) as container:
        pump = container.follow_logs(output.append)
        exit_ = container.wait(deadline=time.monotonic() + timeout_s, poll_s=1.0)
        pump.join(timeout=5)
    return exit_.status_code, "\n".join(output)
