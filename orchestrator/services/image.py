"""Build (or reuse) a project's runner image: plan, download, build.

``plan_image`` pins the revision and reads, at it, the project's metadata and the
requirement files, and decides with the pure core (:mod:`orchestrator.core.project_image`)
what pip should resolve; every usage mistake is found there, before any container runs or
anything is downloaded. ``build_image`` then picks the base image (``--python-image``, or a
Debian base with ``--apt`` made offline by mmdebstrap), asks it for its Python version,
fills a wheelhouse with the host's own pip (:mod:`orchestrator.adapters.pip`), leaves the
project's own wheels out, and builds the image with no network
(:func:`orchestrator.adapters.docker.build_image`) unless an image with the same inputs
digest is there already. Scratch folders are always removed.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import interrupts
from orchestrator.adapters import git as git_adapter
from orchestrator.core import project_image as core
from orchestrator.core.replay_env import LABEL_PYTHON
from orchestrator.errors import InfrastructureError, InputError
from orchestrator.log import get_logger
from orchestrator.services.image_reuse import build_lock, reuse_or_build

if TYPE_CHECKING:
    from docker import DockerClient

log = get_logger(__name__)

RUNNER_IMAGE = "orchestrator-runner:latest"
METADATA_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
PYTHON_CHECK = (
    "python3",
    "-c",
    "import ensurepip, platform; print(platform.python_version())",
)


@dataclass(frozen=True, kw_only=True)
class ImageOptions:
    """The command line, as values."""

    repo: Path
    rev: str = "HEAD"
    requirements: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    apt: tuple[str, ...] = ()
    python_image: str | None = None
    suite: str = core.DEFAULT_SUITE


@dataclass(frozen=True, kw_only=True)
class ImagePlan:
    """What the image is made of, decided before anything is downloaded or built."""

    options: ImageOptions
    repo: Path
    rev: str  # full SHA
    metadata: core.ProjectMetadata
    requirements: core.Requirements
    apt: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class BaseImage:
    ref: str
    id: str
    add_user: bool  # a Debian base made for --apt has no runner user yet


# ---------------------------------------------------------------- plan


def _file_reader(repo: Path, rev: str) -> Callable[[str], str | None]:
    """Text of a file: repository-relative paths at ``rev``, absolute paths from disk."""

    def read(path: str) -> str | None:
        if path.startswith("/"):
            try:
                return Path(path).read_text(encoding="utf-8")
            except FileNotFoundError:
                return None
            except (OSError, UnicodeDecodeError) as error:
                raise InputError(f"{path}: cannot be read ({error})") from None
        data = git_adapter.read_blobs(repo, rev, [path])[path]
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{path}: not UTF-8 text at {rev[:12]}") from None

    return read


def requirement_path(repo: Path, given: str, cwd: Path) -> str:
    """``--requirements FILE`` as the collector reads it: a path in the repository (read
    at ``--rev``) when it lies there, else an absolute path on disk."""
    path = Path(given)
    candidates = [path] if path.is_absolute() else [repo / path, cwd / path]
    for candidate in candidates:
        resolved = candidate.resolve()
        with contextlib.suppress(ValueError):
            return resolved.relative_to(repo).as_posix()
    return str((cwd / path).resolve())


def plan_image(options: ImageOptions, *, cwd: Path) -> ImagePlan:
    """Pin the revision, read the project at it, decide what pip resolves. Nothing runs."""
    if options.apt and options.python_image is not None:
        raise InputError("--apt builds its own Debian base: it cannot go with --python-image")
    apt = core.check_apt(options.apt)
    repo = options.repo.resolve()
    rev = git_adapter.resolve_rev(repo, options.rev)
    read = _file_reader(repo, rev)
    texts = {name: read(name) for name in METADATA_FILES}
    metadata = core.read_metadata(
        pyproject=texts["pyproject.toml"], setup_cfg=texts["setup.cfg"], setup_py=texts["setup.py"]
    )
    requirements = core.collect_requirements(
        metadata=metadata,
        requirement_files=[requirement_path(repo, given, cwd) for given in options.requirements],
        extras=options.extras,
        groups=options.groups,
        pip_specs=options.pip,
        read=read,
    )
    return ImagePlan(
        options=options,
        repo=repo,
        rev=rev,
        metadata=metadata,
        requirements=requirements,
        apt=apt,
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


def image_python(client: DockerClient, base: BaseImage) -> str:
    """The base image's Python version; it must be able to make a venv (ensurepip)."""
    from orchestrator.adapters import docker as docker_adapter

    status, output = docker_adapter.run_command(
        client, base.id, PYTHON_CHECK, purpose="image-python"
    )
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if status != 0 or not lines:
        detail = lines[-1] if lines else f"exit {status}"
        raise InfrastructureError(
            f"{base.ref}: its python3 cannot make a virtual environment ({detail}); "
            "it needs python3 with ensurepip (Debian: python3-venv)"
        )
    return lines[-1]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fill_wheelhouse(
    plan: ImagePlan, wheels_dir: Path, work: Path, *, python: str, env: Mapping[str, str]
) -> tuple[tuple[core.Wheel, ...], tuple[core.Wheel, ...], tuple[str, ...]]:
    """Download (and build) every wheel; (kept, excluded, notes). Excluded wheels (the
    project's own) are deleted from ``wheels_dir``."""
    from orchestrator.adapters import pip as pip_adapter

    requirements_file = work / "requirements.txt"
    requirements_file.write_text(plan.requirements.requirements_text())
    constraints_file = None
    if plan.requirements.constraints:
        constraints_file = work / "constraints.txt"
        constraints_file.write_text(plan.requirements.constraints_text())
    pip_adapter.download(
        requirements_file,
        wheels_dir,
        constraints=constraints_file,
        extra_args=core.pip_target_args(python, pip_adapter.host_python()),
        env=env,
    )
    project = plan.metadata.canonical_name
    notes: list[str] = []
    sdists = []
    for path in sorted(wheels_dir.iterdir()):
        if path.name.endswith(".whl"):
            continue
        if not core.is_sdist(path.name):
            raise InfrastructureError(
                f"pip download left {path.name}: neither a wheel nor an sdist"
            )
        if project is not None and core.sdist_name(path.name) == project:
            notes.append(
                f"left out {path.name}: it is the project under test (another requirement "
                "depends on it); each side's own tree is what is tested"
            )
            path.unlink()
            continue
        sdists.append(path)
    if sdists:
        pip_adapter.build_wheels(sdists, wheels_dir, env=env)
        for path in sdists:
            path.unlink()
    wheels = [core.wheel(path.name, _sha256(path)) for path in sorted(wheels_dir.glob("*.whl"))]
    kept, excluded = core.split_project(wheels, project)
    for item in excluded:
        (wheels_dir / item.filename).unlink()
    notes.extend(core.excluded_notes(excluded))
    return kept, excluded, tuple(notes)


def build_image(
    plan: ImagePlan,
    *,
    client: DockerClient,
    env: Mapping[str, str],
    on_line: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Make (or reuse) the image; returns the ``project-image/1`` report."""
    from orchestrator.adapters import docker as docker_adapter

    base = _base_image(plan, client)
    python = image_python(client, base)
    log.info("image.base", ref=base.ref, id=base.id, python=python)
    with _scratch("image") as work:
        context = work / "context"
        wheels_dir = context / core.WHEELS_DIR
        wheels_dir.mkdir(parents=True)
        kept, excluded, wheel_notes = fill_wheelhouse(
            plan, wheels_dir, work, python=python, env=env
        )
        text = core.dockerfile(base_image_id=base.id, add_user=base.add_user)
        (context / "Dockerfile").write_text(text)
        labels = core.image_labels(
            project=plan.metadata.name,
            wheels=kept,
            excluded=excluded,
            apt=plan.apt,
            base_image_id=base.id,
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
        notes=(*plan.requirements.notes, *wheel_notes),
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
