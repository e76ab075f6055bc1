"""``orchestrator image build``: a runner image for a project, its test dependencies in a
virtual environment, built offline from a wheelhouse a confined container downloads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.commands._options import image_reference

image_app = typer.Typer(
    name="image",
    help="The runner image, and images for projects with dependencies.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@image_app.command("build")
def build(  # noqa: PLR0913 - a Typer command's options are its parameters
    *,
    repo: Annotated[Path, typer.Option("--repo", help="The project's git repository.")],
    rev: Annotated[
        str,
        typer.Option(
            "--rev", help="The revision whose pyproject.toml and requirement files are read."
        ),
    ] = "HEAD",
    requirements: Annotated[
        list[str] | None,
        typer.Option(
            "--requirements",
            metavar="FILE",
            help="A pip requirements file (repeatable), read at --rev through git when it "
            "lies in the repository, else from disk (its includes stay in its folder); `-e .` "
            "and the project's own name are left out.",
        ),
    ] = None,
    extras: Annotated[
        list[str] | None,
        typer.Option(
            "--extra",
            metavar="NAME",
            help="An extra of [project.optional-dependencies] (repeatable).",
        ),
    ] = None,
    groups: Annotated[
        list[str] | None,
        typer.Option(
            "--group", metavar="NAME", help="A group of [dependency-groups] (repeatable)."
        ),
    ] = None,
    pip: Annotated[
        list[str] | None,
        typer.Option("--pip", metavar="SPEC", help="One more requirement (repeatable)."),
    ] = None,
    apt: Annotated[
        list[str] | None,
        typer.Option(
            "--apt",
            metavar="PKG",
            help="A Debian package for the base (repeatable): the base is then made offline "
            "with mmdebstrap from this machine's apt sources (needs root).",
        ),
    ] = None,
    python_image: Annotated[
        str | None,
        typer.Option(
            "--python-image",
            metavar="REF",
            parser=image_reference,  # a malformed reference is exit 2, before anything runs
            help="The image to build on: a local image with python3 and ensurepip, never pulled.",
            show_default="orchestrator-runner:latest",
        ),
    ] = None,
    index_url: Annotated[
        str | None,
        typer.Option(
            "--index-url",
            metavar="URL",
            help="The package index (default: $PIP_INDEX_URL, else pip's own).",
        ),
    ] = None,
    extra_index_urls: Annotated[
        list[str] | None,
        typer.Option(
            "--extra-index-url",
            metavar="URL",
            help="Another index (repeatable; default: $PIP_EXTRA_INDEX_URL).",
        ),
    ] = None,
    find_links: Annotated[
        list[str] | None,
        typer.Option(
            "--find-links",
            metavar="DIR|URL",
            help="A folder of wheels, mounted read-only into the build container, or a URL "
            "(repeatable; default: $PIP_FIND_LINKS).",
        ),
    ] = None,
    no_index: Annotated[
        bool | None,
        typer.Option(
            "--no-index/--index",
            help="Use only --find-links (default: $PIP_NO_INDEX; implied with no network).",
            show_default=False,
        ),
    ] = None,
    trusted_hosts: Annotated[
        list[str] | None,
        typer.Option(
            "--trusted-host",
            metavar="HOST",
            help="A host pip may reach without valid HTTPS (repeatable; default: "
            "$PIP_TRUSTED_HOST).",
        ),
    ] = None,
    cert: Annotated[
        Path | None,
        typer.Option(
            "--cert",
            metavar="FILE",
            help="A CA bundle for the index's HTTPS, mounted read-only (default: $PIP_CERT).",
        ),
    ] = None,
    network: Annotated[
        str | None,
        typer.Option(
            "--network",
            metavar="NAME",
            help="The network the build container joins to reach an index: host, or a "
            "network's name (default: $ORCHESTRATOR_IMAGE_NETWORK, else none).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the project-image/1 JSON document.")
    ] = False,
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
    from orchestrator.core.project_config import ImageBuildInputs, image_build_inputs
    from orchestrator.core.project_image import GivenIndex
    from orchestrator.log import get_logger
    from orchestrator.services.engine_client import engine_client
    from orchestrator.services.image import ImageOptions, build_image, plan_image
    from orchestrator.services.project_config import load_config

    logger = get_logger("orchestrator.image")

    def given(values: list[str] | None) -> tuple[str, ...] | None:
        return tuple(values) if values else None

    # [tool.orchestrator.image-build] at --rev; an option given here replaces its key.
    inputs = image_build_inputs(
        load_config(repo, rev).config,
        ImageBuildInputs(
            requirements=given(requirements),
            extras=given(extras),
            groups=given(groups),
            pip=given(pip),
            apt=given(apt),
            python_image=python_image,
        ),
    )
    # The command line's files may lie outside the repository; the table's never do.
    listed = inputs.requirements or ()
    operator_files = bool(requirements)
    options = ImageOptions(
        repo=repo,
        rev=rev,
        requirements=listed if operator_files else (),
        tree_requirements=() if operator_files else listed,
        extras=inputs.extras or (),
        groups=inputs.groups or (),
        pip=inputs.pip or (),
        apt=inputs.apt or (),
        python_image=inputs.python_image,
        # Where pip downloads from: the operator's word (here, or their PIP_* variables).
        index=GivenIndex(
            index_url=index_url,
            extra_index_urls=given(extra_index_urls),
            find_links=given(find_links),
            no_index=no_index,
            trusted_hosts=given(trusted_hosts),
            cert=None if cert is None else str(cert),
            network=network,
        ),
    )
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
    base_image: Annotated[
        str | None,
        typer.Option(
            "--base-image",
            metavar="REF",
            parser=image_reference,
            help="Build on this local image (python3, pytest and useradd; never pulled) "
            "instead of the base made offline from Debian's packages.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the runner-image/1 JSON document.")
    ] = False,
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
