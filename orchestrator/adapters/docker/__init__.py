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

The SDK is imported once, by :mod:`._sdk`, when this package is: only commands that talk
to the engine import it (``orchestrator --help`` and the engine-free commands never do).

The modules, by concern: :mod:`.client` (reaching an engine), :mod:`.images` (pinning,
shipping, building), :mod:`.sweep` (removing what nobody owns; the owner labels are
:mod:`orchestrator.adapters.owners`), :mod:`.config` and :mod:`.container` (one
container), :mod:`.volume`.
Callers import from this package, which names them all.
"""

from __future__ import annotations

from orchestrator.adapters.docker._sdk import ping
from orchestrator.adapters.docker.client import (
    API_TIMEOUT_S,
    DEFAULT_SOCKET,
    PING_ATTEMPTS,
    PING_WAIT_S,
    RUNNER_IMAGE,
    EngineFacts,
    EngineInfo,
    client_arguments,
    connect,
    engine_cpus,
    engine_facts,
    engine_info,
    engine_url,
)
from orchestrator.adapters.docker.config import LOG_OPTIONS, NPROC, container_config, job_config
from orchestrator.adapters.docker.container import Container, ExecTerminal, run_command
from orchestrator.adapters.docker.images import (
    BUILD_TIMEOUT_S,
    ImagePin,
    ImageState,
    build_image,
    find_image,
    image_state,
    images_labelled,
    import_rootfs,
    is_image_id,
    prune_stage,
    resolve_image,
    ship_image,
    tag_image,
)
from orchestrator.adapters.docker.sweep import sweep_leftovers
from orchestrator.adapters.docker.volume import FILL_TARGET, Volume, tar_of
from orchestrator.adapters.owners import (
    LABEL_HOST,
    LABEL_HOSTNAME,
    LABEL_MARK,
    LABEL_PID,
    LABEL_PID_START,
    LABEL_RUN,
    LABEL_SESSION,
    LABEL_SIDE,
    SESSION,
    Owner,
    owner_gone,
    owner_of,
)

# The values of the backend seam (orchestrator.core.backend) and the owner labels, which
# this adapter speaks, named here too for its callers.
from orchestrator.core.backend import Cancelled, Exit, Limits, LiveContainers, Mount, Shipped
from orchestrator.core.bounded_lines import LINE_BYTES, BoundedLines

__all__ = [
    "API_TIMEOUT_S",
    "BUILD_TIMEOUT_S",
    "DEFAULT_SOCKET",
    "FILL_TARGET",
    "LABEL_HOST",
    "LABEL_HOSTNAME",
    "LABEL_MARK",
    "LABEL_PID",
    "LABEL_PID_START",
    "LABEL_RUN",
    "LABEL_SESSION",
    "LABEL_SIDE",
    "LINE_BYTES",
    "LOG_OPTIONS",
    "NPROC",
    "PING_ATTEMPTS",
    "PING_WAIT_S",
    "RUNNER_IMAGE",
    "SESSION",
    "BoundedLines",
    "Cancelled",
    "Container",
    "EngineFacts",
    "EngineInfo",
    "ExecTerminal",
    "Exit",
    "ImagePin",
    "ImageState",
    "Limits",
    "LiveContainers",
    "Mount",
    "Owner",
    "Shipped",
    "Volume",
    "build_image",
    "client_arguments",
    "connect",
    "container_config",
    "engine_cpus",
    "engine_facts",
    "engine_info",
    "engine_url",
    "find_image",
    "image_state",
    "images_labelled",
    "import_rootfs",
    "is_image_id",
    "job_config",
    "owner_gone",
    "owner_of",
    "ping",
    "prune_stage",
    "resolve_image",
    "run_command",
    "ship_image",
    "sweep_leftovers",
    "tag_image",
    "tar_of",
]
