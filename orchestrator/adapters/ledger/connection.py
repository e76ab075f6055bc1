"""Connections and transactions: one engine per ledger URL, and the write/read scopes.

SQLite: readers ``BEGIN``, writers ``BEGIN IMMEDIATE`` so that two writers queue on the
lock instead of failing when a read turns into a write. A writer waits for another
writer's lock up to the ledger's lock wait (a minute unless
``$ORCHESTRATOR_LEDGER_WAIT_S`` says otherwise) in short slices, so that Ctrl-C or
SIGTERM is acted on during the wait (``orchestrator.interrupts``); past it the write
fails as one :class:`~orchestrator.errors.LedgerError` and nothing is written. The
file's WAL journal mode is set once, when the ledger is created (``migrate``), never per
connection: switching it takes a lock that SQLite does not wait for, which is how two
first opens used to collide.
PostgreSQL: READ COMMITTED, connections checked before use.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError

from orchestrator.adapters.ledger import locking
from orchestrator.errors import LedgerError, LedgerLocationError


def display_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def parse_url(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise LedgerLocationError(f"ledger URL {url!r} is not a database URL") from None


def sqlite_file(parsed: URL) -> Path | None:
    """The database file of a SQLite URL (None for another back end or in memory)."""
    if parsed.get_backend_name() != "sqlite":
        return None
    if not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def check_sqlite_path(path: Path, shown: str) -> None:
    """Refuse (exit 2) a database path the user cannot have meant: under a file, a
    folder, or in a folder that cannot be written. Creates the folder when missing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise LedgerError(f"ledger {shown}: {path.parent}: {error.strerror}") from None
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        where = f"{blocker} is a file, not a folder" if blocker else error.strerror
        raise LedgerLocationError(f"ledger {shown}: {where}") from None
    if path.is_dir():
        raise LedgerLocationError(f"ledger {shown}: {path} is a folder, not a database file")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise LedgerLocationError(f"ledger {shown}: {path.parent} is not a writable folder")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise LedgerLocationError(f"ledger {shown}: {path} cannot be read and written")


def open_engine(parsed: URL, shown: str, *, lock_wait_s: float = 60.0) -> Engine:
    """An engine for a SQLite or PostgreSQL URL (no connection made yet)."""
    try:
        if parsed.get_backend_name() == "sqlite":
            path = sqlite_file(parsed)
            if path is not None:
                check_sqlite_path(path, shown)
            engine = create_engine(parsed, connect_args={"timeout": lock_wait_s})
            _sqlite_setup(engine, lock_wait_s)
            return engine
        if parsed.get_backend_name() == "postgresql":
            return create_engine(parsed, pool_pre_ping=True)
    except (NoSuchModuleError, ImportError) as error:
        raise LedgerError(f"ledger {shown}: no driver ({error})") from None
    raise LedgerLocationError(f"ledger {shown}: only sqlite and postgresql are supported")


def _sqlite_setup(engine: Engine, lock_wait_s: float) -> None:
    wait_ms = int(lock_wait_s * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (IMMEDIATE for writers).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {wait_ms}")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get("ledger_write", False):
            _begin_immediate(conn, lock_wait_s)
        else:
            conn.exec_driver_sql("BEGIN")


def _begin_immediate(conn: Connection, lock_wait_s: float) -> None:
    """``BEGIN IMMEDIATE``, waiting for another writer in slices (``locking``)."""
    locking.begin_immediate(
        conn.exec_driver_sql, wait_s=lock_wait_s, locked=_is_locked, errors=OperationalError
    )


def _reason(error: BaseException) -> str:
    orig = getattr(error, "orig", None)
    return str(orig).strip().splitlines()[0] if orig else str(error)


def _is_locked(error: BaseException) -> bool:
    return locking.is_locked(_reason(error))


def problem(shown: str, error: DBAPIError) -> LedgerError:
    """One line for a database failure (``locking.failure``)."""
    return locking.failure(shown, _reason(error))


class Transactions:
    """Write and read scopes on one engine; a write scope opened inside another joins it.

    A database failure in a scope leaves it as one :class:`LedgerError` (rolled back)."""

    def __init__(self, engine: Engine, shown: str = "") -> None:
        self.engine = engine
        self.shown = shown or display_url(str(engine.url))
        self._current: Connection | None = None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        if self._current is not None:
            yield self._current
            return
        try:
            with self.engine.connect() as conn:
                conn.execution_options(ledger_write=True)
                with conn.begin():
                    self._current = conn
                    try:
                        yield conn
                    finally:
                        self._current = None
        except DBAPIError as error:
            raise problem(self.shown, error) from None

    @contextmanager
    def read(self) -> Iterator[Connection]:
        if self._current is not None:
            yield self._current
            return
        try:
            with self.engine.connect() as conn, conn.begin():
                yield conn
        except DBAPIError as error:
            raise problem(self.shown, error) from None
