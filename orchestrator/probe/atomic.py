"""Atomic writes: a reader sees the whole document or no file at all."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomic(path: str | os.PathLike[str], document: Any) -> None:
    """Write `document` as JSON to `path` atomically (see `write_bytes_atomic`)."""
    # Compact separators and no indent keep json on its C encoder (thousands of entries).
    data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    write_bytes_atomic(path, data.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same folder.

    The temporary file is fsynced before the rename, so a crash mid-write leaves
    either the previous state or the complete file, never half of one.
    """
    target = Path(path)
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates 0600; results are read by another user on the host side.
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    _fsync_directory(target.parent)


def _fsync_directory(folder: Path) -> None:
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
