"""The host's end of a serving probe driver's job protocol: two FIFOs in a private folder.

A driver started with ``--serve --result-files`` (``orchestrator/probe/driver.py``, whose
docstring is the protocol) reads ``replay-job/1`` lines and writes one notice line per
job: the job is done, and the SHA-256 of the result file it wrote. No result comes
through here: the file is read back through the guarded reader
(:meth:`orchestrator.services.sides.side_run.SideRun.read_announced`).
Here both streams are named pipes in a private folder (0700: no other user of the host
can open them), each FIFO bind-mounted into the container by itself (:meth:`JobChannel.
mounts`; read-only: a FIFO on a read-only mount can still be opened for writing) and
readable and writable by the container's user only (0600, its owner, when the host runs
as root; else 0666, reachable through no path but the private folder's). The files the
jobs name (fixtures) are in a folder of their own inside it, mounted read-only. Every
open here is ``O_NOFOLLOW`` and never blocks; the FIFOs are made with ``mkfifo``, which
fails on anything already there.

- ``jobs``: opened here read-write, so opening never blocks and the pipe exists before
  the driver opens it; closing it is the driver's end of input.
- ``results``: opened here read-only and non-blocking before the container starts, so
  the driver's open for writing finds its reader at once; read with ``select`` against
  a deadline. End of file means the driver (or its container) is gone.

A third descriptor, the *wake* pipe, lets another thread (the one that sees the
container stop) end a wait early: a driver that died before it opened ``results``
never sends an end of file.

This is the only module that touches the FIFOs. It never raises for what the driver
does: a receive returns a document, ``TIMED_OUT`` or ``CLOSED``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import stat
import threading
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from orchestrator.core import bounded_json

JOBS = "jobs"
RESULTS = "results"
FILES = "files"
# The container's user (docker/config.py runs every container as 1000:1000).
CONTAINER_UID = 1000
# Readable and writable by the container's user: its own and private when the host can
# give it (root), else everyone's, behind the private folder.
_FIFO_MODE_OWNED = 0o600
_FIFO_MODE_SHARED = 0o666
_FILE_MODE = 0o644
_READ_CHUNK = 1 << 20
# One line at most (a notice is some hundred bytes; room too for the small documents a
# driver without --result-files writes): a line longer than this is refused, its buffer
# dropped.
LINE_BYTES = 1024 * 1024


class Ending(Enum):
    TIMED_OUT = "timed_out"  # the deadline passed with no whole line
    CLOSED = "closed"  # end of file on results, or woken: the driver is gone


TIMED_OUT = Ending.TIMED_OUT
CLOSED = Ending.CLOSED


@dataclass(frozen=True, kw_only=True)
class Received:
    """One result line: parsed, or the text of a line that is not a JSON object."""

    document: dict[str, Any] | None
    problem: str | None = None


def _fifo(fd: int) -> int:
    """``fd`` when it is a FIFO; closed and refused otherwise."""
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"the job channel holds something that is not a FIFO (fd {fd})")
    return fd


class JobChannel:
    """Two FIFOs and the job files in ``folder`` (created here, empty or absent)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.jobs_path = folder / JOBS
        self.results_path = folder / RESULTS
        self.files = folder / FILES
        self._jobs_fd: int | None = None
        self._results_fd: int | None = None
        self._wake_read, self._wake_write = os.pipe()
        self._pending = b""
        self._closed = False
        self._lock = threading.Lock()  # wake() comes from another thread
        folder.mkdir(mode=0o700)  # new: never a folder someone else made
        folder.chmod(0o700)  # mkdir's mode is cut by the umask
        self.files.mkdir(mode=0o755)
        self.files.chmod(0o755)
        owned = os.geteuid() == 0
        for path in (self.jobs_path, self.results_path):
            os.mkfifo(path, 0o600)
            if owned:
                os.chown(path, CONTAINER_UID, CONTAINER_UID)
            path.chmod(_FIFO_MODE_OWNED if owned else _FIFO_MODE_SHARED)

    def mounts(self, target: str) -> tuple[tuple[Path, str], ...]:
        """(host path, container path) of each thing the container mounts under ``target``:
        each FIFO by itself, and the files' folder."""
        return (
            (self.jobs_path, f"{target}/{JOBS}"),
            (self.results_path, f"{target}/{RESULTS}"),
            (self.files, f"{target}/{FILES}"),
        )

    def open(self) -> None:
        """Open both ends on the host side (before the driver starts): never following a
        link, never blocking, and only ever a FIFO."""
        flags = os.O_NOFOLLOW | os.O_CLOEXEC
        self._results_fd = _fifo(os.open(self.results_path, os.O_RDONLY | os.O_NONBLOCK | flags))
        self._jobs_fd = _fifo(os.open(self.jobs_path, os.O_RDWR | os.O_NONBLOCK | flags))
        os.set_blocking(self._jobs_fd, True)  # a job line is written whole

    def put_file(self, name: str, data: bytes) -> Path:
        """A file the jobs can name (a fixture, in :data:`FILES`), readable by the
        container's user; made new (``O_EXCL``), never through a link."""
        path = self.files / name
        temporary = self.files / f".{name}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, _FILE_MODE)
        try:
            os.fchmod(fd, _FILE_MODE)  # the umask cut the mode
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        temporary.replace(path)  # a job never sees half a file
        return path

    def send(self, job: dict[str, Any]) -> None:
        """Write one job line (a few hundred bytes: the pipe's buffer takes it whole)."""
        if self._jobs_fd is None:
            raise RuntimeError("the job channel is not open")
        line = json.dumps(job, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        view = memoryview(line + b"\n")
        while view:
            view = view[os.write(self._jobs_fd, view) :]

    def receive(self, deadline: float) -> Received | Ending:
        """The next result line, or why there is none by ``deadline`` (monotonic)."""
        if self._results_fd is None:
            raise RuntimeError("the job channel is not open")
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return TIMED_OUT
            ready, _, _ = select.select([self._results_fd, self._wake_read], [], [], remaining)
            if self._results_fd in ready:
                # What the driver wrote before it went comes first.
                try:
                    chunk = os.read(self._results_fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    return CLOSED
                self._pending += chunk
                if len(self._pending) > LINE_BYTES and b"\n" not in self._pending:
                    self._pending = b""
                    return Received(document=None, problem=f"a result line over {LINE_BYTES} bytes")
            elif self._wake_read in ready:
                return CLOSED
        line, self._pending = self._pending.split(b"\n", 1)
        try:
            document = bounded_json.loads(line)
        except bounded_json.JsonRefused as error:
            return Received(document=None, problem=f"result line is not JSON: {error}")
        if not isinstance(document, dict):
            return Received(document=None, problem="result line is not a JSON object")
        return Received(document=document)

    def wake(self) -> None:
        """End the current (and every later) wait: the driver is known to be gone."""
        with self._lock:
            if self._closed:
                return
            with contextlib.suppress(OSError):
                os.write(self._wake_write, b"x")

    def end_input(self) -> None:
        """Close the jobs FIFO: the driver reads the end of its input and exits."""
        if self._jobs_fd is not None:
            os.close(self._jobs_fd)
            self._jobs_fd = None

    def close(self) -> None:
        """Close every descriptor (idempotent); the folder is the caller's to remove."""
        self.end_input()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (self._results_fd, self._wake_read, self._wake_write):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._results_fd = None
