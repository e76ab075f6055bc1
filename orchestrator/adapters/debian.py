"""Debian's packages on the host, thin: a root file system with chosen packages, made by
mmdebstrap from the apt sources this machine already uses (the offline path of
``images/base/build``: no registry, and no mirror written in the repository).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from orchestrator.errors import InfrastructureError, InputError
from orchestrator.log import get_logger

log = get_logger(__name__)

APT_DIR = Path("/etc/apt")
# What images/base/build leaves out of the root file system.
_DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
)
IMPORT_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["/bin/sh"]',
)


def host_source_files(apt_dir: Path = APT_DIR) -> list[tuple[str, str]]:
    """(path, text) of the host's apt source files: sources.list, *.list, *.sources."""
    paths = [
        apt_dir / "sources.list",
        *sorted((apt_dir / "sources.list.d").glob("*.list")),
        *sorted((apt_dir / "sources.list.d").glob("*.sources")),
    ]
    files = []
    for path in paths:
        try:
            files.append((str(path), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return files


def build_rootfs(
    *, suite: str, includes: Sequence[str], sources: Sequence[str], tarball: Path
) -> None:
    """mmdebstrap ``suite`` with ``includes`` into ``tarball`` (needs root and mmdebstrap)."""
    if shutil.which("mmdebstrap") is None:
        raise InfrastructureError(
            "--apt needs mmdebstrap on this machine (apt-get install mmdebstrap, or run "
            "scripts/ensure-docker as root)"
        )
    if os.geteuid() != 0:
        raise InfrastructureError("--apt builds a Debian base with mmdebstrap, which needs root")
    if not sources:
        raise InfrastructureError(
            f"--apt: no apt source for {suite!r} in /etc/apt/sources.list(.d); add one"
        )
    sources_file = tarball.with_name("sources.list")
    sources_file.write_text("".join(f"{line}\n" for line in sources))
    command = [
        "mmdebstrap",
        "--quiet",
        "--mode=root",
        "--variant=essential",
        f"--include={','.join(includes)}",
        *(f"--dpkgopt={option}" for option in _DPKG_OPTIONS),
        '--customize-hook=rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*',
        suite,
        str(tarball),
        str(sources_file),
    ]
    log.info("apt.mmdebstrap", suite=suite, includes=list(includes))
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        lines = (completed.stderr or completed.stdout).strip().splitlines()
        errors = [line for line in lines if line.startswith(("E:", "mmdebstrap: error"))]
        detail = (errors or lines or ["no output"])[-1]
        if "Unable to locate package" in detail or "has no installation candidate" in detail:
            raise InputError(f"--apt: {detail}")
        raise InfrastructureError(f"mmdebstrap failed for --apt {' '.join(includes)}: {detail}")
