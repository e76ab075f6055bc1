"""Signals while containers run and while they are removed.

:func:`terminate_as_interrupt` makes a SIGTERM (a CI cancelling the job) clean up as
Ctrl-C does; :class:`DeferredSignals` keeps a Ctrl-C or SIGTERM from cutting a cleanup
short: it is noted, and the caller ends in
:class:`~orchestrator.errors.Interrupted` once everything is removed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from orchestrator import interrupts
from orchestrator.log import get_logger

log = get_logger(__name__)


class DeferredSignals:
    """While cleaning up, Ctrl-C (or SIGTERM) is noted instead of interrupting the cleanup."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, *, interrupted: bool = False) -> None:
        self.hits = 0
        # An interrupted run ends in Interrupted (exit 130) right after this cleanup: a
        # further Ctrl-C or SIGTERM would only turn that exit into death by signal.
        self.interrupted = interrupted
        self._previous: dict[int, Any] = {}

    def _note(self, signum: int, frame: FrameType | None) -> None:
        # Nothing that takes a lock here (no logging): the main thread may hold it.
        self.hits += 1
        interrupts.note(signum)  # the command line names it in its one line

    def __enter__(self) -> DeferredSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._note)
            if interrupts.take_pending():  # one that came in where raising was unsafe
                self.hits += 1
        return self

    def __exit__(self, *exc: object) -> None:
        leaving = self.interrupted or self.hits > 0
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if leaving else previous)
        if self.hits:
            log.warning("interrupt.deferred", signals=self.hits, detail="noted during cleanup")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While sides run (or a replay is reproduced), SIGTERM (a CI cancelling the job) cleans
    up like Ctrl-C.

    The command line's own handlers (``orchestrator.interrupts``) already do so, once."""
    if threading.current_thread() is not threading.main_thread() or interrupts.installed():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
