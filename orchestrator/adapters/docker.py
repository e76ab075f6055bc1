"""Docker SDK, thin: hermetic container settings, owner labels, sweep, one container's life.

Containers are made with ``containers.create`` + ``start`` from an image *ID*
(``run`` would pull; ``auto_remove`` races with ``wait``) and removed by the
caller in a ``finally``. Each carries labels naming its run, this process's
session, its owning pid (with the pid's start time, so a reused pid is not taken
for the owner) and host; :func:`sweep_leftovers` removes the containers of
owners that are gone, and never a live run's.

Tenacity retries only infrastructure calls (ping, inspect, create-by-name,
remove). ``start``, ``wait`` and ``kill`` are never retried: retrying them could
run a replay twice or hide the failure that decides a label.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests
from tenacity import (
    retry,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from orchestrator.core.labels import ContainerFacts
from orchestrator.log import get_logger

LABEL_MARK = "orchestrator.replay"
LABEL_RUN = "orchestrator.run-id"
LABEL_SESSION = "orchestrator.session"
LABEL_PID = "orchestrator.pid"
LABEL_PID_START = "orchestrator.pid-start"
LABEL_HOST = "orchestrator.host"
LABEL_SIDE = "orchestrator.side"

# One id per process: every container this process makes shares it.
SESSION = uuid.uuid4().hex[:12]

PROGRESS_LINE = re.compile(r"^replay (\d+)/(\d+) (\S+)")

log = get_logger(__name__)


def _transient(error: BaseException) -> bool:
    if isinstance(error, requests.exceptions.ConnectionError):
        return True
    return isinstance(error, docker.errors.APIError) and bool(error.is_server_error())


infra_retry = retry(
    retry=retry_if_exception(_transient),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.1, max=1.0),
    reraise=True,
)


def process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), to tell reused pids apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Is the process alive (and, when ``start`` is given, the same process)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if start is not None:
        current = process_start(pid)
        if current is not None and current != start:
            return False
    return True


@dataclass(frozen=True, kw_only=True)
class Owner:
    """Who owns a container: labels written on it, read back by the sweep."""

    run_id: str
    session: str
    pid: int
    pid_start: str
    host: str

    @classmethod
    def current(cls, run_id: str) -> Owner:
        pid = os.getpid()
        return cls(
            run_id=run_id,
            session=SESSION,
            pid=pid,
            pid_start=process_start(pid) or "",
            host=socket.gethostname(),
        )

    def labels(self, side: str) -> dict[str, str]:
        return {
            LABEL_MARK: "1",
            LABEL_RUN: self.run_id,
            LABEL_SESSION: self.session,
            LABEL_PID: str(self.pid),
            LABEL_PID_START: self.pid_start,
            LABEL_HOST: self.host,
            LABEL_SIDE: side,
        }


def owner_gone(labels: Mapping[str, str], *, host: str, is_alive: Callable[..., bool]) -> bool:
    """May a container with these labels be swept? Only a same-host owner that is dead. Pure."""
    if labels.get(LABEL_HOST) != host:
        return False  # another machine's run: its pid means nothing here
    pid_text = labels.get(LABEL_PID, "")
    if not pid_text.isdigit():
        return False
    return not is_alive(int(pid_text), labels.get(LABEL_PID_START) or None)


def sweep_leftovers(
    client: docker.DockerClient,
    *,
    host: str | None = None,
    is_alive: Callable[..., bool] = pid_alive,
) -> list[str]:
    """Remove containers left by killed runs on this host; a live run's are never touched."""
    host = host or socket.gethostname()
    removed: list[str] = []
    # The low-level list carries labels without one inspect per container.
    for summary in _list_ours(client):
        labels = summary.get("Labels") or {}
        if not owner_gone(labels, host=host, is_alive=is_alive):
            continue
        name = (summary.get("Names") or [summary["Id"]])[0].lstrip("/")
        try:
            _remove_by_id(client, summary["Id"])
            removed.append(name)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
            log.warning("sweep.remove_failed", container=name, error=str(error))
    if removed:
        log.info("sweep.removed", containers=removed)
    return removed


@infra_retry
def _list_ours(client: docker.DockerClient) -> list[dict[str, Any]]:
    return list(client.api.containers(all=True, filters={"label": f"{LABEL_MARK}=1"}))


@infra_retry
def _remove_by_id(client: docker.DockerClient, container_id: str) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_container(container_id, force=True, v=True)


@dataclass(frozen=True, kw_only=True)
class Mount:
    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True, kw_only=True)
class Limits:
    memory: str = "512m"
    pids: int = 256
    cpus: float = 1.0
    tmp_size: str = "64m"


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
) -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` for a hermetic replay. Pure.

    No network, read-only root with a tmpfs for /tmp, a non-root user, no
    capabilities, no privilege gain, memory/pids/CPU limits, an init process, and
    only the environment given here (nothing from the host).
    """
    return {
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
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={limits.tmp_size},mode=1777"},
        "user": "1000:1000",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "mem_limit": limits.memory,
        "memswap_limit": limits.memory,  # no swap: past the limit means OOM, not slowness
        "pids_limit": limits.pids,
        "nano_cpus": int(limits.cpus * 1_000_000_000),
        "init": True,
        "detach": True,
        "stdin_open": False,
        "tty": False,
    }


def engine_alive(client: docker.DockerClient) -> bool:
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return False


def failure_reason(client: docker.DockerClient, error: BaseException) -> str:
    """The harness sub-reason of an engine failure: the engine vanished, or it refused."""
    if isinstance(error, docker.errors.ImageNotFound):
        return "image_not_found"
    return "docker_api" if engine_alive(client) else "engine_gone"


@dataclass
class LiveContainers:
    """Containers this process has created and not yet removed (for Ctrl-C cleanup)."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _containers: dict[str, Any] = field(default_factory=dict)

    def add(self, container: Any) -> None:
        with self._lock:
            self._containers[container.id] = container

    def discard(self, container: Any) -> None:
        with self._lock:
            self._containers.pop(container.id, None)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self._containers.values())

    def kill_all(self) -> None:
        for container in self.snapshot():
            # Already stopped, or the engine is gone: the removal below decides.
            with contextlib.suppress(
                docker.errors.DockerException, requests.exceptions.RequestException
            ):
                container.kill()

    def remove_all(self) -> None:
        for container in self.snapshot():
            try:
                remove(container)
            except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
                log.warning("container.remove_failed", container=container.name, error=str(error))
            self.discard(container)


def create(client: docker.DockerClient, config: Mapping[str, Any]) -> Any:
    """Create by name; a retry that finds the name taken adopts the container it made."""
    attempts = 0

    @infra_retry
    def attempt() -> Any:
        nonlocal attempts
        attempts += 1
        try:
            return client.containers.create(**config)
        except docker.errors.APIError as error:
            if error.status_code == 409 and attempts > 1:
                return client.containers.get(config["name"])
            raise

    return attempt()


@infra_retry
def remove(container: Any) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        container.remove(force=True, v=True)


@infra_retry
def inspect(container: Any) -> Mapping[str, Any]:
    container.reload()
    return dict(container.attrs)


def follow_logs(container: Any, on_line: Callable[[str], None]) -> threading.Thread:
    """Read the container's output line by line on a daemon thread (progress, diagnostics)."""

    def pump() -> None:
        pending = b""
        try:
            for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    on_line(line.decode("utf-8", errors="replace"))
        except Exception:  # the stream ends however the container ends
            return
        if pending:
            on_line(pending.decode("utf-8", errors="replace"))

    thread = threading.Thread(target=pump, name=f"logs-{container.name}", daemon=True)
    thread.start()
    return thread


@dataclass(frozen=True, kw_only=True)
class Exit:
    status_code: int | None
    killed_at_deadline: bool
    cancelled: bool


class EngineGone(Exception):
    """The engine stopped answering while we waited for a container."""


def wait_until(
    client: docker.DockerClient,
    container: Any,
    *,
    deadline: float,
    cancelled: threading.Event,
    poll_s: float = 2.0,
) -> Exit:
    """Wait for the container against our own monotonic deadline; kill it past the deadline.

    ``wait(timeout=…)`` only bounds one HTTP read (and raises a connection error,
    not a timeout), so we loop with short waits. A wait returns as soon as the
    container exits, so polling adds no latency.
    """
    while True:
        if cancelled.is_set():
            _kill(container)
            return Exit(
                status_code=_final_status(container), killed_at_deadline=False, cancelled=True
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _kill(container)
            return Exit(
                status_code=_final_status(container), killed_at_deadline=True, cancelled=False
            )
        try:
            result = container.wait(timeout=max(0.05, min(poll_s, remaining)))
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as error:
            if engine_alive(client):
                continue  # our own short read timed out; the container is still running
            raise EngineGone(str(error)) from None
        status = result.get("StatusCode") if isinstance(result, Mapping) else None
        return Exit(
            status_code=int(status) if isinstance(status, int) else None,
            killed_at_deadline=False,
            cancelled=cancelled.is_set(),
        )


def _kill(container: Any) -> None:
    try:
        container.kill()
    except docker.errors.APIError as error:
        if error.status_code != 409:  # 409: it already stopped
            raise


def _final_status(container: Any) -> int | None:
    try:
        result = container.wait(timeout=10)
    except (requests.exceptions.RequestException, docker.errors.DockerException):
        return None
    status = result.get("StatusCode") if isinstance(result, Mapping) else None
    return int(status) if isinstance(status, int) else None


def facts_after_exit(client: docker.DockerClient, container: Any, exit_: Exit) -> ContainerFacts:
    """The container's final state as facts: image ID, exit code, OOM kill."""
    try:
        attrs = inspect(container)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
        return ContainerFacts(
            engine_error=failure_reason(client, error),
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
    )


class LineTail:
    """The last lines a container printed, for diagnostics on a harness error."""

    def __init__(self, keep: int = 40) -> None:
        self.lines: deque[str] = deque(maxlen=keep)

    def __call__(self, line: str) -> None:
        self.lines.append(line)
