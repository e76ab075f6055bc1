"""Build (or reuse) the runner image from the recipe that ships inside the package.

``orchestrator image runner`` (and ``scripts/build-images``, which calls it): the base
(``orchestrator-base``, made offline by the recipe's ``base/build`` from Debian's packages)
unless ``base_image`` names a local image, then the runner (``runner/Dockerfile``: the
runner user on the base) with the engine's classic builder, no network, never pulling.
Each is tagged by a digest of its build context (:mod:`orchestrator.core.runner_image`)
and skipped when that tag exists; ``orchestrator-runner:latest`` then names the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.adapters import recipe as recipe_adapter
from orchestrator.core import runner_image as core
from orchestrator.log import get_logger
from orchestrator.services.image_reuse import build_lock, reuse_or_build

if TYPE_CHECKING:
    from docker import DockerClient

log = get_logger(__name__)

REPORT_SCHEMA = "runner-image/1"


@dataclass(frozen=True, kw_only=True)
class RunnerImageOptions:
    recipe: Path = recipe_adapter.RECIPE_DIR
    base_image: str | None = None  # a local image with python3, pytest and useradd
    repository: str = core.RUNNER_REPOSITORY


def _base(
    client: DockerClient,
    options: RunnerImageOptions,
    env: Mapping[str, str],
    on_line: Callable[[str], None] | None,
) -> dict[str, Any]:
    from orchestrator.adapters import docker as docker_adapter

    if options.base_image is not None:
        pin = docker_adapter.resolve_image(client, options.base_image)  # never pulled
        log.info("runner_image.base_given", ref=options.base_image, id=pin.id)
        return {"ref": options.base_image, "id": pin.id, "reused": True}
    folder = options.recipe / "base"
    tag = core.base_tag(recipe_adapter.context_files(folder))

    def build() -> str:
        recipe_adapter.run_base_build(folder, tag, env=env, on_line=on_line)
        return docker_adapter.resolve_image(client, tag).id

    base = reuse_or_build(
        client,
        tag,
        build=build,
        reused_event="runner_image.base_reused",
        building_event="runner_image.base_building",
        note="from Debian packages, about a minute",
    )
    docker_adapter.tag_image(client, base.image_id, core.LOCAL_BASE)
    return {"ref": tag, "id": base.image_id, "reused": base.reused}


def build_runner_image(
    client: DockerClient,
    options: RunnerImageOptions,
    *,
    env: Mapping[str, str],
    on_line: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Make (or reuse) the base and the runner; the ``runner-image/1`` report."""
    from orchestrator.adapters import docker as docker_adapter

    folder = options.recipe / "runner"
    files = recipe_adapter.context_files(folder)  # a missing recipe fails before any build
    with build_lock("runner"):  # the base and the runner: one build of both at a time
        base = _base(client, options, env, on_line)
        tag = core.runner_tag(files, base_image_id=base["id"], repository=options.repository)
        runner = reuse_or_build(
            client,
            tag,
            build=lambda: docker_adapter.build_image(
                client,
                folder,
                tag=tag,
                labels={},
                buildargs={"BASE_IMAGE": base["id"]},
                on_line=on_line,
            ),
            reused_event="runner_image.reused",
            building_event="runner_image.building",
            base=base["id"],
        )
        latest = f"{options.repository}:latest"
        docker_adapter.tag_image(client, runner.image_id, latest)
    return {
        "schema": REPORT_SCHEMA,
        "image_id": runner.image_id,
        "tag": tag,
        "tags": [tag, latest],
        "reused": runner.reused,
        "base_image": base,
        "recipe": str(options.recipe),
    }
