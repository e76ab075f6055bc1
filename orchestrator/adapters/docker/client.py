"""Reaching an engine: its URL, a client that answered a ping, and what the engine says
about itself (versions, CPUs, identity)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_fixed

from orchestrator.adapters.docker._sdk import (
    docker,
    failures,
    load_ssh_transport,
    translated,
    unreachable_reason,
)
from orchestrator.errors import EngineUnavailableError

RUNNER_IMAGE = "orchestrator-runner:latest"
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
PING_ATTEMPTS = 3
PING_WAIT_S = 0.5
API_TIMEOUT_S = 60


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
        load_ssh_transport()

    @retry(
        retry=retry_if_exception_type(failures()),
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
    except failures() as error:
        raise EngineUnavailableError(
            f"no Docker engine answers at {url} ({unreachable_reason(error)}); "
            "start one (e.g. `sudo systemctl start docker`; in a checkout, `make engine`) "
            "or point DOCKER_HOST at one"
        ) from None


def engine_info(client: docker.DockerClient) -> EngineInfo:
    """Server version, API version, storage driver and OS of the engine ``client`` talks to."""
    try:
        version = client.version()
        info = client.info()
    except failures() as error:
        raise EngineUnavailableError(
            f"the Docker engine stopped answering ({unreachable_reason(error)})"
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
    except failures():
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
    with translated(client):
        info = client.info()
    # Daemons on one machine may share an ID (it lives in /etc/docker); the data root
    # tells them apart.
    return EngineFacts(
        identity=f"{info.get('ID', '?')}:{info.get('DockerRootDir', '?')}",
        cpus=max(1, int(info.get("NCPU") or 1)),
        name=str(info.get("Name", "unknown")),
    )
