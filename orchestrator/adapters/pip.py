"""pip on the host, thin: fill a wheelhouse for a project image.

The host's own pip does the downloading, with the host's own configuration (``pip.conf``,
``PIP_*`` variables: its index, its mirrors, ``--no-index --find-links`` for a local
wheelhouse), so the image build itself never needs a network. ``pip download`` fetches
what the requirements resolve to; an sdist among them becomes a wheel with ``pip wheel``
(on the host, whose Python must then match the image's, see
:func:`orchestrator.core.project_image.pip_target_args`).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from orchestrator.errors import InfrastructureError, InputError
from orchestrator.log import get_logger

log = get_logger(__name__)

# pip's words for a requirement that cannot be met: the input's fault, not the machine's.
_UNSATISFIABLE = (
    "No matching distribution found",
    "Could not find a version that satisfies",
    "ResolutionImpossible",
    "conflicting dependencies",
    "Invalid requirement",
)


def host_python() -> str:
    """The version of the interpreter whose pip fills the wheelhouse."""
    return ".".join(str(part) for part in sys.version_info[:3])


def _pip(args: Sequence[str], env: Mapping[str, str], what: str) -> str:
    command = [sys.executable, "-m", "pip", *args]
    log.info("pip.run", command=" ".join(command[3:]))
    completed = subprocess.run(
        command,
        env={**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_PROGRESS_BAR": "off"},
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode == 0:
        return completed.stdout
    output = (completed.stderr + "\n" + completed.stdout).strip()
    errors = [line.strip() for line in output.splitlines() if line.strip().startswith("ERROR:")]
    detail = errors[0] if errors else (output.splitlines() or ["no output"])[-1]
    if any(words in output for words in _UNSATISFIABLE):
        raise InputError(f"{what}: {detail}")
    raise InfrastructureError(f"{what} failed: {detail}")


def download(
    requirements: Path,
    dest: Path,
    *,
    constraints: Path | None,
    extra_args: Sequence[str],
    env: Mapping[str, str],
) -> None:
    """``pip download`` everything ``requirements`` resolves to into ``dest``."""
    args = ["download", "--dest", str(dest), "--requirement", str(requirements)]
    if constraints is not None:
        args += ["--constraint", str(constraints)]
    _pip([*args, *extra_args], env, "pip download")


def build_wheels(sdists: Sequence[Path], dest: Path, *, env: Mapping[str, str]) -> None:
    """``pip wheel`` each sdist (its dependencies are downloaded already) into ``dest``."""
    if sdists:
        _pip(
            ["wheel", "--no-deps", "--wheel-dir", str(dest), *(str(path) for path in sdists)],
            env,
            "pip wheel",
        )
