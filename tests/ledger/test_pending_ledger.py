"""A replay's ledger (``services/recording.PendingLedger``): opened on a thread while the
run plans and replays, checked before any container starts. An up-to-date SQLite ledger
passes the check without waiting for the store (read with the standard library); any
other ledger is waited for, so what opening raises still stops the run before it starts.

The store's open takes the ledger's schema lock (``<database>.lock``): holding it here
keeps the store from opening, which shows which check waited for it.
"""

from __future__ import annotations

import fcntl
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrator.adapters.ledger import Ledger, sqlite_reads
from orchestrator.adapters.ledger.revisions import REVISIONS
from orchestrator.errors import LedgerError
from orchestrator.services.recording import PendingLedger


@contextmanager
def schema_lock_held(database: Path) -> Iterator[None]:
    with open(database.with_name(database.name + ".lock"), "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def short_lock_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # A check that waits for the store fails after this long instead of passing.
    monkeypatch.setenv("ORCHESTRATOR_LEDGER_WAIT_S", "1")


def test_an_up_to_date_ledger_passes_before_the_store_is_open(tmp_path: Path) -> None:
    database = tmp_path / "ledger.db"
    url = f"sqlite:///{database}"
    Ledger.open(url).close()
    assert sqlite_reads.up_to_date(url)
    with schema_lock_held(database):
        pending = PendingLedger(url)
        pending.check()  # the store is still waiting for the lock
    store = pending.result()  # and opens once it is free
    try:
        assert isinstance(store, Ledger)
        assert store.count_freezes() == 0
    finally:
        pending.close()


def test_an_older_ledger_is_waited_for_before_anything_runs(tmp_path: Path) -> None:
    database = tmp_path / "older.db"
    url = f"sqlite:///{database}"
    Ledger.open(url, target_revision=REVISIONS[-2]).close()
    assert not sqlite_reads.up_to_date(url)
    with schema_lock_held(database):
        pending = PendingLedger(url)
        with pytest.raises(LedgerError, match="schema lock"):
            pending.check()
    pending.close()
    pending = PendingLedger(url)
    pending.check()  # upgraded by the store, then open
    assert sqlite_reads.up_to_date(url)
    pending.close()


@pytest.mark.parametrize("kind", ["missing", "rollback journal", "not a database"])
def test_ledgers_the_fast_check_cannot_read_go_to_the_store(tmp_path: Path, kind: str) -> None:
    database = tmp_path / "ledger.db"
    if kind == "rollback journal":
        Ledger.open(f"sqlite:///{database}").close()
        with sqlite3.connect(database) as connection:
            connection.execute("PRAGMA journal_mode = DELETE")
    elif kind == "not a database":
        database.write_text("not a database\n")
        database.with_name("ledger.db.lock").touch()
    url = f"sqlite:///{database}"
    assert not sqlite_reads.up_to_date(url)
    pending = PendingLedger(url)
    if kind == "not a database":
        with pytest.raises(LedgerError):
            pending.check()
    else:
        pending.check()
        assert sqlite_reads.up_to_date(url)  # the store made it so
    pending.close()


def test_a_store_still_opening_when_the_run_ends_closes_itself(tmp_path: Path) -> None:
    """A run that ends (an error, Ctrl-C) after the fast check, while the store is still
    opening on its thread, leaves no open store behind: the thread closes what it opened."""
    database = tmp_path / "ledger.db"
    url = f"sqlite:///{database}"
    Ledger.open(url).close()
    closed: list[Ledger] = []
    real_close = Ledger.close

    def close(store: Ledger) -> None:
        closed.append(store)
        real_close(store)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Ledger, "close", close)
        with schema_lock_held(database):
            pending = PendingLedger(url)
            pending.check()
            pending.close()  # the run ended; the store is still waiting for the lock
        assert pending.result() is None  # nothing left for anyone to use
        assert len(closed) == 1  # the one it opened, closed by its own thread
