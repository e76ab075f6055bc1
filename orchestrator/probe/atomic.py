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
from collections.abc import Iterable, Sequence
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
    """:func:`write_chunks_atomic` of one piece of bytes."""
    write_chunks_atomic(path, (data,), mode=mode, sync_folder=sync_folder)


def write_chunks_atomic(
    path: str | os.PathLike[str],
    chunks: Iterable[bytes],
    *,
    mode: int | None = RESULT_MODE,
    sync_folder: bool = True,
) -> None:
    """Write ``chunks`` to `path` via a temporary file in the same folder.

    The file's bytes are ``chunks`` one after the other (a whole suite's result is
    copied in from a spool a chunk at a time, never held whole).
    `mode` is the file's permission bits; ``None`` means 0666 less the process umask.
    The temporary file is fsynced before the rename and the folder after it, so a
    crash mid-write leaves either the previous state or the complete file, never
    half of one. ``sync_folder=False`` leaves the folder's fsync to the caller, who
    writes many files into it and syncs it once (:func:`write_many_atomic` does both).
    """
    target = os.fspath(path)
    fd, temp_path = _create_temp(target, _CREATE_MODE if mode is None else 0o600)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_path)
        raise
    if sync_folder:
        _fsync_directory(os.path.dirname(target) or ".")


def write_many_atomic(
    items: Sequence[tuple[str | os.PathLike[str], bytes]], *, mode: int | None = None
) -> None:
    """Write many files, each as :func:`write_bytes_atomic` would, durable together.

    Every file is written to its temporary name first; then one ``syncfs`` per file
    system makes all of their data durable at once (instead of an ``fsync`` per file: a
    whole suite's evidence is thousands of small files), the renames follow and each
    folder is synced once. Where ``syncfs`` is missing or fails, each temporary file is
    fsynced before its rename, as one by one. A failure before the renames leaves no
    file of the batch and no temporary file behind.
    """
    create_mode = _CREATE_MODE if mode is None else 0o600
    batch = secrets.token_hex(6)  # one random part for the batch: names differ by index
    temps: list[tuple[str, str]] = []
    renamed = 0
    try:
        for index, (path, data) in enumerate(items):
            target = os.fspath(path)
            folder, name = os.path.split(target)
            temp_path = os.path.join(folder, f".{name}.{batch}-{index}.tmp")
            try:
                fd = os.open(temp_path, _TEMP_FLAGS, create_mode)
            except FileExistsError:
                fd, temp_path = _create_temp(target, create_mode)
            temps.append((temp_path, target))
            try:
                if mode is not None:
                    os.fchmod(fd, mode)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        folders = sorted({os.path.dirname(target) or "." for _, target in temps})
        if not all(_syncfs(folder) for folder in _one_per_file_system(folders)):
            for temp_path, _ in temps:
                _fsync_file(temp_path)
        for temp_path, target in temps:
            os.replace(temp_path, target)
            renamed += 1
    except BaseException:
        for temp_path, _ in temps[renamed:]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp_path)
        raise
    for folder in folders:
        _fsync_directory(folder)


def _one_per_file_system(folders: Sequence[str]) -> list[str]:
    seen: dict[int, str] = {}
    for folder in folders:
        seen.setdefault(os.stat(folder).st_dev, folder)
    return list(seen.values())


def _syncfs(folder: str) -> bool:
    """``syncfs(2)`` on the file system holding ``folder`` (Linux); False when it is not
    there or fails (the caller then fsyncs each file)."""
    import ctypes  # only the host's batch writer needs it

    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return False
    fd = os.open(folder, os.O_RDONLY)
    try:
        return bool(function(fd) == 0)
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def _create_temp(target: str, create_mode: int) -> tuple[int, str]:
    """A new file beside `target`, opened for writing; like mkstemp, with our mode."""
    flags = _TEMP_FLAGS
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
