"""The keyword arguments of ``containers.create`` for a hermetic container, from its
mounts and limits (:func:`container_config`) or a side's job (:func:`job_config`); pure.
The mounts, limits and job are the backend seam's values (:mod:`orchestrator.core.backend`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.adapters.docker._sdk import docker
from orchestrator.core.backend import Limits, Mount, SideJob

NPROC = 8192  # RLIMIT_NPROC counts the user's processes across every container
# json-file, one file of at most 1 MiB: what the tool reads comes through its own streams.
LOG_OPTIONS: Mapping[str, str] = {"max-size": "1m", "max-file": "1"}


def container_config(  # noqa: PLR0913 - one keyword per field of the engine's create call
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
    network_mode: str = "none",
    user: str = "1000:1000",
) -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` for a hermetic replay. Pure.

    No network, read-only root with a tmpfs for /tmp (plus ``tmpfs``: mount point ->
    options), a non-root user, no capabilities, no privilege gain, memory/pids/CPU
    limits, an init process, and only the environment given here (nothing from the host).
    ``scratch_volumes`` are writable paths backed by anonymous volumes: they outlive the
    container's stop (a tmpfs does not), so :meth:`Container.get_archive` can read them,
    and they go with the container. ``network_mode`` and ``user``: only ``image build``'s
    container, on the operator's word, joins a network; it may run as the caller's uid.
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
        "network_mode": network_mode,
        "read_only": True,
        "tmpfs": {
            # exec: suites run scripts they write to tmp_path, as on any machine
            "/tmp": f"rw,nosuid,nodev,exec,size={limits.tmp_size},mode=1777",
            **(tmpfs or {}),
        },
        "user": user,
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


def job_config(job: SideJob) -> dict[str, Any]:
    """A side's job (:class:`~orchestrator.core.backend.SideJob`) as the keyword arguments
    of ``containers.create``. Pure."""
    return container_config(
        image_id=job.image_id,
        name=job.name,
        command=job.command,
        mounts=job.mounts,
        environment=job.environment,
        labels=job.labels,
        limits=job.limits,
        tmpfs=job.tmpfs,
    )
