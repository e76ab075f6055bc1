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

Stdlib only, below every other layer (like ``log``): adapters may call
:func:`checkpoint`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class _State:
    installed: bool = False
    first: int | None = None  # the first signal's number
    hits: int = 0
    raised: bool = False  # KeyboardInterrupt was raised for the first signal
    shield_depth: int = 0
    closed: bool = False  # the exit status is decided: later signals are only noted


_state = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    _state.hits += 1
    if _state.first is None:
        _state.first = signum
    if not _state.raised and _state.shield_depth == 0 and not _state.closed:
        _state.raised = True
        raise KeyboardInterrupt


def install() -> None:
    """Route SIGINT and SIGTERM through this module (main thread only; idempotent)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        signal.signal(signum, _handler)
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
        for signum in SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def reset() -> None:
    """Forget what was received (tests that run several commands in one process)."""
    _state.first = None
    _state.hits = 0
    _state.raised = False
    _state.shield_depth = 0
    _state.closed = False
