"""The runner image's recipe as files: the checkout's top-level ``images/`` (shipped inside
the wheel as ``orchestrator/images/``, ``[tool.hatch.build.targets.wheel.force-include]``),
its files read for the context digest (by their names relative to the recipe, so where it
lies does not change a tag), and the base recipe's script run (mmdebstrap from this
machine's apt sources, then ``docker import``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from orchestrator.errors import InfrastructureError, InputError

_PACKAGE = Path(__file__).resolve().parent.parent
# An installed wheel carries the recipe in the package; a checkout (or an editable
# install of it) has it at its top.
RECIPE_DIR = next(
    (folder for folder in (_PACKAGE / "images", _PACKAGE.parent / "images") if folder.is_dir()),
    _PACKAGE.parent / "images",
)
BASE_SCRIPT = "build"  # in RECIPE_DIR/base


def context_files(folder: Path) -> list[tuple[str, bytes]]:
    """(relative path, content) of every file below ``folder``."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such recipe folder")
    return [
        (path.relative_to(folder).as_posix(), path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    ]


def run_base_build(
    folder: Path,
    tag: str,
    *,
    env: Mapping[str, str],
    on_line: Callable[[str], None] | None = None,
) -> None:
    """Run the base recipe (``bash base/build TAG``): it needs root, mmdebstrap and the
    docker command. Its progress lines go to ``on_line``; a failure names its last line."""
    script = folder / BASE_SCRIPT
    process = subprocess.Popen(
        ["bash", str(script), tag],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(env),
    )
    lines: list[str] = []
    assert process.stdout is not None
    with process.stdout:
        for raw in process.stdout:
            line = raw.rstrip()
            if line:
                lines.append(line)
                if on_line is not None:
                    on_line(line)
    status = process.wait()
    if status != 0:
        detail = lines[-1] if lines else f"exit {status}"
        raise InfrastructureError(f"building the base image {tag} failed: {detail}")
