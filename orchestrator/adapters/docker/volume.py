"""Named volumes for one run (sources for an engine that cannot see this machine's files),
filled from a tar through a container that never starts."""

from __future__ import annotations

import contextlib
import io
import tarfile
from collections.abc import Iterable, Mapping

from orchestrator.adapters.docker._sdk import (
    SdkContainer,
    docker,
    failures,
    infra_retry,
    translated,
)
from orchestrator.adapters.docker.container import create_container
from orchestrator.errors import EngineError
from orchestrator.log import get_logger

log = get_logger(__name__)

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
        with translated(self._client):
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
        with translated(self._client):
            helper = create_container(self._client, config)
        try:
            with translated(self._client):
                if not helper.put_archive(FILL_TARGET, data):
                    raise EngineError("docker_api", f"copying into volume {self.name} failed")
        finally:
            try:
                _remove_keeping_volumes(helper)
            except failures() as error:
                log.warning("volume.helper_remove_failed", volume=self.name, error=str(error))

    def remove(self) -> None:
        """Remove the volume (idempotent; never raises an engine failure)."""
        if not self._created:
            return
        try:
            remove_volume(self._client, self.name)
        except failures() as error:
            log.warning("volume.remove_failed", volume=self.name, error=str(error))
        else:
            self._created = False


@infra_retry
def _create_volume(client: docker.DockerClient, name: str, labels: Mapping[str, str]) -> None:
    client.volumes.create(name=name, labels=dict(labels))


@infra_retry
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


@infra_retry
def remove_volume(client: docker.DockerClient, name: str) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_volume(name, force=True)
