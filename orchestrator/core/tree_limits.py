"""How large a tree under test may be before it is written out. Pure.

Each side's revision is exported into a scratch folder of the host (``/tmp``). A tree
is only as small as its commit says: a compression bomb (gigabytes of zeros that pack
into a few kilobytes of ``.git``) would fill the host's disk on export. So the sizes
``git ls-tree -l`` reports are checked first, against these caps, and a tree over them
is refused as bad input (exit 2) before a byte is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

GIB: Final = 1024 * 1024 * 1024
TREE_BYTES: Final = 2 * GIB
TREE_FILES: Final = 200_000
# The CI owner's knobs (the host's environment is trusted; the tree's is not).
BYTES_VARIABLE: Final = "ORCHESTRATOR_MAX_TREE_BYTES"
FILES_VARIABLE: Final = "ORCHESTRATOR_MAX_TREE_FILES"


@dataclass(frozen=True, kw_only=True)
class TreeCaps:
    max_bytes: int = TREE_BYTES
    max_files: int = TREE_FILES


def tree_caps(env: Mapping[str, str]) -> TreeCaps:
    """The caps, from the defaults or the host's environment; a value that is not a
    positive whole number raises ValueError naming the variable."""
    values = {}
    for name, default in ((BYTES_VARIABLE, TREE_BYTES), (FILES_VARIABLE, TREE_FILES)):
        text = env.get(name, "").strip()
        if not text:
            values[name] = default
            continue
        if not text.isascii() or not text.isdigit() or int(text) < 1:
            raise ValueError(f"{name} must be a positive whole number, not {text!r}")
        values[name] = int(text)
    return TreeCaps(max_bytes=values[BYTES_VARIABLE], max_files=values[FILES_VARIABLE])


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
