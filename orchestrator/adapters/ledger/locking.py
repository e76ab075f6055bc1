"""How a SQLite writer takes the ledger's lock, and what a failed write says: shared by
the store (``connection``, through SQLAlchemy) and the standard library's recording
(``sqlite_writes``). Standard library only.

A writer asks for ``BEGIN IMMEDIATE`` with a short busy timeout, again and again up to the
ledger's lock wait, and acts on a signal between two asks (``orchestrator.interrupts``):
SQLite's own wait would ignore Ctrl-C for the whole of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from orchestrator import interrupts
from orchestrator.errors import LedgerError

# A writer asks for the lock in slices this long, and acts on a signal between them.
LOCK_SLICE_MS: Final = 200


def begin_immediate(
    execute: Callable[[str], object],
    *,
    wait_s: float,
    locked: Callable[[Exception], bool],
    errors: type[Exception] | tuple[type[Exception], ...],
) -> None:
    """``BEGIN IMMEDIATE`` through ``execute``, waiting for another writer in slices up
    to ``wait_s``; ``errors`` raised by ``execute`` that ``locked`` says are the lock are
    waited out, anything else (or the lock past the wait) is raised."""
    wait_ms = int(wait_s * 1000)
    deadline = time.monotonic() + wait_s
    execute(f"PRAGMA busy_timeout = {min(LOCK_SLICE_MS, wait_ms)}")
    try:
        while True:
            try:
                execute("BEGIN IMMEDIATE")
                return
            except errors as error:
                if not locked(error) or time.monotonic() >= deadline:
                    raise
            interrupts.checkpoint()
    finally:
        execute(f"PRAGMA busy_timeout = {wait_ms}")


def is_locked(reason: str) -> bool:
    """Does the database's message say that another writer holds the lock?"""
    text = reason.lower()
    return "database is locked" in text or "database is busy" in text


def failure(shown: str, reason: str) -> LedgerError:
    """One line for a database failure: what the database said, and that nothing was
    written when another writer held the lock too long."""
    if is_locked(reason):
        return LedgerError(
            f"ledger {shown}: another writer held it locked too long ({reason}); "
            "nothing was written"
        )
    return LedgerError(f"ledger {shown}: {reason}")
