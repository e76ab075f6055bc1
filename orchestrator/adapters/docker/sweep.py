"""The sweep: remove the containers and volumes of runs whose owner is gone (this host's
once the owning process is gone, another host's only once they are a day old, never a
live run's)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from orchestrator.adapters.docker._sdk import docker, failures, infra_retry, translated
from orchestrator.adapters.docker.volume import remove_volume
from orchestrator.adapters.host import host_id, pid_alive
from orchestrator.adapters.owners import LABEL_MARK, owner_of
from orchestrator.core.owners import FOREIGN_MAX_AGE_S, SweepVerdict, local_owner, sweep_verdict
from orchestrator.log import get_logger

log = get_logger(__name__)


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
    with translated(client):
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
        except failures() as error:
            log.warning("sweep.remove_failed", container=name, error=str(error))
            continue
        containers.append(name)
        if verdict.foreign:
            log.warning("sweep.foreign_removed", container=name, why=verdict.why)
    volumes: list[str] = []
    with translated(client):
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
            remove_volume(client, name)
        except failures() as error:
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


@infra_retry
def _list_ours(client: docker.DockerClient) -> list[dict[str, Any]]:
    return list(client.api.containers(all=True, filters={"label": f"{LABEL_MARK}=1"}))


@infra_retry
def _list_our_volumes(client: docker.DockerClient) -> list[dict[str, Any]]:
    found = client.api.volumes(filters={"label": f"{LABEL_MARK}=1"}) or {}
    return list(found.get("Volumes") or ())


@infra_retry
def _remove_by_id(client: docker.DockerClient, container_id: str) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_container(container_id, force=True, v=True)
