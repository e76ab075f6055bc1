"""Sides' containers on a Docker engine: the Docker backend of
:mod:`orchestrator.services.side_runner`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.adapters import docker as docker_adapter

if TYPE_CHECKING:
    from docker import DockerClient

    from orchestrator.services.side_runner import SideJob


def docker_config(job: SideJob) -> dict[str, Any]:
    """The job as the keyword arguments of ``containers.create``."""
    return docker_adapter.container_config(
        image_id=job.image_id,
        name=job.name,
        command=job.command,
        mounts=job.mounts,
        environment=job.environment,
        labels=job.labels,
        limits=job.limits,
        tmpfs=job.tmpfs,
    )


@dataclass(frozen=True)
class DockerSides:
    """One Docker engine, reached through its client, as a side engine."""

    client: DockerClient

    def container(
        self,
        job: SideJob,
        *,
        live: docker_adapter.LiveContainers | None = None,
        cancelled: threading.Event | None = None,
        keep: bool = False,
    ) -> docker_adapter.Container:
        return docker_adapter.Container(
            self.client, docker_config(job), live=live, cancelled=cancelled, keep=keep
        )
