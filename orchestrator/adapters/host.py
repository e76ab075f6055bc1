"""This machine's processes, thin: who we are, and is another process still alive?

``host_id()`` names the place where a pid means something: the machine (its
``machine-id``), its current boot (``boot_id``) and our pid namespace. Two CI runners
that share one Docker host, or two containers cloned from one image, differ in at least
one of them, so neither takes the other's pids for its own.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
from pathlib import Path

from orchestrator.core.owners import ProcessOwner

_SOURCES = (
    Path("/etc/machine-id"),
    Path("/var/lib/dbus/machine-id"),
    Path("/proc/sys/kernel/random/boot_id"),
)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


@functools.cache
def host_id() -> str:
    """16 hex characters: machine id, boot id and pid namespace, hashed (never raises)."""
    machine = _read(_SOURCES[0]) or _read(_SOURCES[1])
    boot = _read(_SOURCES[2])
    try:
        pid_namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_namespace = ""
    if not (machine or boot):
        machine = socket.gethostname()  # no /proc: the best name there is
    seed = f"machine={machine}\nboot={boot}\npidns={pid_namespace}\n"
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), to tell reused pids apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Is the process alive (and, when ``start`` is given, the same process)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if start is not None:
        current = process_start(pid)
        if current is not None and current != start:
            return False
    return True


def owner_alive(owner: ProcessOwner) -> bool:
    return pid_alive(owner.pid, owner.start or None)


def current_owner() -> ProcessOwner:
    """This process, as a later run of the tool will recognise it."""
    pid = os.getpid()
    return ProcessOwner(host_id=host_id(), pid=pid, start=process_start(pid) or "")


# glibc's mallopt parameter (malloc.h): requests at least this big are mapped by
# themselves and given back to the system when freed.
_M_MMAP_THRESHOLD = -3
_MAPPED_FROM_BYTES = 128 * 1024


@functools.cache
def give_back_large_buffers() -> bool:
    """Have glibc map every buffer of 128 KiB or more by itself, so that it is returned to
    the system when freed. By default glibc raises that threshold to the size of the
    largest buffer freed so far (up to 32 MiB): after a side's result file (tens of MB
    for a whole suite) is read and freed, the next ones come from the heap and stay in
    the process's memory when freed; reading both sides' results kept some 150 MB of
    freed memory resident at 100,000 tests (bench/README.md, "Whole suites at scale").
    Fixing the threshold keeps the CLI's resident memory to what it holds. True when
    set; False off glibc (nothing to do there) or when the call is refused."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this interpreter runs on
    except (OSError, AttributeError):  # no mallopt there
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MAPPED_FROM_BYTES))
