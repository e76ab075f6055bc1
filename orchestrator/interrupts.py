"""SIGINT and SIGTERM, one way: the first one interrupts, the rest are noted.

The console script installs :func:`install` before it imports anything else, so an
interruption at any moment (the first imports, planning, the container phase,
recording) takes the same path: ``KeyboardInterrupt`` is raised once in the main
thread, every cleanup runs on the way out, and the command line prints one line and
exits 130 (``orchestrator.cli``). SIGTERM (a CI job being cancelled) is the same as
SIGINT. A second signal never interrupts the cleanup of the first: it is only noted.

:func:`shielded` marks a stretch that must not be cut in the middle (a ledger commit
and the run folder's last writes): a signal that arrives inside it is raised when it
ends, or earlier at a :func:`checkpoint` (a lock wait polls one between attempts).

Where the signal lands matters. Python runs a signal handler between two bytecodes of
the main thread, and an exception raised there can leave a lock held for good: inside
``threading.Condition.__enter__`` after its lock was taken (a later ``Event.set`` from
another thread then waits forever), inside the import machinery's module-lock callback
(every other thread's import then waits forever), or in a ``__del__`` or a weakref
callback (where it is printed and dropped, and the interruption is lost). So the
handler raises only where that cannot happen (:func:`_unsafe`): anywhere else it
leaves the signal pending and looks again a few milliseconds later (``SIGALRM``), by
which time the main thread is back in code that may be interrupted. A wait that could
last (an event, a future's result, a thread's end) is therefore written as a loop of
short waits with a :func:`checkpoint` between them: the main thread spends that wait
inside ``threading``, where the signal is only noted.

Stdlib only, below every other layer (like ``log``): adapters may call
:func:`checkpoint`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
RETRY = signal.SIGALRM  # the timer that looks again for a place to raise
RETRY_S = 0.01

# Code in which an exception raised by a signal handler may leave a lock held or be
# dropped: the import machinery, the stdlib's locks and queues, logging, weakref
# callbacks, and the libraries that hold locks of their own around short sections.
_STDLIB = os.path.dirname(threading.__file__)
_UNSAFE_FILES = frozenset(
    os.path.join(_STDLIB, name)
    for name in (
        "threading.py",
        "queue.py",
        "weakref.py",
        "_weakrefset.py",
        os.path.join("logging", "__init__.py"),
        os.path.join("logging", "handlers.py"),
        os.path.join("concurrent", "futures", "_base.py"),
        os.path.join("concurrent", "futures", "thread.py"),
    )
)
_UNSAFE_PACKAGES = (f"{os.sep}structlog{os.sep}", f"{os.sep}urllib3{os.sep}")
# Callers whose exceptions are printed and ignored: weakref callbacks and finalizers.
_DROPPING_FILES = frozenset(os.path.join(_STDLIB, name) for name in ("weakref.py",))


class _State:
    # A plain class: this module is imported first on every start, and ``dataclasses``
    # (with ``inspect``) would be most of its import time.
    __slots__ = ("closed", "first", "hits", "installed", "raised", "shield_depth")

    def __init__(self) -> None:
        self.installed = False
        self.first: int | None = None  # the first signal's number
        self.hits = 0
        self.raised = False  # KeyboardInterrupt was raised for the first signal
        self.shield_depth = 0
        self.closed = False  # the exit status is decided: later signals are only noted


_state = _State()


def _unsafe(frame: FrameType | None) -> bool:
    """Would an exception raised in ``frame`` risk a lock held for good (the innermost
    frame is code that takes locks), or be dropped (a finalizer or a weakref callback
    is running, further up)?"""
    if frame is None:
        return False
    name = frame.f_code.co_filename
    if (
        name.startswith("<frozen importlib")
        or name in _UNSAFE_FILES
        or any(package in name for package in _UNSAFE_PACKAGES)
    ):
        return True
    outer: FrameType | None = frame
    while outer is not None:
        if outer.f_code.co_name == "__del__" or outer.f_code.co_filename in _DROPPING_FILES:
            return True
        outer = outer.f_back
    return False


def _raise_if_due(frame: FrameType | None) -> None:
    """Raise the pending interruption here, or look again shortly when here is unsafe."""
    if _state.raised or _state.shield_depth > 0 or _state.closed or _state.first is None:
        return
    if _unsafe(frame):
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
        return
    _state.raised = True
    raise KeyboardInterrupt


def _handler(signum: int, frame: FrameType | None) -> None:
    _state.hits += 1
    if _state.first is None:
        _state.first = signum
    _raise_if_due(frame)


def _retry(signum: int, frame: FrameType | None) -> None:
    _raise_if_due(frame)


def _dropped(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: an interruption of ours raised where Python prints and drops
    exceptions (a library's weakref callback, which no frame shows :func:`_unsafe`) was
    not raised after all: look again shortly, once that callback returned."""
    if unraisable.exc_type is KeyboardInterrupt and _state.raised and not _state.closed:
        _state.raised = False
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
        return
    _previous_unraisablehook(unraisable)


_previous_unraisablehook = sys.unraisablehook


def install() -> None:
    """Route SIGINT and SIGTERM through this module (main thread only; idempotent)."""
    global _previous_unraisablehook  # the hook chains to the one it replaced
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        signal.signal(signum, _handler)
    signal.signal(RETRY, _retry)
    if sys.unraisablehook is not _dropped:
        _previous_unraisablehook = sys.unraisablehook
        sys.unraisablehook = _dropped
    _state.installed = True


def installed() -> bool:
    return _state.installed


def note(signum: int) -> None:
    """Record a signal another handler took (and raised for) as this module's first."""
    _state.hits += 1
    if _state.first is None:
        _state.first = signum
    _state.raised = True


def received() -> int | None:
    """The number of the first SIGINT/SIGTERM this process got, or None."""
    return _state.first


def signal_name(signum: int | None = None) -> str:
    number = _state.first if signum is None else signum
    if number is None:
        return "interrupt"
    return signal.Signals(number).name


def pending() -> bool:
    """A signal came in and was not raised yet (it arrived inside a shield)."""
    return _state.first is not None and not _state.raised


def take_pending() -> bool:
    """Take a pending interruption as handled by the caller (a cleanup that will end in
    exit 130 anyway); True when there was one."""
    if not pending():
        return False
    _state.raised = True
    return True


def checkpoint() -> None:
    """Raise the pending interruption now (a safe point inside a shield, or a wait loop).
    Only in the main thread: another thread's wait is left to its own end."""
    if threading.current_thread() is not threading.main_thread():
        return
    if pending() and not _state.closed:
        _state.raised = True
        raise KeyboardInterrupt


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Signals inside the block are held until it ends (or a :func:`checkpoint`).

    Signals reach the main thread only: in any other thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.shield_depth += 1
    try:
        yield
    finally:
        _state.shield_depth -= 1
    if _state.shield_depth == 0:
        checkpoint()


def close() -> None:
    """The process is on its way out with its status decided: signals are ignored from
    now on. Ignored, not handled: the interpreter's own finalization resets handlers
    (not ignored signals) to their default, which would let a late SIGTERM kill it."""
    if not _state.installed:
        return
    _state.closed = True
    if threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum in (*SIGNALS, RETRY):
            signal.signal(signum, signal.SIG_IGN)


def reset() -> None:
    """Forget what was received (tests that run several commands in one process)."""
    _state.first = None
    _state.hits = 0
    _state.raised = False
    _state.shield_depth = 0
    _state.closed = False
    if _state.installed and threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)
