"""Images: pin one by ID (never pulling), find the ones we labelled, ship one to another
engine, and build, import and tag the ones we make."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.adapters.docker._sdk import docker, failure_reason, failures, translated
from orchestrator.core.backend import Shipped
from orchestrator.errors import EngineError, ImageBuildError, ImageNotFoundError, one_line
from orchestrator.log import get_logger

log = get_logger(__name__)


@dataclass(frozen=True, kw_only=True)
class ImagePin:
    """An image as the engine holds it: what a replay records instead of a mutable tag."""

    id: str  # "sha256:..."
    repo_digests: tuple[str, ...]
    tags: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)


def resolve_image(client: docker.DockerClient, ref: str) -> ImagePin:
    """Pin ``ref`` (a tag or an ID) to the local image's ID. Never pulls."""
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        raise ImageNotFoundError(
            f"image {ref} is not present on the engine (the tool never pulls); build it: "
            "`orchestrator image runner` makes the runner image, `orchestrator image build` "
            "a project's"
        ) from None
    except failures() as error:
        raise EngineError(
            failure_reason(client, error), f"image {ref} cannot be inspected: {one_line(error)}"
        ) from None
    return _pin(image)


def _pin(image: Any) -> ImagePin:
    config = image.attrs.get("Config") or {}
    return ImagePin(
        id=str(image.id),
        repo_digests=tuple(sorted(image.attrs.get("RepoDigests") or ())),
        tags=tuple(sorted(image.tags)),
        labels=dict(config.get("Labels") or {}),
    )


def find_image(client: docker.DockerClient, ref: str) -> ImagePin | None:
    """The local image ``ref`` names, or None when there is none. Never pulls."""
    try:
        return resolve_image(client, ref)
    except ImageNotFoundError:
        return None


def images_labelled(client: docker.DockerClient, label: str) -> list[ImagePin]:
    """Local images carrying ``label`` (``key`` or ``key=value``), newest first."""
    with translated(client):
        images = client.images.list(filters={"label": label})
    images.sort(key=lambda image: str(image.attrs.get("Created", "")), reverse=True)
    return [_pin(image) for image in images]


@dataclass(frozen=True, kw_only=True)
class ImageState:
    """Whether an engine may run a pinned image: it holds the ID (``present``), it holds
    nothing under the reference (``absent``: ship it), or the reference names another
    image there (``other_id``: that engine is refused)."""

    present: bool
    other_id: str | None = None

    @property
    def refused(self) -> bool:
        return self.other_id is not None


def is_image_id(ref: str) -> bool:
    """``sha256:<64 hex>`` names content; anything else is a tag that may move. Pure."""
    return ref.startswith("sha256:") and len(ref) == 71


def image_state(client: docker.DockerClient, image_id: str, ref: str) -> ImageState:
    """Does this engine hold ``image_id``, and does ``ref`` (a tag) name it there too?"""

    def find(name: str) -> str | None:
        try:
            return str(client.images.get(name).id)
        except docker.errors.ImageNotFound:
            return None

    with translated(client):
        held = find(image_id) is not None
        tagged = None if is_image_id(ref) else find(ref)
    if tagged is not None and tagged != image_id:
        return ImageState(present=held, other_id=tagged)
    return ImageState(present=held)


def ship_image(
    source: docker.DockerClient, target: docker.DockerClient, image_id: str, *, tag: str | None
) -> Shipped:
    """Copy ``image_id`` from ``source`` to ``target``: ``save`` streamed into ``load``
    (no file in between, never a registry), then the ID checked on ``target``. ``tag``
    (the run's image reference, when it is a tag) is set on ``target`` when it names
    nothing there yet, so both engines read the same name the same way."""
    started = time.monotonic()
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        for chunk in source.api.get_image(image_id):
            sent += len(chunk)
            yield chunk

    with translated(target):
        for line in target.api.load_image(chunks()) or ():  # type: ignore[no-untyped-call]
            if isinstance(line, Mapping) and line.get("error"):
                raise EngineError("docker_api", f"loading {image_id}: {line['error']}")
        try:
            loaded = target.images.get(image_id)
        except docker.errors.ImageNotFound:
            raise EngineError(
                "docker_api", f"{image_id} is not on the engine after loading it"
            ) from None
        if str(loaded.id) != image_id:  # content-addressed: another ID is another image
            raise EngineError("docker_api", f"loaded {loaded.id}, expected {image_id}")
        if tag is not None and not is_image_id(tag):
            with contextlib.suppress(docker.errors.ImageNotFound):
                target.images.get(tag)
                tag = None  # already names something there (checked before shipping)
            if tag is not None:
                repository, _, version = tag.rpartition(":")
                if not repository or "/" in version:
                    repository, version = tag, "latest"
                loaded.tag(repository, version)
    return Shipped(image_id=image_id, bytes=sent, seconds=time.monotonic() - started)


BUILD_TIMEOUT_S = 3600  # one build step may install wheels for minutes without output


def build_image(
    client: docker.DockerClient,
    context: Path,
    *,
    tag: str,
    labels: Mapping[str, str],
    buildargs: Mapping[str, str],
    on_line: Callable[[str], None] | None = None,
) -> str:
    """Build ``context`` (its ``Dockerfile``) with the engine's classic builder, with no
    network and never pulling (the ``FROM`` lines name local image IDs); tag it and return
    its image ID. A step that fails is an :class:`ImageBuildError` with the build's last
    lines; the engine failing is an :class:`EngineError`.
    """
    lines: list[str] = []
    with translated(client):
        stream = client.api.build(
            path=str(context),
            tag=tag,
            labels=dict(labels),
            buildargs=dict(buildargs),
            network_mode="none",
            pull=False,
            rm=True,
            forcerm=True,
            decode=True,
            timeout=BUILD_TIMEOUT_S,
            use_config_proxy=False,
        )
        for chunk in stream:
            text = chunk.get("stream") or chunk.get("status") or ""
            for line in str(text).splitlines():
                if line.strip():
                    lines.append(line.rstrip())
                    if on_line is not None:
                        on_line(line.rstrip())
            error = chunk.get("error")
            if error:
                tail = " | ".join(lines[-6:])
                raise ImageBuildError(f"the image build failed: {_first_line(error)}; {tail}")
        pin = resolve_image(client, tag)
    return pin.id


def _first_line(text: Any) -> str:
    lines = str(text).strip().splitlines()
    return lines[0] if lines else "no detail"


def prune_stage(client: docker.DockerClient, label: str, value: str) -> None:
    """Remove the dangling images of one build's install stage (``label=value``); they
    only held the wheelhouse. A failure is logged: at worst an unused image stays."""
    try:
        client.images.prune(filters={"dangling": True, "label": f"{label}={value}"})
    except failures() as error:
        log.warning("image.prune_failed", label=f"{label}={value}", error=one_line(error))


def import_rootfs(
    client: docker.DockerClient, tarball: Path, *, tag: str, changes: Sequence[str]
) -> str:
    """``docker import`` through the SDK: a root file system tarball as an image."""
    repository, _, name = tag.rpartition(":")
    with translated(client):
        client.api.import_image_from_file(
            str(tarball), repository=repository, tag=name, changes=list(changes)
        )
        return resolve_image(client, tag).id


def tag_image(client: docker.DockerClient, image_id: str, tag: str) -> None:
    """Point ``tag`` (``repository:name``) at ``image_id`` (moved from another image)."""
    repository, _, name = tag.rpartition(":")
    with translated(client):
        client.api.tag(image_id, repository, name, force=True)
