"""Write a run folder so that it is complete, or says it is not.

A run folder is checked before anything runs (a file in the way, a folder that cannot
be written, a full file system: exit 2). It is created with an ``INCOMPLETE`` file
(before the fixture's copy and ``run-log.json``), and that file is removed only once
the run has finished: every decision and ``summary.json`` written. A run that is
interrupted, killed (even by SIGKILL) or fails before that keeps the marker, and
``report`` (and ``merge``, ``reproduce``) refuse the folder by name; one interrupted
while it waits to record is marked again. The marker's text says why, when the tool
lived to say it. The ledger only ever holds runs whose folders are complete (it is
written after the marker goes).

A write that fails once the run is under way is one :class:`LocalWriteError` (exit 3),
``disk_full`` when the file system has no space left, ``internal_error`` otherwise; one
that would take the folder past its cap of bytes is a :class:`CapError` (exit 3)
(:mod:`orchestrator.core.run_limits`, ``ORCHESTRATOR_MAX_RUN_BYTES``): every write here
(and the raw results, :func:`write_raw`) is counted against it before a byte of it is
written, so the folder is never half-written past it; it stays ``INCOMPLETE``, the
marker saying why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator import files
from orchestrator.core.run_limits import RUN_FOLDER_CAP, RunCaps, bytes_problem, run_caps
from orchestrator.errors import CapError, InputError, LocalWriteError
from orchestrator.model import PROPERTIES_SPOOL

INCOMPLETE = "INCOMPLETE"  # the marker file (services/run_folders.py reads it)
RUN_LOG = "run-log.json"
DISK_FULL = "disk_full"
INTERNAL_ERROR = "internal_error"


class _Budget:
    """The bytes written into one run folder by this process, against its cap."""

    def __init__(self, caps: RunCaps) -> None:
        self.caps = caps
        self.used = 0
        self.lock = threading.Lock()


_BUDGETS: dict[str, _Budget] = {}
_BUDGETS_LOCK = threading.Lock()


def _budget_of(path: Path) -> _Budget | None:
    where = os.path.abspath(path)
    with _BUDGETS_LOCK:
        for folder, budget in _BUDGETS.items():
            if where == folder or where.startswith(folder + os.sep):
                return budget
    return None


def charge(path: Path, size: int) -> None:
    """Count ``size`` bytes about to be written at ``path`` (a run folder or a file in
    one) against its folder's cap; over it, one :class:`CapError` naming the cap, and
    nothing is counted."""
    budget = _budget_of(path)
    if budget is None:
        return
    with budget.lock:
        problem = bytes_problem(budget.used, size, budget.caps)
        if problem is None:
            budget.used += size
            return
    raise CapError(f"{problem}; nothing more was written ({RUN_FOLDER_CAP})")


def write_raw(path: Path, data: bytes) -> None:
    """One raw result file as it came back, counted against its run folder's cap."""
    charge(path, len(data))
    path.write_bytes(data)


def write_reason(error: OSError) -> str:
    """``disk_full`` for no space (or quota), ``internal_error`` for any other write. Pure."""
    return DISK_FULL if error.errno in (errno.ENOSPC, errno.EDQUOT) else INTERNAL_ERROR


def _existing_ancestor(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def check_run_folder(run_dir: Path, *, option: str = "--out") -> None:
    """Refuse (exit 2) a run folder that cannot hold a run, before anything runs."""
    name = f"{option} {run_dir}"
    if run_dir.exists():
        if not run_dir.is_dir():
            raise InputError(f"{name}: is a file, not a folder")
        if (run_dir / RUN_LOG).exists():
            raise InputError(f"{name}: already holds a run ({RUN_LOG}); pick another {option}")
        where = run_dir
    else:
        where = _existing_ancestor(run_dir)
        if not where.is_dir():
            raise InputError(f"{name}: {where} is a file, not a folder")
    if not os.access(where, os.W_OK | os.X_OK):
        raise InputError(f"{name}: {where} is not a writable folder")
    try:
        space = os.statvfs(where)
    except OSError:
        return
    if space.f_bavail == 0 or (space.f_files and space.f_favail == 0):
        raise InputError(f"{name}: no space left on the file system of {where}")


def start_run_folder(
    run_dir: Path,
    *,
    started_at: str,
    kept: tuple[str, bytes] | None = None,
    option: str = "--out",
) -> None:
    """Create the folder and mark it incomplete, then write ``kept`` (a file name and its
    bytes: the fixture the replays will read; a collection that cuts the run reads it
    too). Exit 2 when that fails: no replay has run yet."""
    text = (
        f"started {started_at} by process {os.getpid()}: this run has not finished. A run "
        "folder that still holds this file was interrupted, killed or failed; its "
        "decisions were not recorded.\n"
    )
    try:
        caps = run_caps(os.environ)
    except ValueError as error:
        raise InputError(str(error)) from None
    with _BUDGETS_LOCK:
        _BUDGETS[os.path.abspath(run_dir)] = _Budget(caps)
    if kept is not None:
        charge(run_dir, len(kept[1]))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / INCOMPLETE).write_text(text, encoding="utf-8")
        if kept is not None:
            files.write_atomic(run_dir / kept[0], kept[1])
    except OSError as error:
        raise InputError(
            f"{option} {run_dir}: cannot write the run folder ({error.strerror or error})"
        ) from None


def write_run_log(run_dir: Path, run_log: dict[str, Any], *, option: str = "--out") -> None:
    """``run-log.json``, into a folder :func:`start_run_folder` made (exit 2 when that
    fails: no replay has run yet)."""
    data = (files.dumps(run_log) + "\n").encode("utf-8")
    charge(run_dir, len(data))
    try:
        files.write_atomic(run_dir / RUN_LOG, data)
    except OSError as error:
        raise InputError(
            f"{option} {run_dir}: cannot write the run folder ({error.strerror or error})"
        ) from None


def write_json(run_dir: Path, name: str, document: Any) -> None:
    """One document of a run under way; a failed write is one :class:`LocalWriteError`."""
    path = run_dir / name
    data = (files.dumps(document) + "\n").encode("utf-8")
    charge(path, len(data))
    try:
        files.write_atomic(path, data)
    except OSError as error:
        reason = write_reason(error)
        raise LocalWriteError(
            reason, f"cannot write {path}: {error.strerror or error} ({reason})"
        ) from None


def write_json_many(run_dir: Path, documents: Iterable[tuple[str, Any]]) -> None:
    """Many documents of a run under way (``files.write_json_many``: made durable together,
    one folder sync); a failed write is one :class:`LocalWriteError`."""
    try:
        files.write_json_many(
            ((run_dir / name, document) for name, document in documents),
            before=lambda size: charge(run_dir, size),
        )
    except OSError as error:
        reason = write_reason(error)
        raise LocalWriteError(
            reason, f"cannot write into {run_dir}: {error.strerror or error} ({reason})"
        ) from None


def is_incomplete(run_dir: Path) -> bool:
    return (run_dir / INCOMPLETE).exists()


def finish_run_folder(run_dir: Path) -> None:
    """The run finished: its folder is complete (the marker goes)."""
    try:
        (run_dir / INCOMPLETE).unlink(missing_ok=True)
    except OSError as error:
        reason = write_reason(error)
        raise LocalWriteError(
            reason, f"cannot mark {run_dir} complete: {error.strerror or error} ({reason})"
        ) from None


def mark_incomplete(run_dir: Path, why: str) -> None:
    """Mark a folder incomplete again (a run interrupted after its summary was written,
    before it was recorded). Best effort: a full disk may refuse even this."""
    with contextlib.suppress(OSError):
        (run_dir / INCOMPLETE).write_text(f"{why}\n", encoding="utf-8")


def note_incomplete(run_dir: Path, why: str, *, now: datetime | None = None) -> bool:
    """Say in the marker why the run did not finish (best effort: the disk may be full).
    True when the folder is marked incomplete."""
    marker = run_dir / INCOMPLETE
    if not marker.exists():
        return False
    # The decided properties' spool is no part of a run folder that stops here.
    with contextlib.suppress(OSError):
        (run_dir / PROPERTIES_SPOOL).unlink(missing_ok=True)
    stamp = (now or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    with contextlib.suppress(OSError), marker.open("a", encoding="utf-8") as handle:
        handle.write(f"{stamp}: {why}\n")
    return True
