"""Counting dependency calls made by a test body.

One process-wide meter, switched on only while a test's call phase runs. The audit
hook and the `time.sleep` wrapper are installed once, before any test module is
imported, and do nothing while the meter is off: the hook's first statement is the
cheap `active` check, then one dict lookup on the event name.

A file open counts when the test or the code under test made it, not when the
interpreter's own machinery did on its behalf (docs/lanes.md, "What a call budget
counts"): an import reading source or bytecode, linecache reading a source file for a
traceback, `inspect.getsource` or a warning's line, pdb reading its rc files, doctest's
runner. Those reads depend on what ran earlier in the process (a source another test's
traceback already cached is not read again), so counting them would make a test's
counts depend on its neighbours.
"""

from __future__ import annotations

import ipaddress
import linecache
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, Final, SupportsIndex

# Dependencies every result lists, with 0 when untouched, so downstream set
# comparisons never see a missing key.
STABLE_DEPENDENCIES: Final = ("open", "sleep", "socket", "subprocess", "sqlite", "http")
CLOCK: Final = "clock"
RESERVED_NAMES: Final = frozenset((*STABLE_DEPENDENCIES, CLOCK))

# Audit event -> stable dependency name (https://docs.python.org/3/library/audit_events.html).
EVENT_DEPENDENCY: Final[dict[str, str]] = {
    "open": "open",
    "socket.connect": "socket",
    "socket.sendto": "socket",
    "socket.sendmsg": "socket",
    "socket.getaddrinfo": "socket",
    "socket.gethostbyname": "socket",
    "socket.gethostbyaddr": "socket",
    "socket.getnameinfo": "socket",
    "subprocess.Popen": "subprocess",
    "os.system": "subprocess",
    "os.exec": "subprocess",
    "os.posix_spawn": "subprocess",
    "os.spawn": "subprocess",
    "os.fork": "subprocess",
    "os.forkpty": "subprocess",
    "sqlite3.connect": "sqlite",
    "http.client.connect": "http",
    "urllib.Request": "http",
}

_ADDRESS_EVENTS: Final = frozenset(("socket.connect", "socket.sendto", "socket.sendmsg"))
# How far up the stack an `open` is attributed to the import machinery. The source
# and bytecode reads of an import come from a frozen importlib frame directly, or a
# few frames below it when a loader such as pytest's assertion rewriter reads them.
_IMPORT_SCAN_DEPTH: Final = 8
# importlib keeps a per-module lock in this dict only while that module is being
# imported; when it is empty no import is running and the stack scan can be skipped.
_MODULE_LOCKS: Final[dict[str, Any] | None] = getattr(
    sys.modules.get("_frozen_importlib"), "_module_locks", None
)
_SUBPROCESS_SUFFIX: Final = "subprocess.py"

# What the frames between an `open` and the code that asked for it are. The standard
# library is walked through (pathlib, io, tokenize, json: the code's own call, whoever
# opened the file); a frame in one of the machinery modules makes the read the
# machinery's; the first frame outside the standard library (the test, the code under
# test, a third-party library, a doctest's example) makes it the code's.
_CODE: Final = 0
_STDLIB: Final = 1
_MACHINERY: Final = 2
# linecache serves tracebacks, inspect.getsource, warnings and pytest's reports (its
# tokenize.open and loader reads included); pdb and bdb read ~/.pdbrc and ./.pdbrc when
# doctest's runner builds its debugger; doctest is the runner around a doctest's examples.
_MACHINERY_FILES: Final = frozenset(("linecache.py", "pdb.py", "bdb.py", "doctest.py"))
_THIRD_PARTY_DIRS: Final = ("site-packages", "dist-packages")
# The standard library's folder as this interpreter writes it in code objects.
_STDLIB_DIR: Final = os.path.dirname(linecache.getlines.__code__.co_filename) + os.sep
# co_filename -> kind, learned once per file: the walk is one dict lookup per frame.
_FILE_KINDS: Final[dict[str, int]] = {}


class NetworkDenied(OSError):
    """Raised into a test body that tries to reach a non-local host.

    A property must be pure; the replay sandbox denies the network, and the probe
    denies it too so that a run outside the sandbox behaves the same.
    """


class Meter:
    """Per-process call counts for the test body currently running."""

    __slots__ = ("active", "counts", "network")

    def __init__(self) -> None:
        self.active = False
        self.counts: dict[str, int] = {}
        self.network: list[str] = []

    def start(self, extra_names: Iterable[str]) -> None:
        counts = dict.fromkeys(STABLE_DEPENDENCIES, 0)
        for name in extra_names:
            counts[name] = 0
        self.counts = counts
        self.network = []
        self.active = True

    def stop(self) -> None:
        self.active = False

    def add(self, name: str) -> None:
        if self.active:
            self.counts[name] = self.counts.get(name, 0) + 1


METER: Final = Meter()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    meter = METER
    if not meter.active:
        return
    dependency = EVENT_DEPENDENCY.get(event)
    if dependency is None:
        return
    if dependency == "open":
        # An integer is an existing descriptor being wrapped (pipes, fdopen), not a file opened.
        if isinstance(args[0], int):
            return
        if (_MODULE_LOCKS is None or _MODULE_LOCKS) and _opened_by_import():
            return
        if _opened_by_machinery():
            return
    elif dependency == "socket":
        target = _remote_target(event, args)
        if target is not None:
            meter.counts["socket"] += 1
            meter.network.append(target)
            raise NetworkDenied(f"replay probe: network access denied ({target})")
    elif event == "os.posix_spawn" and _caller_file(2).endswith(_SUBPROCESS_SUFFIX):
        return  # subprocess.Popen already counted this spawn
    meter.counts[dependency] += 1


def _opened_by_import() -> bool:
    frame = sys._getframe(2)  # 0: here, 1: _audit, 2: the code that called open
    for _ in range(_IMPORT_SCAN_DEPTH):
        filename = frame.f_code.co_filename
        if filename.startswith("<frozen "):
            return True
        back = frame.f_back
        if back is None:
            return False
        frame = back
    return False


def _opened_by_machinery() -> bool:
    """True when a machinery module stands between this `open` and the first frame of
    the test or the code under test (so the code did not ask for this file)."""
    kinds = _FILE_KINDS
    frame: Any = sys._getframe(2)  # 0: here, 1: _audit, 2: the code that called open
    while frame is not None:
        filename = frame.f_code.co_filename
        kind = kinds.get(filename)
        if kind is None:
            kind = kinds[filename] = file_kind(filename)
        if kind == _CODE:
            return False
        if kind == _MACHINERY:
            return True
        frame = frame.f_back
    return False


def file_kind(filename: str) -> int:
    """Whether a code object's file is the code's, the standard library's, or one of
    the machinery modules whose reads are not the code's."""
    if filename.startswith("<frozen "):
        return _STDLIB
    if not filename.startswith(_STDLIB_DIR):
        return _CODE  # the tests, the code under test, site-packages, "<doctest ...>"
    inside = filename[len(_STDLIB_DIR) :]
    if inside.split(os.sep, 1)[0] in _THIRD_PARTY_DIRS:
        return _CODE
    return _MACHINERY if inside in _MACHINERY_FILES else _STDLIB


def _caller_file(depth: int) -> str:
    return sys._getframe(depth + 1).f_code.co_filename


def _remote_target(event: str, args: tuple[Any, ...]) -> str | None:
    """A description of the non-local host this event reaches, or None if local."""
    if event in _ADDRESS_EVENTS:
        address = args[1] if len(args) > 1 else None
        # AF_UNIX paths, netlink pairs and missing addresses never leave the machine.
        if not isinstance(address, tuple) or not address:
            return None
        host = address[0]
        if not isinstance(host, str | bytes) or is_local_host(host):
            return None
        port = address[1] if len(address) > 1 else None
        return f"{event} {_text(host)}:{port}"
    subject = args[0] if args else None
    if isinstance(subject, tuple):  # getnameinfo takes a socket address
        subject = subject[0] if subject else None
    if subject is None or (isinstance(subject, str | bytes) and is_local_host(subject)):
        return None
    return f"{event} {_text(subject)}"


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    return str(value)


def is_local_host(host: str | bytes) -> bool:
    """True for loopback names and addresses (and the empty/unspecified host)."""
    name = _text(host).strip().strip("[]").lower()
    if name in ("", "localhost") or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


_Sleep = Callable[[float | SupportsIndex], None]


class CountedSleep:
    """`time.sleep` that counts calls made while the meter is on."""

    __slots__ = ("probe_real_sleep",)

    def __init__(self, real: _Sleep) -> None:
        self.probe_real_sleep = real

    def __call__(self, seconds: float | SupportsIndex, /) -> None:
        METER.add("sleep")
        self.probe_real_sleep(seconds)


_installed = False


def install() -> None:
    """Install the audit hook and the sleep wrapper (idempotent per module instance)."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True
    current = time.sleep
    if not isinstance(current, CountedSleep):
        # A wrapper from an earlier import of this module is unwrapped, never stacked.
        real: _Sleep = getattr(current, "probe_real_sleep", current)
        time.sleep = CountedSleep(real)
