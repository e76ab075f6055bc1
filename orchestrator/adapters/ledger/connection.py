"""Connections and transactions: one engine per ledger URL, and the write/read scopes.

SQLite: every connection waits up to a minute for a lock (``busy_timeout``); readers
``BEGIN``, writers ``BEGIN IMMEDIATE`` so that two writers queue on the lock instead of
failing when a read turns into a write. The file's WAL journal mode is set once, when
the ledger is created (``migrate``), never per connection: switching it takes a lock
that SQLite does not wait for, which is how two first opens used to collide.
PostgreSQL: READ COMMITTED, connections checked before use.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from orchestrator.errors import LedgerError


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
        raise LedgerError(f"ledger URL {url!r} is not a database URL") from None


def sqlite_file(parsed: URL) -> Path | None:
    """The database file of a SQLite URL (None for another back end or in memory)."""
    if parsed.get_backend_name() != "sqlite":
        return None
    if not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def open_engine(parsed: URL, shown: str) -> Engine:
    """An engine for a SQLite or PostgreSQL URL (no connection made yet)."""
    try:
        if parsed.get_backend_name() == "sqlite":
            path = sqlite_file(parsed)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(parsed, connect_args={"timeout": 60})
            _sqlite_setup(engine)
            return engine
        if parsed.get_backend_name() == "postgresql":
            return create_engine(parsed, pool_pre_ping=True)
    except (NoSuchModuleError, ImportError) as error:
        raise LedgerError(f"ledger {shown}: no driver ({error})") from None
    raise LedgerError(f"ledger {shown}: only sqlite and postgresql are supported")


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (IMMEDIATE for writers).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("ledger_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class Transactions:
    """Write and read scopes on one engine; a write scope opened inside another joins it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._current: Connection | None = None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        if self._current is not None:
            yield self._current
            return
        with self.engine.connect() as conn:
            conn.execution_options(ledger_write=True)
            with conn.begin():
                self._current = conn
                try:
                    yield conn
                finally:
                    self._current = None

    @contextmanager
    def read(self) -> Iterator[Connection]:
        if self._current is not None:
            yield self._current
            return
        with self.engine.connect() as conn, conn.begin():
            yield conn
