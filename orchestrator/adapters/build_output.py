"""Wheels out of the build container's output folder, without following what it left.

The folder was writable by the container, where a dependency's build backend ran: it may
hold symbolic links, FIFOs, devices, folders, huge files or odd names. Once the container
is gone the host looks at each entry with ``lstat`` (relative to the folder's own
descriptor, opened with ``O_NOFOLLOW``), takes only regular files with a wheel's name
under the caps (:func:`orchestrator.core.project_image.output_problem` decides), opens
each with ``O_NOFOLLOW | O_NONBLOCK``, checks again through the descriptor, and copies at
most the cap into a folder of its own, hashing as it goes. Anything else is refused.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from orchestrator.adapters.input_file import file_kind
from orchestrator.core import project_image as core
from orchestrator.core.text_safety import terminal_safe
from orchestrator.errors import ImageBuildError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Taken:
    """A wheel copied out: its file name and the SHA-256 of the bytes copied."""

    name: str
    sha256: str


def _refuse(problem: str) -> ImageBuildError:
    shown = terminal_safe(problem)
    return ImageBuildError(f"the build container's output folder: {shown}; refused")


def entry_names(folder: Path) -> tuple[str, ...]:
    """The names in ``folder`` (not followed if it is a link), at most
    :data:`~orchestrator.core.project_image.OUTPUT_ENTRIES` of them (more is refused)."""
    directory = os.open(folder, _DIR_FLAGS)
    try:
        return _names(directory)
    finally:
        os.close(directory)


def _names(directory: int) -> tuple[str, ...]:
    names: list[str] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            names.append(entry.name)
            if len(names) > core.OUTPUT_ENTRIES:
                raise _refuse(f"more than {core.OUTPUT_ENTRIES} entries")
    return tuple(names)


def take_wheels(folder: Path, dest: Path) -> tuple[Taken, ...]:
    """Copy the wheels of ``folder`` (the container's output, the container gone) into
    ``dest`` (a new folder of ours); an entry that is not a wheel or an sdist, not a
    regular file, or over a cap is an :class:`ImageBuildError`."""
    directory = os.open(folder, _DIR_FLAGS)
    try:
        taken: list[Taken] = []
        total = 0
        for name in sorted(_names(directory)):
            status = os.lstat(name, dir_fd=directory)
            kind = file_kind(status.st_mode).value
            problem = core.output_problem(name, kind=kind, size=status.st_size, taken=total)
            if problem is not None:
                raise _refuse(problem)
            if not name.endswith(".whl"):
                continue  # an sdist: its wheel was built beside it
            sha256, size = _copy(directory, name, dest / name, total)
            total += size
            taken.append(Taken(name=name, sha256=sha256))
        return tuple(taken)
    finally:
        os.close(directory)


def _copy(directory: int, name: str, target: Path, total: int) -> tuple[str, int]:
    try:
        source = os.open(name, _READ_FLAGS, dir_fd=directory)
    except OSError as error:  # a link swapped in after the lstat: ELOOP
        raise _refuse(f"{name!r} cannot be opened as a regular file ({error.strerror})") from None
    try:
        status = os.fstat(source)
        kind = file_kind(status.st_mode).value
        problem = core.output_problem(name, kind=kind, size=status.st_size, taken=total)
        if problem is not None or not stat.S_ISREG(status.st_mode):
            raise _refuse(problem or f"{name!r} is not a regular file")
        cap = min(core.WHEEL_BYTES, core.OUTPUT_BYTES - total)
        digest = hashlib.sha256()
        size = 0
        written = os.open(target, _WRITE_FLAGS, 0o644)
        try:
            while chunk := os.read(source, min(_CHUNK, cap + 1 - size)):
                size += len(chunk)
                if size > cap:
                    raise _refuse(f"{name} grew past its cap while it was read")
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(written, view) :]
        finally:
            os.close(written)
        return digest.hexdigest(), size
    finally:
        os.close(source)
