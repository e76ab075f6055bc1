"""A revision's tree written out by the tool itself, file by file, as committed.

Why not ``git checkout-index``: a checkout applies the tree's own ``.gitattributes``
(``eol=crlf``, ``ident``, ``working-tree-encoding=UTF-32LE``, ``filter=...``) and the
operator's ``core.autocrlf``, so a 4 MB blob can become 150 MB on disk, past the sizes
``ls-tree -l`` gave the tree cap; git 2.39 cannot take attributes from elsewhere than the
tree. Here every file is its blob's bytes, its size asked first and its body streamed
from GitPython's persistent ``git cat-file`` (:mod:`orchestrator.adapters.git_batch`),
and counted as written against the caps
(:func:`orchestrator.core.tree_limits.write_problem`): the written total never passes
them. The fidelity given up, documented in docs/security.md: no ``.gitattributes``
conversion or filter is applied (nor ``export-ignore``/``export-subst``), a submodule is
an empty folder, a symbolic link is written as a link whatever ``core.symlinks`` says.

Paths are the tree's, so untrusted: every one is checked before a byte is written
(:func:`orchestrator.core.tree_files.path_problem`: no ``..``, no ``.git``), folders are
made and opened relative to their parent with ``O_NOFOLLOW``, files created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` relative to their folder: nothing is ever written
through a link. Laying files over a tree (``--tests-from``) replaces what is in the way
(a file, a link, a folder) without following it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from orchestrator.adapters.git_batch import Objects, TreeEntry
from orchestrator.adapters.input_file import file_kind
from orchestrator.core.bounds import FileKind
from orchestrator.core.tree_files import MAX_LINK_BYTES, path_problem
from orchestrator.core.tree_limits import TreeCaps, TreeSize, write_problem
from orchestrator.errors import GitError, InputError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# Readable (and traversable) by the container's uid 1000 whatever the caller's umask.
FILE_MODE, EXEC_MODE, DIR_MODE = 0o644, 0o755, 0o755
LINK, GITLINK, EXECUTABLE = "120000", "160000", "100755"


def write_tree(
    repo: Path,
    rev: str,
    root: Path,
    entries: Sequence[TreeEntry],
    *,
    caps: TreeCaps,
    written: TreeSize | None = None,
    over: bool = False,
) -> TreeSize:
    """Write ``entries`` (of commit ``rev``) under ``root`` as committed, and return what
    the tree then holds. ``written``: what it held before (nothing by default); ``over``:
    lay them over a tree, replacing what is in the way (else an entry met twice is bad
    input). A path the tree may not have, or a file that would take the tree past the
    caps, is an :class:`InputError` (exit 2) naming it; at most the caps are written."""
    for entry in entries:
        problem = path_problem(entry.path)
        if problem is not None:
            raise InputError(f"{rev[:12]}: {entry.path!r}: {problem}; nothing was written")
    writer = _Writer(root, rev=rev, caps=caps, written=written, over=over)
    try:
        with Objects(repo) as objects:
            for entry in entries:
                if entry.kind != "blob":
                    if entry.mode == GITLINK:
                        writer.folder(entry.path)
                    continue
                found = objects.header(entry.oid)
                if found.kind != "blob":
                    raise GitError(
                        f"git cat-file failed: {entry.path} ({entry.oid}) is missing or corrupt"
                    )
                body = objects.chunks(found)
                try:
                    writer.write(entry, found.size, body)
                finally:
                    body.close()  # a body the writer refused is never read
    finally:
        writer.close()
    return writer.written


class _Writer:
    """Files and folders under one root, each opened relative to its folder's descriptor
    (the last folder written into stays open: git lists a folder's files together)."""

    def __init__(
        self, root: Path, *, rev: str, caps: TreeCaps, written: TreeSize | None, over: bool
    ) -> None:
        self.rev = rev
        self.caps = caps
        self.over = over
        self.written = written or TreeSize(files=0, total_bytes=0)
        self._root = os.open(root, _DIR_FLAGS)
        self._folder: tuple[tuple[str, ...], int] | None = None

    def close(self) -> None:
        if self._folder is not None:
            os.close(self._folder[1])
            self._folder = None
        os.close(self._root)

    def write(self, entry: TreeEntry, size: int, body: Iterable[bytes]) -> None:
        """One blob: a file (executable or not) or a link, counted against the caps."""
        parts = entry.path.split("/")
        folder = self._open(parts[:-1], entry.path)
        name = parts[-1]
        if self.over:
            self._clear(folder, name)
        problem = write_problem(written=self.written, path=entry.path, size=size, caps=self.caps)
        if problem is not None:
            raise InputError(f"{self.rev[:12]}: {problem}; the export stopped there")
        if entry.mode == LINK:
            count = self._link(folder, name, entry.path, size, body)
        else:
            count = self._file(folder, name, entry, body)
        self.written = replace(
            self.written, files=self.written.files + 1, total_bytes=self.written.total_bytes + count
        )

    def folder(self, path: str) -> None:
        """An empty folder (a submodule's place, as ``git checkout-index`` leaves it)."""
        parts = path.split("/")
        self._open(parts, path)

    def _file(self, folder: int, name: str, entry: TreeEntry, body: Iterable[bytes]) -> int:
        try:
            descriptor = os.open(name, _NEW_FILE, FILE_MODE, dir_fd=folder)
        except FileExistsError:
            raise InputError(f"{self.rev[:12]}: {entry.path!r} is in the tree twice") from None
        count = 0
        try:
            os.fchmod(descriptor, EXEC_MODE if entry.mode == EXECUTABLE else FILE_MODE)
            for chunk in body:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(descriptor, view) :]
                count += len(chunk)
        finally:
            os.close(descriptor)
        return count

    def _link(self, folder: int, name: str, path: str, size: int, body: Iterable[bytes]) -> int:
        if size > MAX_LINK_BYTES:
            raise InputError(
                f"{self.rev[:12]}: {path!r}: a symbolic link to a {size}-byte target "
                f"(at most {MAX_LINK_BYTES})"
            )
        target = b"".join(body)
        try:
            os.symlink(os.fsdecode(target), name, dir_fd=folder)
        except FileExistsError:
            raise InputError(f"{self.rev[:12]}: {path!r} is in the tree twice") from None
        except (ValueError, FileNotFoundError):  # a NUL byte, an empty target
            raise InputError(f"{self.rev[:12]}: {path!r}: not a symbolic link's target") from None
        return len(target)

    def _open(self, parts: Sequence[str], path: str) -> int:
        """The folder ``parts`` under the root, made where missing, never through a link."""
        key = tuple(parts)
        if self._folder is not None:
            if self._folder[0] == key:
                return self._folder[1]
            os.close(self._folder[1])
            self._folder = None
        descriptor = os.dup(self._root)
        try:
            for part in parts:
                child = self._child_folder(descriptor, part, path)
                os.close(descriptor)
                descriptor = child
        except BaseException:
            os.close(descriptor)
            raise
        self._folder = (key, descriptor)
        return descriptor

    def _child_folder(self, parent: int, name: str, path: str) -> int:
        kind = _kind(parent, name)
        if kind is not None and kind is not FileKind.DIRECTORY:
            if not self.over:
                raise InputError(
                    f"{self.rev[:12]}: {path!r}: a file of the tree where a folder should be"
                )
            self._clear(parent, name)  # a file or a link in the way goes, as in a checkout
            kind = None
        if kind is None:
            os.mkdir(name, DIR_MODE, dir_fd=parent)
        child = os.open(name, _DIR_FLAGS, dir_fd=parent)
        if kind is None:
            os.fchmod(child, DIR_MODE)
        return child

    def _clear(self, folder: int, name: str) -> None:
        """Remove what is at ``name`` (a folder with all it holds), uncounting a file."""
        try:
            status = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return
        kind = file_kind(status.st_mode)
        if kind is FileKind.DIRECTORY:
            shutil.rmtree(name, dir_fd=folder)  # descriptor-based: never follows a link
            return
        os.unlink(name, dir_fd=folder)
        if kind in (FileKind.REGULAR, FileKind.SYMLINK):
            self.written = replace(
                self.written,
                files=max(0, self.written.files - 1),
                total_bytes=max(0, self.written.total_bytes - status.st_size),
            )


def _kind(folder: int, name: str) -> FileKind | None:
    try:
        return file_kind(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None
