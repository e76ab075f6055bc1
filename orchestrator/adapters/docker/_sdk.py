"""The Docker SDK, loaded once, and the one place its failures are named.

Every submodule of :mod:`orchestrator.adapters.docker` takes the SDK from here (never
``import docker`` itself): the SDK must be imported with paramiko held back (below).
What the SDK and its transport raise is translated into an :class:`EngineError` by
:func:`translated`; :func:`failures` is the tuple to catch, read at the moment of
catching because an ssh:// engine adds paramiko's errors to it. :data:`infra_retry`
retries only infrastructure calls (see the package's docstring).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

import requests.exceptions
import urllib3.exceptions
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from orchestrator.errors import EngineError, EngineReason, one_line

__all__ = [
    "SdkContainer",
    "docker",
    "failure_reason",
    "failures",
    "infra_retry",
    "load_ssh_transport",
    "ping",
    "translated",
    "unreachable_reason",
]


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
# it, so the SDK is imported without it and :func:`load_ssh_transport` adds it for the
# first ssh:// engine. paramiko is held back only while the SDK itself is imported.
with _held_back("paramiko"):
    import docker
    import docker.api.client
    import docker.errors
    import docker.transport
    import docker.types
    import docker.utils
    from docker.models.containers import Container as SdkContainer

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


def failures() -> tuple[type[BaseException], ...]:
    """What the SDK and its transport raise, as of now (paramiko's errors join it with
    the ssh:// transport)."""
    return _FAILURES


def load_ssh_transport() -> None:
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


def ping(client: docker.DockerClient) -> bool:
    """Does the engine answer? Never raises."""
    try:
        return bool(client.ping())
    except _FAILURES:
        return False


def unreachable_reason(error: BaseException) -> str:
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


def failure_reason(client: docker.DockerClient, error: BaseException) -> EngineReason:
    """Why an engine call failed: the image is missing, the engine vanished, or it refused."""
    if isinstance(error, docker.errors.ImageNotFound):
        return "image_not_found"
    return "docker_api" if ping(client) else "engine_gone"


@contextlib.contextmanager
def translated(client: docker.DockerClient) -> Iterator[None]:
    """Turn whatever the SDK raises inside the block into an :class:`EngineError`."""
    try:
        yield
    except _FAILURES as error:
        raise EngineError(failure_reason(client, error), one_line(error)) from error


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
