"""``orchestrator image build``: a runner image for a project, its test dependencies in a
virtual environment, built offline from a wheelhouse a confined container downloads."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from orchestrator.commands._command_options import (
    ImageBuildAsJsonOption,
    ImageRunnerAsJsonOption,
    ImageRunnerBaseImageOption,
)
from orchestrator.commands._grouped import grouped
from orchestrator.commands._image_groups import ImageInputs, ImageSource, PackageIndex

image_app = typer.Typer(
    name="image",
    help="The runner image, and images for projects with dependencies.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@image_app.command("build")
@grouped
def build(
    *,
    source: ImageSource,
    inputs: ImageInputs,
    index: PackageIndex,
    as_json: ImageBuildAsJsonOption = False,
) -> None:
    """Build (or reuse) a runner image for the project at --repo; print its image ID.

    Python packages go into a virtual environment in the image (/opt/orchestrator-venv),
    whose python then runs the probe: the project's runtime dependencies, --extra,
    --group, --requirements and --pip, with pytest at the version they ask for. The
    project itself is never installed, not even as another package's dependency: each
    side's tree is what is tested.

    Nothing of the tree or of an index runs on this machine: pip resolves and downloads
    in a build container of the image's own base (non-root, no capabilities, read-only
    root, none of this machine's environment, no network unless --network names one;
    sdists become wheels there), and the image build installs the wheels with no
    network. The files read at --rev are read through git: paths inside the repository
    only, never a symbolic link. Where pip downloads from is the operator's choice only
    (--index-url, --extra-index-url, --find-links, --no-index, --trusted-host, --cert, or
    the same PIP_* variables): such lines in the tree's requirement files are left out, with
    a note.

    The tag (orchestrator-project/<name>:<digest>) digests everything that went in,
    the revision too: a second build with the same inputs reuses the image. Its labels
    list the pinned packages and the revision. Replay with `orchestrator replay --image
    <ID>`, or with no --image: a replay picks the newest image of the project built at
    its base revision or an ancestor of it (never one built at a pull request's).

    Defaults come from [tool.orchestrator.image-build] in pyproject.toml at --rev
    (requirements, extras, groups, pip, apt, python-image); an option given here replaces
    that key.
    """
    from orchestrator.commands._output import echo_json
    from orchestrator.log import get_logger
    from orchestrator.services.engine_client import engine_client
    from orchestrator.services.image import build_image, plan_image

    logger = get_logger("orchestrator.image")
    options = inputs.options(source, index)
    # Every usage mistake is found here, before any container.
    plan = plan_image(options, cwd=Path.cwd(), env=os.environ)
    planned = (*plan.requirements.notes, *plan.index.notes)
    for note in planned:
        logger.info("image.note", note=note)
    with engine_client(os.environ) as client:
        report = build_image(
            plan, client=client, on_line=lambda line: logger.debug("image.build", line=line)
        )
    for note in report["notes"][len(planned) :]:
        logger.info("image.note", note=note)
    logger.info(
        "image.done",
        tag=report["tag"],
        reused=report["reused"],
        packages=len(report["packages"]),
    )
    if as_json:
        echo_json(report)
    else:
        typer.echo(report["image_id"])


@image_app.command("runner")
def runner(
    *,
    base_image: ImageRunnerBaseImageOption = None,
    as_json: ImageRunnerAsJsonOption = False,
) -> None:
    """Build (or reuse) the runner image, orchestrator-runner:latest; print its image ID.

    The recipe ships inside the package, so no checkout is needed. The base
    (orchestrator-base) is made offline with mmdebstrap from this machine's apt sources
    and `docker import` (needs root, mmdebstrap and the docker command); the runner adds
    a user on it with the engine's classic builder, with no network. Each image is tagged
    by a digest of its recipe (orchestrator-runner:ctx-<12 hex>): when that tag exists
    nothing is built.
    """
    from orchestrator.commands._output import echo_json
    from orchestrator.log import get_logger
    from orchestrator.services.engine_client import engine_client
    from orchestrator.services.runner_image import RunnerImageOptions, build_runner_image

    logger = get_logger("orchestrator.image")
    with engine_client(os.environ) as client:
        report = build_runner_image(
            client,
            RunnerImageOptions(base_image=base_image),
            env=os.environ,
            on_line=lambda line: logger.info("runner_image.build", line=line),
        )
    if as_json:
        echo_json(report)
    else:
        typer.echo(report["image_id"])


def register(app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")
