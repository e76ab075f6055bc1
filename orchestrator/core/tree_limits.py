"""How large a tree under test may be, as git says and as it is written; how large a file
of it the host may read. Pure.

Each side's revision is exported into a scratch folder of the host (``/tmp``). A tree
is only as small as its commit says: a compression bomb (gigabytes of zeros that pack
into a few kilobytes of ``.git``) would fill the host's disk on export. So the sizes
``git ls-tree -l`` reports are checked first, against these caps, and a tree over them
is refused as bad input (exit 2) before a byte is written. The export then writes every
file as committed (no ``.gitattributes`` conversion can grow it, ``adapters.tree_export``)
and counts what it writes against the same caps (:func:`write_problem`): the check is
exact, and the written total never passes the cap, also once ``--tests-from`` lays
another revision's files over the tree.

A file the host itself parses (a configuration file, a test module for the oracle, a
requirements file) is read whole, so it has a cap of its own (:data:`READ_VARIABLE`):
over it, exit 2 naming the file and the cap, never the whole blob in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

MIB: Final = 1024 * 1024
GIB: Final = 1024 * MIB
TREE_BYTES: Final = 2 * GIB
TREE_FILES: Final = 200_000
READ_BYTES: Final = 64 * MIB
# The CI owner's knobs (the host's environment is trusted; the tree's is not).
BYTES_VARIABLE: Final = "ORCHESTRATOR_MAX_TREE_BYTES"
FILES_VARIABLE: Final = "ORCHESTRATOR_MAX_TREE_FILES"
READ_VARIABLE: Final = "ORCHESTRATOR_MAX_READ_BYTES"


@dataclass(frozen=True, kw_only=True)
class TreeCaps:
    max_bytes: int = TREE_BYTES
    max_files: int = TREE_FILES
    max_read_bytes: int = READ_BYTES


def tree_caps(env: Mapping[str, str]) -> TreeCaps:
    """The caps, from the defaults or the host's environment; a value that is not a
    positive whole number raises ValueError naming the variable."""
    values = {}
    for name, default in (
        (BYTES_VARIABLE, TREE_BYTES),
        (FILES_VARIABLE, TREE_FILES),
        (READ_VARIABLE, READ_BYTES),
    ):
        text = env.get(name, "").strip()
        if not text:
            values[name] = default
            continue
        if not text.isascii() or not text.isdigit() or int(text) < 1:
            raise ValueError(f"{name} must be a positive whole number, not {text!r}")
        values[name] = int(text)
    return TreeCaps(
        max_bytes=values[BYTES_VARIABLE],
        max_files=values[FILES_VARIABLE],
        max_read_bytes=values[READ_VARIABLE],
    )


@dataclass(frozen=True, kw_only=True)
class TreeSize:
    """What a commit's tree holds: files (blobs and links) and their bytes."""

    files: int
    total_bytes: int
    largest_path: str = ""
    largest_bytes: int = 0


def tree_problem(size: TreeSize, caps: TreeCaps) -> str | None:
    """Why the tree must not be exported, naming the cap; None when it fits."""
    if size.files > caps.max_files:
        return (
            f"the tree holds {size.files} files, over the cap of {caps.max_files} "
            f"({FILES_VARIABLE})"
        )
    if size.total_bytes > caps.max_bytes:
        largest = (
            f" (largest: {size.largest_path}, {size.largest_bytes} bytes)"
            if size.largest_path
            else ""
        )
        return (
            f"the tree holds {size.total_bytes} bytes, over the cap of {caps.max_bytes} "
            f"({BYTES_VARIABLE}){largest}"
        )
    return None


def write_problem(*, written: TreeSize, path: str, size: int, caps: TreeCaps) -> str | None:
    """Why ``path`` (``size`` bytes) must not be written into a tree that already holds
    ``written``; None when it fits under both caps."""
    if written.files + 1 > caps.max_files:
        return (
            f"writing {path} would take the tree past {caps.max_files} files, "
            f"the cap ({FILES_VARIABLE})"
        )
    if written.total_bytes + size > caps.max_bytes:
        return (
            f"writing {path} ({size} bytes) would take the tree to "
            f"{written.total_bytes + size} bytes, over the cap of {caps.max_bytes} "
            f"({BYTES_VARIABLE})"
        )
    return None


def read_problem(name: str, size: int, caps: TreeCaps) -> str | None:
    """Why the file ``name`` (``size`` bytes; ``name`` says where: a path at a revision)
    is not read into memory; None when it fits under :data:`READ_VARIABLE`'s cap."""
    if size <= caps.max_read_bytes:
        return None
    return (
        f"{name}: {size} bytes, over the cap of {caps.max_read_bytes} bytes on a file "
        f"the tool reads ({READ_VARIABLE})"
    )
