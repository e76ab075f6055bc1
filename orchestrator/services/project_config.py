"""The project's own configuration (``[tool.orchestrator]``) and its default image.

The table is read from ``pyproject.toml`` at the **base** revision, pinned: the patch is
the change under judgement and may come from anyone, so what it says about the command,
the image, the environment or the timeout is never used (a pull request cannot switch its
own tests off). The parsing is pure (:mod:`orchestrator.core.project_config`).

Without ``--image`` or ``image =``, a replay runs in the newest project image ``orchestrator
image build`` made for the project (found by its ``orchestrator.project`` label, the name
``pyproject.toml``/``setup.cfg`` give at the base revision) at the replay's base revision
or one of its ancestors (its ``orchestrator.revision`` label, checked with git), else in
the runner image. An image built at a pull request's revision, whose packages that
revision's files chose, is never another replay's default; nor is one without the label.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.adapters import git as git_adapter
from orchestrator.core import project_config as core
from orchestrator.core.project_image import (
    LABEL_PROJECT,
    LABEL_PROJECT_IMAGE,
    LABEL_REVISION,
    read_metadata,
)
from orchestrator.core.runner_image import RUNNER_LATEST
from orchestrator.errors import GitError, InputError
from orchestrator.log import get_logger

log = get_logger(__name__)

METADATA_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True, kw_only=True)
class LoadedConfig:
    config: core.ProjectConfig
    rev: str | None  # the full SHA it was read at (None: nothing to read)
    project: str | None  # the project's name, for its image


def _text(data: bytes | None, path: str, rev: str) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text at {rev[:12]}") from None


def read_metadata_files(repo: Path, sha: str) -> dict[str, bytes | None]:
    """:data:`METADATA_FILES` at ``sha``: only regular files (a symbolic link is absent,
    logged, as in the import roots: its text is no configuration), each under the read
    cap (over it: exit 2 naming it, never read whole)."""
    files, others = git_adapter.read_regular_files(repo, sha, METADATA_FILES)
    for name, mode in sorted(others.items()):
        log.warning("tree.file_refused", path=name, rev=sha, why=f"{name}: mode {mode}")
    return files


def load_config(repo: Path, rev: str) -> LoadedConfig:
    """``[tool.orchestrator]`` and the project's name at ``rev`` (pinned here)."""
    try:
        sha = git_adapter.resolve_rev(repo, rev)
    except (InputError, GitError):
        # No repository or no such revision: the command's own checks say so, in their
        # order (a usage mistake first); there is no configuration to read.
        return LoadedConfig(config=core.ProjectConfig(), rev=None, project=None)
    blobs = read_metadata_files(repo, sha)
    texts = {path: _text(blobs[path], path, sha) for path in METADATA_FILES}
    try:
        config = core.parse_config(texts["pyproject.toml"])
    except InputError as error:  # say which revision's file it was
        raise InputError(f"{error} (at {rev} = {sha[:12]})") from None
    try:
        name = read_metadata(
            pyproject=texts["pyproject.toml"],
            setup_cfg=texts["setup.cfg"],
            setup_py=texts["setup.py"],
        ).name
    except InputError:
        name = None  # metadata only names the project image; the table was fine
    if config.keys():
        log.info("config.read", rev=sha, keys=list(config.keys()))
    return LoadedConfig(config=config, rev=sha, project=name)


def default_image(
    env: Mapping[str, str],
    project: str | None,
    url: str | None = None,
    *,
    repo: Path | None = None,
    base: str | None = None,
) -> str:
    """The newest project image made for ``project`` at ``base`` (the replay's pinned base
    revision, a full SHA) or an ancestor of it in ``repo``, else the runner image."""
    if project is None or repo is None or base is None:
        return RUNNER_LATEST
    from packaging.utils import canonicalize_name

    from orchestrator.services.sides.pool import open_backend

    with open_backend(env, url=url) as backend:
        images = backend.images_labelled(f"{LABEL_PROJECT_IMAGE}=1")
    wanted = canonicalize_name(project)
    for pin in images:  # newest first
        named = pin.labels.get(LABEL_PROJECT) or ""
        if not named or canonicalize_name(named) != wanted:
            continue
        ref = pin.tags[0] if pin.tags else pin.id
        why = _not_for_base(repo, base, pin.labels.get(LABEL_REVISION))
        if why is not None:
            log.info("config.project_image_skipped", image=ref, id=pin.id, reason=why)
            continue
        log.info("config.project_image", project=project, image=ref, id=pin.id)
        return ref
    return RUNNER_LATEST


def _not_for_base(repo: Path, base: str, revision: str | None) -> str | None:
    """Why an image built at ``revision`` is not the default of a replay of ``base``."""
    if not revision:
        return "no orchestrator.revision label: built before images recorded their revision"
    if not _FULL_SHA.fullmatch(revision):
        return f"its orchestrator.revision label is not a commit SHA ({revision[:80]!r})"
    if not git_adapter.is_ancestor(repo, revision, base):
        return (
            f"built at {revision[:12]}, which is not the base {base[:12]} or an ancestor "
            "of it (a pull request's packages are never another replay's default)"
        )
    return None
