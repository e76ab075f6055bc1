"""Atomic writes: a reader sees the whole document or no file at all.

The one atomic writer of the package (``orchestrator.files`` builds on it). The mode
rule: result files the probe writes in the container are ``RESULT_MODE`` (0644), because
another user reads them on the host whatever the container's umask; files the tool
writes for its user (``mode=None``) get ``0666`` less the user's umask, as any file
``open()`` creates would. The kernel applies the umask when the temporary file is
created, so the umask is never read or changed (``os.umask`` would change it for
every thread of the process).

Paths are handled as strings (``os.path``), never as ``pathlib.Path``: the probe writes
after a session in which a test may have set ``os.name`` to ``"nt"`` and failed before
restoring it, and from then on ``Path(...)`` is a ``WindowsPath``, which Python refuses
to make on POSIX: the results of every finished test would be lost with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from typing import Any

RESULT_MODE = 0o644
_CREATE_MODE = 0o666  # what open() asks for; the umask takes its bits away
_TEMP_ATTEMPTS = 100


def write_json_atomic(path: str | os.PathLike[str], document: Any) -> None:
    """Write `document` as JSON to `path` atomically, mode ``RESULT_MODE``."""
    # Compact separators and no indent keep json on its C encoder (thousands of entries).
    data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    write_bytes_atomic(path, data.encode("utf-8"))


def write_bytes_atomic(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int | None = RESULT_MODE,
    sync_folder: bool = True,
) -> None:
    """Write `data` to `path` via a temporary file in the same folder.

    `mode` is the file's permission bits; ``None`` means 0666 less the process umask.
    The temporary file is fsynced before the rename and the folder after it, so a
    crash mid-write leaves either the previous state or the complete file, never
    half of one. ``sync_folder=False`` leaves the folder's fsync to the caller, who
    writes many files into it and syncs it once (:func:`sync_folder`).
    """
    target = os.fspath(path)
    fd, temp_path = _create_temp(target, _CREATE_MODE if mode is None else 0o600)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_path)
        raise
    if sync_folder:
        _fsync_directory(os.path.dirname(target) or ".")


def sync_folder(folder: str | os.PathLike[str]) -> None:
    """Make the renames into ``folder`` durable (after writes with ``sync_folder=False``)."""
    _fsync_directory(os.fspath(folder))


def _create_temp(target: str, create_mode: int) -> tuple[int, str]:
    """A new file beside `target`, opened for writing; like mkstemp, with our mode."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    folder, name = os.path.split(target)
    for _ in range(_TEMP_ATTEMPTS):
        temp_path = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(temp_path, flags, create_mode), temp_path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def _fsync_directory(folder: str) -> None:
    # The rename itself is durable only once the directory entry is flushed.
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
