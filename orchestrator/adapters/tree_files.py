"""Files of an exported (untrusted) tree, read on the host without ever leaving it.

An exported tree is a pull request's: its symbolic links point wherever it likes (a
``pyproject.toml`` linked to a host file, a ``src/pkg`` linked to ``/``). Every read the
host makes of such a tree (or of a scratch copy of one) goes through here:

- the path is checked first (:func:`orchestrator.core.tree_files.path_problem`: relative,
  no ``..``);
- each folder on the way is looked at with ``lstat`` and opened relative to its parent
  with ``O_DIRECTORY | O_NOFOLLOW``: a symbolic link anywhere on the way is refused, never
  followed, not even to a place inside the tree (the rule is simple and the container
  follows the tree's links itself);
- the file is looked at with ``lstat``, opened ``O_RDONLY | O_NOFOLLOW | O_NONBLOCK``
  (no link swapped in, no FIFO that blocks the open), looked at again with ``fstat``,
  and read to at most its cap (:data:`~orchestrator.core.tree_limits.READ_VARIABLE`): a
  link, a FIFO, a device, a folder or a larger file is a :class:`TreeFileRefused`, a
  clear outcome that names the file, never a silent truncation.

Listings and walks only ``lstat`` (:func:`list_tree_dir`, :func:`tree_usage`), and the
overlay's removals unlink relative to their folder's descriptor (:func:`remove_tree_file`).
What a refusal means is the caller's to decide (import roots: the file counts as absent,
logged; an over-cap file: exit 2).
"""

from __future__ import annotations

import errno
import os
import stat
import tarfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from orchestrator.adapters.input_file import file_kind, read_at_most
from orchestrator.core.bounds import FileKind
from orchestrator.core.tree_files import Refusal, file_problem, path_problem, refusal_text
from orchestrator.core.tree_limits import tree_caps
from orchestrator.errors import InputError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_GONE = (errno.ENOENT, errno.ENOTDIR)


class TreeFileRefused(InputError):
    """A file of the tree the host does not read (exit 2 unless the caller decides
    otherwise): ``refusal`` says why, ``path`` which file (or which folder on its way)."""

    def __init__(self, path: str, refusal: Refusal, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.refusal = refusal


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One entry of a folder of the tree, as ``lstat`` sees it."""

    name: str
    kind: FileKind
    size: int
    blocks: int = 0


@dataclass(frozen=True, kw_only=True)
class TreeUsage:
    """What a tree holds on disk: its files (regular files and links), their bytes (a
    link's: its target's length, as git counts it) and the blocks they take."""

    files: int = 0
    total_bytes: int = 0
    disk_bytes: int = 0


def read_cap() -> int:
    """The cap on a file the host reads, from the host's environment (a bad value: exit 2)."""
    try:
        return tree_caps(os.environ).max_read_bytes
    except ValueError as error:
        raise InputError(str(error)) from None


def read_tree_file(root: Path, path: str, *, cap: int | None = None) -> bytes | None:
    """The bytes of the regular file ``path`` of the tree at ``root``; None when it is
    absent (a part missing, or a file where a folder should be). Anything else the host
    does not read is a :class:`TreeFileRefused`."""
    cap = read_cap() if cap is None else cap
    parts = _parts(path)
    with _folder(root, parts[:-1], path) as folder:
        if folder is None:
            return None
        status = _lstat(parts[-1], folder)
        if status is None:
            return None
        _refuse(path, status, cap)
        try:
            descriptor = os.open(parts[-1], _FILE_FLAGS, dir_fd=folder)
        except OSError as error:
            if error.errno == errno.ELOOP:  # became a link after the lstat
                raise _refused(path, Refusal.LINK, FileKind.SYMLINK, 0, cap) from None
            if error.errno in _GONE:
                return None
            raise
    try:
        _refuse(path, os.fstat(descriptor), cap)  # what was opened, not what was looked at
        data = read_at_most(descriptor, cap)
    finally:
        os.close(descriptor)
    if len(data) > cap:  # grew while read
        raise _refused(path, Refusal.SIZE, FileKind.REGULAR, len(data), cap)
    return data


def tree_entry(root: Path, path: str) -> Entry | None:
    """What ``path`` is in the tree (``lstat``: a link is reported, not followed); None
    when absent. A link on the way to it is a :class:`TreeFileRefused`."""
    parts = _parts(path)
    with _folder(root, parts[:-1], path) as folder:
        if folder is None:
            return None
        status = _lstat(parts[-1], folder)
    return None if status is None else _entry(parts[-1], status)


def list_tree_dir(root: Path, path: str) -> tuple[Entry, ...] | None:
    """The entries of the folder ``path`` of the tree (``""``: the tree itself), by name,
    as ``lstat`` sees them; None when there is no such folder. A link to a folder, or on
    the way to it, is a :class:`TreeFileRefused`."""
    parts = _parts(path) if path else ()
    with _folder(root, parts, path) as folder:
        if folder is None:
            return None
        with os.scandir(folder) as found:
            names = sorted(entry.name for entry in found)
        entries = []
        for name in names:
            status = _lstat(name, folder)
            if status is not None:
                entries.append(_entry(name, status))
    return tuple(entries)


def tree_usage(root: Path) -> TreeUsage:
    """Files, bytes and disk blocks of the whole tree (``os.fwalk``: folders are opened
    relative to their parent and links are never followed)."""
    files = total = disk = 0
    for _folder_path, dirs, names, folder in os.fwalk(root, follow_symlinks=False):
        for name in (*names, *dirs):  # a link to a folder is listed among the folders
            status = _lstat(name, folder)
            if status is None:
                continue
            kind = file_kind(status.st_mode)
            if kind in (FileKind.REGULAR, FileKind.SYMLINK):
                files += 1
                total += status.st_size
                disk += status.st_blocks * 512
    return TreeUsage(files=files, total_bytes=total, disk_bytes=disk)


def remove_tree_file(root: Path, path: str) -> Entry | None:
    """Unlink ``path`` (a file or a link, never a folder) from the tree, then its folders
    while they are empty (never the tree itself); what was removed, or None. Nothing is
    followed: a link on the way means the file is not in the tree."""
    parts = _parts(path)
    try:
        opened = _open_folders(root, parts[:-1], path)
    except TreeFileRefused:
        return None
    if opened is None:
        return None
    try:
        status = _lstat(parts[-1], opened[-1])
        if status is None or file_kind(status.st_mode) is FileKind.DIRECTORY:
            return None
        os.unlink(parts[-1], dir_fd=opened[-1])
        for depth in range(len(parts) - 1, 0, -1):  # parts[depth - 1] in opened[depth - 1]
            try:
                os.rmdir(parts[depth - 1], dir_fd=opened[depth - 1])
            except OSError:
                break
        return _entry(parts[-1], status)
    finally:
        for descriptor in opened:
            os.close(descriptor)


def tar_tree(
    root: Path,
    dest: Path,
    *,
    arcname: str = ".",
    adjust: Callable[[tarfile.TarInfo], tarfile.TarInfo | None] = lambda info: info,
) -> Path:
    """The tree at ``root`` as a tar file at ``dest`` (its members under ``arcname``):
    folders walked with ``os.fwalk`` (never through a link), files opened relative to
    their folder with ``O_NOFOLLOW | O_NONBLOCK`` and taken as ``fstat`` sees them, links
    stored as links, anything else left out. ``adjust`` may change or drop a member."""
    with tarfile.open(dest, mode="w") as archive:
        for folder_path, dirs, names, folder in os.fwalk(root, follow_symlinks=False):
            dirs.sort()
            relative = os.path.relpath(folder_path, root)
            base = arcname if relative == "." else os.path.join(arcname, relative)
            info = _tar_info(base, os.fstat(folder))
            if adjust(info) is None:
                dirs.clear()  # a folder left out is left out whole
                continue
            archive.addfile(info)
            for name in sorted((*names, *dirs)):
                _add_member(archive, os.path.join(base, name), name, folder, adjust)
    return dest


def _add_member(
    archive: tarfile.TarFile,
    member: str,
    name: str,
    folder: int,
    adjust: Callable[[tarfile.TarInfo], tarfile.TarInfo | None],
) -> None:
    status = _lstat(name, folder)
    kind = None if status is None else file_kind(status.st_mode)
    if status is None or kind is FileKind.DIRECTORY:
        return  # gone, or a folder: the walk adds it
    if kind is FileKind.SYMLINK:
        info = _tar_info(member, status)
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(name, dir_fd=folder)
        kept = adjust(info)
        if kept is not None:
            archive.addfile(kept)
        return
    if kind is not FileKind.REGULAR:
        return
    descriptor = os.open(name, _FILE_FLAGS, dir_fd=folder)
    with os.fdopen(descriptor, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode):
            return  # swapped since the lstat: nothing of it is taken
        info = _tar_info(member, opened)
        kept = adjust(info)
        if kept is not None:
            archive.addfile(kept, handle)


def _tar_info(member: str, status: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(member)
    info.mode = stat.S_IMODE(status.st_mode)
    info.mtime = int(status.st_mtime)
    info.uid, info.gid = status.st_uid, status.st_gid
    if stat.S_ISDIR(status.st_mode):
        info.type = tarfile.DIRTYPE
    else:
        info.size = status.st_size if stat.S_ISREG(status.st_mode) else 0
    return info


# ---------------------------------------------------------------- the walk


def _parts(path: str) -> tuple[str, ...]:
    problem = path_problem(path)
    if problem is not None:
        raise TreeFileRefused(path, Refusal.PATH, f"{path!r}: {problem}, not a path in the tree")
    return tuple(path.split("/"))


@contextmanager
def _folder(root: Path, parts: Sequence[str], path: str) -> Iterator[int | None]:
    """A descriptor of the folder ``parts`` of the tree, None when it is not there."""
    opened = _open_folders(root, parts, path)
    try:
        yield None if opened is None else opened[-1]
    finally:
        for descriptor in opened or ():
            os.close(descriptor)


def _open_folders(root: Path, parts: Sequence[str], path: str) -> list[int] | None:
    """Descriptors of the tree and of each folder of ``parts`` under it, each opened
    relative to its parent without following a link; None when one is missing or not a
    folder; a link is a :class:`TreeFileRefused` naming it."""
    opened = [os.open(root, _DIR_FLAGS)]
    try:
        for depth, part in enumerate(parts):
            status = _lstat(part, opened[-1])
            kind = None if status is None else file_kind(status.st_mode)
            if kind is FileKind.SYMLINK:
                where = "/".join(parts[: depth + 1])
                raise TreeFileRefused(
                    path, Refusal.LINK, f"{path}: {where} is {Refusal.LINK.value}"
                )
            if kind is not FileKind.DIRECTORY:
                _close_all(opened)
                return None
            try:
                opened.append(os.open(part, _DIR_FLAGS, dir_fd=opened[-1]))
            except OSError as error:
                if error.errno not in (*_GONE, errno.ELOOP):
                    raise
                _close_all(opened)
                return None  # replaced meanwhile: the tree is ours, nobody else writes it
    except BaseException:
        _close_all(opened)
        raise
    return opened


def _close_all(descriptors: list[int]) -> None:
    while descriptors:
        os.close(descriptors.pop())


def _lstat(name: str, folder: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError as error:
        if error.errno in _GONE:
            return None
        raise


def _entry(name: str, status: os.stat_result) -> Entry:
    return Entry(
        name=name,
        kind=file_kind(status.st_mode),
        size=status.st_size,
        blocks=status.st_blocks,
    )


def _refuse(path: str, status: os.stat_result, cap: int) -> None:
    kind = file_kind(status.st_mode)
    refusal = file_problem(kind, status.st_size, cap)
    if refusal is not None:
        raise _refused(path, refusal, kind, status.st_size, cap)


def _refused(path: str, refusal: Refusal, kind: FileKind, size: int, cap: int) -> TreeFileRefused:
    return TreeFileRefused(
        path, refusal, refusal_text(path, refusal, kind=kind, size=size, cap=cap)
    )
