"""``orchestrator doctor``: is everything a replay needs here? One line per part."""

from __future__ import annotations

import os

import typer

from orchestrator.commands._command_options import (
    DoctorAsJsonOption,
)
from orchestrator.commands._options import RUNNER_IMAGE, ImageOption


def doctor(
    as_json: DoctorAsJsonOption = False,
    image: ImageOption = RUNNER_IMAGE,
) -> None:
    """Check the engine, the runner image, git and Python: one line each; then one line
    per project image (`orchestrator image build`) on the engine.

    Prints the Docker engine's server version and storage driver, the runner image's ID,
    and the git and Python versions. Exit 0 when all are there, 3 naming the first that
    is not (one line on stderr).

    The engine is the one at DOCKER_HOST, or the default local socket. A missing part's
    line says what to run: `orchestrator image runner` builds the runner image (in a
    checkout, `make engine` starts an engine and `make image` builds the image).
    """
    from orchestrator.commands._output import echo_json
    from orchestrator.services.doctor import (
        check_engine_and_image,
        check_git,
        check_python,
        first_failure,
        project_image_line,
    )

    found: list[dict[str, object]] = []
    engine_check, image_check = check_engine_and_image(os.environ, image, found)
    checks = (engine_check, image_check, check_git(), check_python())
    if as_json:
        doc = {
            "schema": "doctor/1",
            "ok": all(c.ok for c in checks),
            "checks": [c.to_json() for c in checks],
            "project_images": found,
        }
        echo_json(doc)
    else:
        for check in checks:
            typer.echo(check.line())
        for project_image in found:
            typer.echo(project_image_line(project_image))
    failure = first_failure(checks)
    if failure is not None:
        raise failure


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
