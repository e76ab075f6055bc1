"""The Docker engine and the runner image: connect, pin an image by ID, describe the engine.

Thin on purpose. The tool never pulls: an image is either present locally (built by
``make image``) or an :class:`~orchestrator.errors.ImageNotFoundError`. Only the
infrastructure call that can flap while a daemon starts (the ping) is retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.errors import EngineUnavailableError, ImageNotFoundError

if TYPE_CHECKING:
    import docker

RUNNER_IMAGE = "orchestrator-runner:latest"
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
PING_ATTEMPTS = 3
PING_WAIT_S = 0.5
API_TIMEOUT_S = 60


@dataclass(frozen=True, kw_only=True)
class ImagePin:
    """An image as the engine holds it: what a replay records instead of a mutable tag."""

    id: str  # "sha256:..."
    repo_digests: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class EngineInfo:
    server_version: str
    api_version: str
    storage_driver: str
    operating_system: str


def engine_url(env: Mapping[str, str]) -> str:
    """``DOCKER_HOST`` when set (and not empty), else the default local socket."""
    return env.get("DOCKER_HOST", "").strip() or DEFAULT_SOCKET


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _reason(error: BaseException) -> str:
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
    line = _one_line(error)
    return line if len(line) <= 160 else line[:157] + "..."


def connect(env: Mapping[str, str], *, timeout_s: float = API_TIMEOUT_S) -> docker.DockerClient:
    """A client for the engine at ``DOCKER_HOST`` (or the default socket) that answered a ping.

    Raises :class:`EngineUnavailableError` with a one-line reason when nothing answers
    after a few quick attempts (a daemon that is still starting gets them).
    """
    import docker
    import docker.errors
    import requests.exceptions
    from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_fixed

    url = engine_url(env)
    failures = (docker.errors.DockerException, requests.exceptions.RequestException)

    @retry(
        retry=retry_if_exception_type(failures),
        stop=stop_after_attempt(PING_ATTEMPTS),
        wait=wait_fixed(PING_WAIT_S),
        reraise=True,
    )
    def open_and_ping() -> docker.DockerClient:
        # version="auto" asks the engine for its API version: a first round trip.
        client = docker.DockerClient(base_url=url, version="auto", timeout=int(timeout_s))
        try:
            client.ping()
        except BaseException:
            client.close()
            raise
        return client

    try:
        return open_and_ping()
    except failures as error:
        raise EngineUnavailableError(
            f"no Docker engine answers at {url} ({_reason(error)}); "
            "start one with scripts/ensure-docker (or `make engine`)"
        ) from None


def resolve_image(client: docker.DockerClient, ref: str) -> ImagePin:
    """Pin ``ref`` (a tag or an ID) to the local image's ID. Never pulls."""
    import docker.errors

    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        raise ImageNotFoundError(
            f"image {ref} is not present on the engine (the tool never pulls); "
            "build it with `make image`"
        ) from None
    except docker.errors.APIError as error:
        raise ImageNotFoundError(f"image {ref} cannot be inspected: {_one_line(error)}") from None
    attrs = image.attrs
    return ImagePin(
        id=str(image.id),
        repo_digests=tuple(sorted(attrs.get("RepoDigests") or ())),
        tags=tuple(sorted(image.tags)),
    )


def engine_info(client: docker.DockerClient) -> EngineInfo:
    """Server version, API version, storage driver and OS of the engine ``client`` talks to."""
    import docker.errors
    import requests.exceptions

    try:
        version = client.version()
        info = client.info()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as error:
        raise EngineUnavailableError(
            f"the Docker engine stopped answering ({_reason(error)})"
        ) from None
    return EngineInfo(
        server_version=str(version.get("Version", "unknown")),
        api_version=str(version.get("ApiVersion", "unknown")),
        storage_driver=str(info.get("Driver", "unknown")),
        operating_system=str(info.get("OperatingSystem", "unknown")),
    )
