"""Counting dependency calls made by a test body.

One process-wide meter, switched on only while a test's call phase runs. The audit
hook and the `time.sleep` wrapper are installed once, before any test module is
imported, and do nothing while the meter is off: the hook's first statement is the
cheap `active` check, then one dict lookup on the event name.

A file open counts when the test or the code under test made it, not when the
interpreter's own machinery did on its behalf (docs/lanes.md, "What a call budget
counts"): an import reading source or bytecode; linecache reading a source file for a
traceback, `inspect.getsource`, a warning's line or pytest's report (its two entry points
are wrapped: while a thread is inside them, its opens are linecache's); pdb reading its
rc files (`~/.pdbrc`, `./.pdbrc`) after its "pdb.Pdb" audit event, as doctest's runner
makes its debugger; Hypothesis reading (or writing) its table of Unicode categories, once
per process. Those reads depend on what ran earlier in the process (a source
another test's traceback already cached is not read again), so counting them would make
a test's counts depend on its neighbours. On the way of an open the code makes, both
rules cost two truth tests.
"""

from __future__ import annotations

import functools
import ipaddress
import linecache
import socket
import sys
import time
from _thread import get_ident
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
    # Not a dependency: pdb making a debugger, just before it reads its rc files.
    "pdb.Pdb": "<debugger>",
}
_DEBUGGER: Final = "<debugger>"

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

# linecache's entry points: every source read for a traceback, `inspect.getsource`, a
# warning's line or pytest's report goes through one of them (`getline` and doctest's
# own patched `getlines` call them by name), `tokenize.open` and loader reads included.
_SOURCE_READERS: Final = ("getlines", "updatecache")
# pdb reads ~/.pdbrc and ./.pdbrc whenever a debugger is made (doctest's runner makes one
# for every doctest), right after its "pdb.Pdb" audit event.
_PDB_RC: Final = ".pdbrc"
_PDB_RC_ANYWHERE: Final = "/.pdbrc"


class NetworkDenied(OSError):
    """Raised into a test body that tries to reach a non-local host.

    A property must be pure; the replay sandbox denies the network, and the probe
    denies it too so that a run outside the sandbox behaves the same.
    """


class Meter:
    """Per-process call counts for the test body currently running."""

    __slots__ = ("active", "counts", "debugger_made", "network", "reading_source")

    def __init__(self) -> None:
        self.active = False
        self.counts: dict[str, int] = {}
        self.network: list[str] = []
        # Thread id -> how deep it is in linecache's entry points (empty almost always).
        self.reading_source: dict[int, int] = {}
        # The test body made a pdb debugger (doctest's runner does): its rc files follow.
        self.debugger_made = False

    def start(self, extra_names: Iterable[str]) -> None:
        counts = dict.fromkeys(STABLE_DEPENDENCIES, 0)
        for name in extra_names:
            counts[name] = 0
        self.counts = counts
        self.network = []
        self.debugger_made = False
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
        path = args[0]
        if isinstance(path, int):
            return
        if meter.reading_source and get_ident() in meter.reading_source:
            return  # linecache reading a source file, for a traceback or inspect
        if meter.debugger_made and _is_pdb_rc(path):
            return  # pdb reading its rc files as it makes a debugger
        if (_MODULE_LOCKS is None or _MODULE_LOCKS) and _opened_by_import():
            return
    elif dependency == "socket":
        target = _remote_target(event, args)
        if target is not None:
            meter.counts["socket"] += 1
            meter.network.append(target)
            raise NetworkDenied(f"replay probe: network access denied ({target})")
    elif dependency == _DEBUGGER:
        meter.debugger_made = True
        return
    elif event == "os.posix_spawn" and _caller_file(2).endswith(_SUBPROCESS_SUFFIX):
        return  # subprocess.Popen already counted this spawn
    meter.counts[dependency] += 1


def _is_pdb_rc(path: object) -> bool:
    return isinstance(path, str) and (path.endswith(_PDB_RC_ANYWHERE) or path == _PDB_RC)


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


# The machine's own name (a container's is its id). Looking it up is no network use:
# `socket.getfqdn()` asks for it (and through it `email.utils.make_msgid()`, smtplib's
# HELO name), and the answer is this machine's, not another host's service.
_OWN_HOST: Final = socket.gethostname().strip().lower()


def is_local_host(host: str | bytes, own_host: str = _OWN_HOST) -> bool:
    """True for loopback names and addresses, the empty/unspecified host and the
    machine's own name (`own_host`, compared without case)."""
    name = _text(host).strip().strip("[]").lower()
    if name in ("", "localhost") or name.endswith(".localhost"):
        return True
    if own_host and name == own_host:
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


def reading_source(real: Callable[..., Any]) -> Callable[..., Any]:
    """``real`` (one of linecache's entry points), with the opens the calling thread makes
    inside it left out of the counts."""

    @functools.wraps(real)
    def read(*args: Any, **kwargs: Any) -> Any:
        readers = METER.reading_source
        thread = get_ident()
        readers[thread] = readers.get(thread, 0) + 1
        try:
            return real(*args, **kwargs)
        finally:
            depth = readers.pop(thread) - 1
            if depth:
                readers[thread] = depth

    read.probe_real = real  # type: ignore[attr-defined]
    return read


# Test machinery outside the standard library that reads a file once per process,
# whichever test first needs it: Hypothesis's tables of Unicode categories and of what
# a codec encodes (read from its storage folder, else computed and written there, by the
# first test that draws text).
# Wrapped like linecache's entry points once the module is loaded (a test module's
# import loads it).
_LIBRARY_READERS: Final = (
    ("hypothesis.internal.charmap", "charmap"),
    ("hypothesis.internal.charmap", "intervals_from_codec"),
)


def wrap_library_readers() -> None:
    """Wrap the entry points of :data:`_LIBRARY_READERS` whose module is loaded (cheap:
    a lookup each; never stacked)."""
    for module_name, name in _LIBRARY_READERS:
        module = sys.modules.get(module_name)
        entry = getattr(module, name, None) if module is not None else None
        if entry is not None and not hasattr(entry, "probe_real"):
            setattr(module, name, reading_source(entry))


_installed = False


def install() -> None:
    """Install the audit hook, the sleep wrapper and linecache's wrappers (idempotent per
    module instance; a wrapper from an earlier import of this module is unwrapped, never
    stacked)."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True
    current = time.sleep
    if not isinstance(current, CountedSleep):
        real: _Sleep = getattr(current, "probe_real_sleep", current)
        time.sleep = CountedSleep(real)
    for name in _SOURCE_READERS:
        entry = getattr(linecache, name)
        setattr(linecache, name, reading_source(getattr(entry, "probe_real", entry)))
