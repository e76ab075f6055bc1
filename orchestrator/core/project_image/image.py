"""The project image itself: its Dockerfile, labels, tag and report. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from orchestrator.core.digest import digest
from orchestrator.core.replay_env import LABEL_PYTHON  # read by replays (replay_env)

if TYPE_CHECKING:  # the labels are read without the requirement parser
    from orchestrator.core.project_image.requirements import Requirements
    from orchestrator.core.project_image.wheelhouse import Wheel

REPORT_SCHEMA = "project-image/1"
INPUTS_SCHEMA = "project-image-inputs/1"
IMAGE_REPOSITORY = "orchestrator-project"

VENV = "/opt/orchestrator-venv"
VENV_PYTHON = f"{VENV}/bin/python"
WHEELS_DIR = "wheels"  # in the build context

# Labels on a project image (and the build stage that installs the wheels).
LABEL_PROJECT_IMAGE = "orchestrator.project-image"  # "1": how doctor finds project images
LABEL_PROJECT = "orchestrator.project"
LABEL_VENV = "orchestrator.venv"
LABEL_PACKAGES = "orchestrator.packages"  # "name==version ..." sorted
LABEL_EXCLUDED = "orchestrator.excluded"  # wheels of the project itself, left out
LABEL_APT = "orchestrator.apt"
LABEL_BASE = "orchestrator.base-image"
LABEL_INPUTS = "orchestrator.inputs"  # the inputs digest the tag abbreviates
LABEL_STAGE = "orchestrator.project-stage"  # the install stage, pruned after the build
# The revision whose files chose the packages: a replay takes the image as its default only
# when this is its base revision or an ancestor of it (never a pull request's build).
LABEL_REVISION = "orchestrator.revision"


def dockerfile(*, base_image_id: str, add_user: bool) -> str:
    """Two stages: the first installs the wheelhouse into a venv with no index (the build
    has no network), the second copies only the venv, so no wheel stays in a layer.

    ``add_user``: a Debian base made for ``--apt`` gets the runner user (uid 1000) that
    images/runner/Dockerfile adds to the shared base.
    """
    user = (
        "RUN useradd --create-home --uid 1000 --user-group --shell /bin/sh runner\n"
        if add_user
        else ""
    )
    return (
        "# A project's runner image: its test dependencies in a virtual environment.\n"
        f"FROM {base_image_id} AS install\n"
        "USER root\n"
        "ARG STAGE\n"
        f"LABEL {LABEL_STAGE}=$STAGE\n"
        f"COPY {WHEELS_DIR}/ /tmp/wheels/\n"
        f"RUN python3 -m venv {VENV} \\\n"
        f" && {VENV_PYTHON} -m pip install --no-index --no-deps --no-cache-dir \\\n"
        "      --disable-pip-version-check --find-links /tmp/wheels /tmp/wheels/*.whl\n"
        f"FROM {base_image_id}\n"
        "USER root\n"
        f"{user}"
        f"COPY --from=install {VENV} {VENV}\n"
        f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH\n"
        "USER 1000\n"
    )


def image_labels(
    *,
    project: str | None,
    wheels: Sequence[Wheel],
    excluded: Sequence[Wheel],
    apt: Sequence[str],
    base_image_id: str,
    revision: str,
) -> dict[str, str]:
    """The labels of a project image (the inputs digest is added once it is known). The
    revision is one of them, so it is in the digest: a build at another revision makes
    its own image, which says which revision chose its packages."""
    return {
        LABEL_REVISION: revision,
        LABEL_PROJECT_IMAGE: "1",
        LABEL_PROJECT: project or "",
        LABEL_PYTHON: VENV_PYTHON,
        LABEL_VENV: VENV,
        LABEL_PACKAGES: " ".join(sorted(item.pin for item in wheels)),
        LABEL_EXCLUDED: " ".join(sorted(item.pin for item in excluded)),
        LABEL_APT: " ".join(apt),
        LABEL_BASE: base_image_id,
    }


def inputs_digest(
    *,
    base_image_id: str,
    wheels: Sequence[Wheel],
    apt: Sequence[str],
    dockerfile_text: str,
    labels: Mapping[str, str],
) -> str:
    """``sha256:…`` of everything the image is made of."""
    return digest(
        {
            "schema": INPUTS_SCHEMA,
            "base_image": base_image_id,
            "wheels": sorted([item.filename, item.sha256] for item in wheels),
            "apt": sorted(apt),
            "dockerfile": dockerfile_text,
            "labels": dict(labels),
        }
    )


def image_tag(project: str | None, inputs: str) -> str:
    """``orchestrator-project/<name>:<16 hex of the inputs digest>``."""
    name = canonicalize_name(project) if project else "unnamed"
    slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unnamed"
    return f"{IMAGE_REPOSITORY}/{slug}:{inputs.removeprefix('sha256:')[:16]}"


def packages_from_label(value: str | None) -> tuple[str, ...]:
    return tuple((value or "").split())


def report_document(  # noqa: PLR0913 - one keyword per field of the document
    *,
    image_id: str,
    tag: str,
    reused: bool,
    project: str | None,
    rev: str,
    base_ref: str,
    base_image_id: str,
    python: str,
    wheels: Sequence[Wheel],
    excluded: Sequence[Wheel],
    apt: Sequence[str],
    requirements: Requirements,
    inputs: str,
    notes: Sequence[str],
    build: Mapping[str, Any],
) -> dict[str, Any]:
    """The ``project-image/1`` document ``image build --json`` prints. ``build``: where the
    build container's pip downloaded from (network, index options, no passwords)."""
    return {
        "schema": REPORT_SCHEMA,
        "image_id": image_id,
        "tag": tag,
        "reused": reused,
        "project": project,
        "rev": rev,
        "base_image": {"ref": base_ref, "id": base_image_id},
        "python": python,
        "interpreter": VENV_PYTHON,
        "venv": VENV,
        "packages": [item.to_json() for item in wheels],
        "excluded": [item.to_json() for item in excluded],
        "apt": list(apt),
        "requirements": list(requirements.lines),
        "constraints": list(requirements.constraints),
        "inputs_digest": inputs,
        "notes": list(notes),
        "build": dict(build),
    }
