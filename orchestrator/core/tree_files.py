"""What the host may read of, or write into, an exported (untrusted) tree. Pure.

The tree's paths and file types come from a pull request's git objects. The host only
ever touches paths that stay inside the tree (relative, no ``.``/``..`` or empty part, no
``.git``, within the file system's name limits), and reads only regular files reached
without following a symbolic link: a link is the tree's to follow in its container (where
``/etc/passwd`` is the image's), never the host's. The readers and the writer are
:mod:`orchestrator.adapters.tree_files` and :mod:`orchestrator.adapters.tree_export`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from orchestrator.core.bounds import FileKind
from orchestrator.core.tree_limits import READ_VARIABLE

# Linux's PATH_MAX and NAME_MAX: a longer path could not be opened in the container.
MAX_PATH_BYTES: Final = 4095
MAX_NAME_BYTES: Final = 255
# A symbolic link's target is at most a path.
MAX_LINK_BYTES: Final = MAX_PATH_BYTES


class Refusal(StrEnum):
    """Why a file of the tree is not read on the host."""

    PATH = "not a path inside the tree"
    LINK = "a symbolic link, never followed on the host"
    KIND = "not a regular file"
    SIZE = "over the cap"


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a path inside a tree the host may touch; None when it is."""
    if not path:
        return "an empty path"
    if path.startswith("/"):
        return "an absolute path"
    if "\0" in path:
        return "a path with a NUL byte"
    if len(path.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        return f"a path longer than {MAX_PATH_BYTES} bytes"
    for part in path.split("/"):
        if not part:
            return "a path with an empty part"
        if part in (".", ".."):
            return f"a path with a {part!r} part"
        if part.lower() == ".git":
            return "a path through .git"
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            return f"a name longer than {MAX_NAME_BYTES} bytes"
    return None


def tree_path_parts(path: str) -> tuple[str, ...] | None:
    """The parts of a path inside the tree (``a/b/c.py`` -> ``("a", "b", "c.py")``), or
    None when :func:`path_problem` refuses it."""
    if path_problem(path) is not None:
        return None
    return tuple(path.split("/"))


def file_problem(kind: FileKind, size: int, cap: int) -> Refusal | None:
    """Whether a file of the tree, as ``lstat`` (then ``fstat``) sees it, is read: only a
    regular file of at most ``cap`` bytes. None: it is."""
    if kind is FileKind.SYMLINK:
        return Refusal.LINK
    if kind is not FileKind.REGULAR:
        return Refusal.KIND
    if size > cap:
        return Refusal.SIZE
    return None


def refusal_text(path: str, refusal: Refusal, *, kind: FileKind, size: int, cap: int) -> str:
    """One line naming the file and why it is not read."""
    if refusal is Refusal.KIND:
        return f"{path}: a {kind.value} in the tree, not a regular file"
    if refusal is Refusal.SIZE:
        return (
            f"{path}: {size} bytes in the tree, over the cap of {cap} bytes on a file "
            f"the tool reads ({READ_VARIABLE})"
        )
    return f"{path}: {refusal.value}"
