"""Build (or reuse) a project's runner image: plan, download, build.

``plan_image`` pins the revision and reads, at it, the project's metadata and the
requirement files through git (never the working checkout: a file that is a symbolic
link in the tree is refused), and decides with the pure core
(:mod:`orchestrator.core.project_image`) what pip should resolve and from where (the
operator's index options only); every usage mistake is found there, before any container
runs or anything is downloaded. ``build_image`` then picks the base image
(``--python-image``, the runner image, or a Debian base with ``--apt`` made offline by
mmdebstrap), resolves and downloads the wheels in a confined container of that base
(:mod:`orchestrator.services.image_wheels`: nothing of the tree or of an index runs on
the host), leaves the project's own wheels out, and builds the image with no network
(:func:`orchestrator.adapters.docker.build_image`) unless an image with the same inputs
digest is there already. The image's labels record the revision whose files chose its
packages. Scratch folders are always removed.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import interrupts
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.input_file import read_input
from orchestrator.core import project_image as core
from orchestrator.core.replay_env import LABEL_PYTHON
from orchestrator.errors import InputError
from orchestrator.log import get_logger
from orchestrator.services.image_reuse import build_lock, reuse_or_build

if TYPE_CHECKING:
    from docker import DockerClient

log = get_logger(__name__)

RUNNER_IMAGE = "orchestrator-runner:latest"
METADATA_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
SYMLINK_MODE = "120000"


@dataclass(frozen=True, kw_only=True)
class ImageOptions:
    """The command line, as values."""

    repo: Path
    rev: str = "HEAD"
    requirements: tuple[str, ...] = ()  # the operator's --requirements (may be on disk)
    tree_requirements: tuple[str, ...] = ()  # the tree's table: repository paths only
    extras: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    apt: tuple[str, ...] = ()
    python_image: str | None = None
    suite: str = core.DEFAULT_SUITE
    index: core.GivenIndex = field(default_factory=core.GivenIndex)  # the command line's


@dataclass(frozen=True, kw_only=True)
class ImagePlan:
    """What the image is made of, decided before anything is downloaded or built."""

    options: ImageOptions
    repo: Path
    rev: str  # full SHA
    metadata: core.ProjectMetadata
    requirements: core.Requirements
    apt: tuple[str, ...]
    index: core.IndexOptions  # the operator's: the command line over their PIP_* variables


@dataclass(frozen=True, kw_only=True)
class BaseImage:
    ref: str
    id: str
    add_user: bool  # a Debian base made for --apt has no runner user yet


# ---------------------------------------------------------------- plan


def _text(data: bytes, shown: str, rev: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{shown}: not UTF-8 text at {rev[:12]}") from None


def _file_reader(repo: Path, rev: str) -> Callable[[core.FileRef], str | None]:
    """Text of a requirement file: a repository path read through git at ``rev`` (a
    symbolic link there is refused: its target would be taken for the file), or the
    operator's own file on disk (a regular file, bounded, no link followed)."""

    def read(ref: core.FileRef) -> str | None:
        if ref.folder is not None:
            path = Path(ref.folder) / ref.path
            if not path.exists() and not path.is_symlink():
                return None
            return _text(read_input(path), ref.shown, rev)
        return _tree_texts(repo, rev, [ref.path])[ref.path]

    return read


def _tree_texts(repo: Path, rev: str, paths: list[str]) -> dict[str, str | None]:
    """Files of the tree at ``rev`` (None: absent, a folder or a submodule); a symbolic
    link is an :class:`InputError`."""
    for path, mode in git_adapter.tree_modes(repo, rev, paths).items():
        if mode == SYMLINK_MODE:
            raise InputError(
                f"{path} is a symbolic link at {rev[:12]}: files the tree names are read as "
                "regular files of the repository only"
            )
    blobs = git_adapter.read_blobs(repo, rev, paths)
    return {path: None if data is None else _text(data, path, rev) for path, data in blobs.items()}


def plan_image(options: ImageOptions, *, cwd: Path, env: Mapping[str, str]) -> ImagePlan:
    """Pin the revision, read the project at it, decide what pip resolves and from where
    (``env``: the operator's ``PIP_*`` defaults). Nothing runs."""
    if options.apt and options.python_image is not None:
        raise InputError("--apt builds its own Debian base: it cannot go with --python-image")
    apt = core.check_apt(options.apt)
    repo = options.repo.resolve()  # the operator's path; nothing inside it is resolved
    rev = git_adapter.resolve_rev(repo, options.rev)
    index = core.index_options(options.index, env, cwd=str(cwd))
    for folder in index.local_links:
        if not Path(folder).is_dir():
            raise InputError(f"--find-links: {folder} is not a folder")
    if index.cert is not None and not Path(index.cert).is_file():
        raise InputError(f"--cert: {index.cert} is not a file")
    texts = _tree_texts(repo, rev, list(METADATA_FILES))
    metadata = core.read_metadata(
        pyproject=texts["pyproject.toml"], setup_cfg=texts["setup.cfg"], setup_py=texts["setup.py"]
    )
    requirements = core.collect_requirements(
        metadata=metadata,
        requirement_files=[
            core.operator_file(given, repo=str(repo), cwd=str(cwd))
            for given in options.requirements
        ],
        tree_requirement_files=options.tree_requirements,
        extras=options.extras,
        groups=options.groups,
        pip_specs=options.pip,
        read=_file_reader(repo, rev),
    )
    return ImagePlan(
        options=options,
        repo=repo,
        rev=rev,
        metadata=metadata,
        requirements=requirements,
        apt=apt,
        index=index,
    )


# ---------------------------------------------------------------- execute


@contextlib.contextmanager
def _scratch(purpose: str) -> Iterator[Path]:
    with contextlib.ExitStack() as stack:
        with interrupts.shielded():  # made and registered for removal as one step
            folder = git_adapter.make_scratch(purpose)
            stack.callback(git_adapter.remove_scratch, folder)
        yield folder


def _lock_name(key: str) -> str:
    """One lock per inputs digest: builds of other inputs go on side by side."""
    return key[:16]


def _base_image(plan: ImagePlan, client: DockerClient) -> BaseImage:
    from orchestrator.adapters import docker as docker_adapter

    if not plan.apt:
        ref = plan.options.python_image or RUNNER_IMAGE
        pin = docker_adapter.resolve_image(client, ref)  # ImageNotFoundError: never pulled
        return BaseImage(ref=ref, id=pin.id, add_user=False)
    from orchestrator.adapters import debian

    suite = plan.options.suite
    includes = core.apt_includes(plan.apt)
    sources = core.apt_sources(debian.host_source_files(), suite)
    tag = core.apt_base_tag(suite=suite, includes=includes, sources=sources)

    def build() -> str:
        with _scratch("apt") as folder:
            tarball = folder / "rootfs.tar"
            debian.build_rootfs(suite=suite, includes=includes, sources=sources, tarball=tarball)
            return docker_adapter.import_rootfs(
                client, tarball, tag=tag, changes=debian.IMPORT_CHANGES
            )

    with build_lock(_lock_name(hashlib.sha256(tag.encode()).hexdigest())):
        made = reuse_or_build(
            client,
            tag,
            build=build,
            reused_event="image.apt_base_reused",
            building_event="image.apt_base_building",
            packages=list(plan.apt),
        )
    return BaseImage(ref=tag, id=made.image_id, add_user=True)


def _wheelhouse(
    plan: ImagePlan,
    client: DockerClient,
    base: BaseImage,
    wheels_dir: Path,
    on_line: Callable[[str], None] | None,
) -> tuple[str, tuple[core.Wheel, ...], tuple[core.Wheel, ...], tuple[str, ...]]:
    """(the base's Python, kept wheels, excluded wheels, notes): the wheels made in the
    build container, the project's own deleted from ``wheels_dir``."""
    from orchestrator.services.image_wheels import make_wheels

    made = make_wheels(
        client,
        base_image_id=base.id,
        base_ref=base.ref,
        requirements=plan.requirements,
        index=plan.index,
        project=plan.metadata.canonical_name,
        dest=wheels_dir,
        on_line=on_line,
    )
    wheels = [core.wheel(item.name, item.sha256) for item in made.wheels]
    kept, excluded = core.split_project(wheels, plan.metadata.canonical_name)
    for item in excluded:
        (wheels_dir / item.filename).unlink()
    return made.python, kept, excluded, (*made.notes, *core.excluded_notes(excluded))


def build_image(
    plan: ImagePlan,
    *,
    client: DockerClient,
    on_line: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Make (or reuse) the image; returns the ``project-image/1`` report."""
    from orchestrator.adapters import docker as docker_adapter

    base = _base_image(plan, client)
    log.info("image.base", ref=base.ref, id=base.id)
    with _scratch("image") as work:
        context = work / "context"
        wheels_dir = context / core.WHEELS_DIR
        wheels_dir.mkdir(parents=True)
        python, kept, excluded, wheel_notes = _wheelhouse(plan, client, base, wheels_dir, on_line)
        log.info("image.python", python=python, wheels=len(kept))
        text = core.dockerfile(base_image_id=base.id, add_user=base.add_user)
        (context / "Dockerfile").write_text(text)
        labels = core.image_labels(
            project=plan.metadata.name,
            wheels=kept,
            excluded=excluded,
            apt=plan.apt,
            base_image_id=base.id,
            revision=plan.rev,
        )
        inputs = core.inputs_digest(
            base_image_id=base.id, wheels=kept, apt=plan.apt, dockerfile_text=text, labels=labels
        )
        tag = core.image_tag(plan.metadata.name, inputs)
        stage = inputs.removeprefix("sha256:")

        def build() -> str:
            try:
                return docker_adapter.build_image(
                    client,
                    context,
                    tag=tag,
                    labels={**labels, core.LABEL_INPUTS: inputs},
                    buildargs={"STAGE": stage},
                    on_line=on_line,
                )
            finally:
                docker_adapter.prune_stage(client, core.LABEL_STAGE, stage)

        with build_lock(_lock_name(stage)):
            made = reuse_or_build(
                client,
                tag,
                build=build,
                reused_event="image.reused",
                building_event="image.building",
                packages=len(kept),
            )
    return core.report_document(
        image_id=made.image_id,
        tag=tag,
        reused=made.reused,
        project=plan.metadata.name,
        rev=plan.rev,
        base_ref=base.ref,
        base_image_id=base.id,
        python=python,
        wheels=kept,
        excluded=excluded,
        apt=plan.apt,
        requirements=plan.requirements,
        inputs=inputs,
        notes=(*plan.requirements.notes, *plan.index.notes, *wheel_notes),
        build=plan.index.to_json(),
    )


def project_images(client: DockerClient) -> list[dict[str, Any]]:
    """The project images on the engine (for ``doctor``): tag, ID, project, packages."""
    from orchestrator.adapters import docker as docker_adapter

    found = []
    for pin in docker_adapter.images_labelled(client, f"{core.LABEL_PROJECT_IMAGE}=1"):
        labels = pin.labels
        found.append(
            {
                "id": pin.id,
                "tags": list(pin.tags),
                "project": labels.get(core.LABEL_PROJECT) or None,
                "packages": list(core.packages_from_label(labels.get(core.LABEL_PACKAGES))),
                "interpreter": labels.get(LABEL_PYTHON),
            }
        )
    return found
