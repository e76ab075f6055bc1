"""Input files from the host, read so that no file can block, flood or redirect us.

Every JSON payload the command line names (a fixture, a shrink report, an admission
request...) comes through here. The path is looked at with ``lstat`` before it is
opened (``core.bounds.input_file_problem`` decides), then opened with ``O_NOFOLLOW``
(a symbolic link swapped in meanwhile is refused) and ``O_NONBLOCK`` (a FIFO swapped in
meanwhile cannot block the open), looked at again through the descriptor, and read with
a byte cap: a file that grew past it while we read is refused too.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from orchestrator.core.bounds import MAX_INPUT_BYTES, FileKind, describe_bytes, input_file_problem
from orchestrator.errors import InputError

_OPEN_FLAGS = (
    os.O_RDONLY
    | os.O_NONBLOCK
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_CHUNK = 1 << 20


def file_kind(mode: int) -> FileKind:
    """What an ``st_mode`` names."""
    for test, kind in (
        (stat.S_ISREG, FileKind.REGULAR),
        (stat.S_ISDIR, FileKind.DIRECTORY),
        (stat.S_ISLNK, FileKind.SYMLINK),
        (stat.S_ISFIFO, FileKind.FIFO),
        (stat.S_ISSOCK, FileKind.SOCKET),
        (stat.S_ISCHR, FileKind.CHARACTER_DEVICE),
        (stat.S_ISBLK, FileKind.BLOCK_DEVICE),
    ):
        if test(mode):
            return kind
    return FileKind.OTHER


def _refuse(name: str, status: os.stat_result, cap: int) -> None:
    problem = input_file_problem(name, kind=file_kind(status.st_mode), size=status.st_size, cap=cap)
    if problem is not None:
        raise InputError(problem)


def _os_problem(name: str, error: OSError) -> InputError:
    if isinstance(error, FileNotFoundError):
        return InputError(f"{name}: no such file")
    return InputError(f"{name}: {error.strerror or error}")


def check_input(path: Path, *, name: str | None = None, cap: int = MAX_INPUT_BYTES) -> None:
    """Refuse (``InputError``) what :func:`read_input` would refuse, without opening it:
    a missing path, anything but a regular file, a file over the cap."""
    name = name or str(path)
    try:
        status = os.lstat(path)
    except OSError as error:
        raise _os_problem(name, error) from None
    _refuse(name, status, cap)


def read_input(path: Path, *, name: str | None = None, cap: int = MAX_INPUT_BYTES) -> bytes:
    """A regular file's bytes, at most ``cap`` of them; anything else is an ``InputError``
    naming the file (``name``, else its path)."""
    name = name or str(path)
    check_input(path, name=name, cap=cap)
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        if error.errno == getattr(os, "ELOOP", -1):  # became a link after the lstat
            raise InputError(f"{name}: a {FileKind.SYMLINK.value}, not a regular file") from None
        raise _os_problem(name, error) from None
    try:
        _refuse(name, os.fstat(descriptor), cap)  # what was opened, not what was looked at
        data = read_at_most(descriptor, cap)
    except OSError as error:
        raise _os_problem(name, error) from None
    finally:
        os.close(descriptor)
    if len(data) > cap:
        raise InputError(f"{name}: grew past the {describe_bytes(cap)} an input file may have")
    return data


def read_at_most(descriptor: int, cap: int) -> bytes:
    """What an open file holds, up to ``cap + 1`` bytes (one more than allowed says that it
    holds too many: a file may grow between its check and its read)."""
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        chunk = os.read(descriptor, min(_CHUNK, cap + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def open_input(path: Path, *, name: str | None = None, cap: int = MAX_INPUT_BYTES) -> BinaryIO:
    """A regular file opened for reading, refused as :func:`read_input` refuses (a link, a
    FIFO, a file over ``cap``): for a file its reader takes as a stream, a bounded line at
    a time (a run's property store), rather than whole."""
    name = name or str(path)
    check_input(path, name=name, cap=cap)
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        if error.errno == getattr(os, "ELOOP", -1):
            raise InputError(f"{name}: a {FileKind.SYMLINK.value}, not a regular file") from None
        raise _os_problem(name, error) from None
    try:
        _refuse(name, os.fstat(descriptor), cap)
    except BaseException:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "rb")


def read_stdin(*, cap: int = MAX_INPUT_BYTES) -> bytes:
    """Standard input's bytes, at most ``cap`` of them (more is an ``InputError``)."""
    stream = getattr(sys.stdin, "buffer", None)
    data = stream.read(cap + 1) if stream is not None else sys.stdin.read(cap + 1).encode()
    if len(data) > cap:
        raise InputError(f"stdin: more than the {describe_bytes(cap)} an input may have")
    return bytes(data)
