"""The read commands' path on a SQLite ledger: the standard library's ``sqlite3``, no
SQLAlchemy (whose import is most of a read command's start-up).

It answers only when it can answer exactly as the store would: a ``sqlite:///PATH`` URL
whose file exists, can be read and written in a writable folder (what the store checks
on open), is in WAL mode and is at this tool's schema revision (``revisions.HEAD``, read in
the same transaction as the rows). Otherwise, and on any database error, it returns None
and the caller opens the :class:`~orchestrator.adapters.ledger.store.Ledger`, which
creates, upgrades or refuses the ledger and reports errors as it always has.

The queries are the store's (``statements.freeze_select``, ``Ledger.infra_entries``),
written out; the rows go through the same mapping (``rows``), after the date-time
columns are read as SQLAlchemy reads them (naive UTC text, then UTC).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from orchestrator.adapters.ledger import rows
from orchestrator.adapters.ledger.revisions import HEAD
from orchestrator.adapters.ledger.values import FreezeRow, InfraEntry
from orchestrator.adapters.ledger_location import lock_wait_s as lock_wait_from

# The URLs SQLAlchemy reads as a SQLite file with the standard driver and no options.
_SQLITE_FILE_URL = re.compile(r"sqlite(?:\+pysqlite)?:///(?P<database>[^?]+)")
# What SQLAlchemy's SQLite DATETIME stores (and compares as text).
_STORED_DATETIME = "%04d-%02d-%02d %02d:%02d:%02d.%06d"

FREEZE_COLUMNS = ", ".join(
    [
        *rows.FREEZE_SUMMARY_COLUMNS,
        *(
            f"{column} IS NOT NULL AS {label}"
            for column, label in zip(
                rows.FREEZE_PAYLOAD_COLUMNS, rows.FREEZE_PAYLOAD_FLAGS, strict=True
            )
        ),
    ]
)
_DATETIME_COLUMNS = frozenset({"opened_at", "expires_at", "queued_at"})


def live_freezes(url: str, *, expired_at: datetime | None = None) -> list[FreezeRow] | None:
    """``Ledger.live_freezes(expired_at=...)`` without payloads; None: ask the store."""
    query = f"SELECT {FREEZE_COLUMNS} FROM freezes"
    parameters: tuple[str, ...] = ()
    if expired_at is None:
        query += " ORDER BY id"
    else:
        query += " WHERE expires_at <= ? ORDER BY expires_at, id"
        parameters = (stored(expired_at),)
    found = _read(url, query, parameters)
    return None if found is None else [rows.freeze_row(row) for row in found]


def infra_entries(url: str) -> list[InfraEntry] | None:
    """``Ledger.infra_entries()``; None: ask the store."""
    found = _read(url, "SELECT * FROM infra_queue ORDER BY id", ())
    return None if found is None else [rows.infra_entry(row) for row in found]


def up_to_date(url: str) -> bool:
    """The store's open would find nothing to do: a plain SQLite file that can be read and
    written, in WAL mode, at this tool's revision (a replay checks its ledger with this
    before any container starts, and opens the store while they run)."""
    return _read(url, "SELECT 1", ()) is not None


def sqlite_path(url: str) -> Path | None:
    """The file of a plain ``sqlite:///PATH`` URL, as SQLAlchemy reads it; None for any
    other URL (another back end, in memory, options, another driver)."""
    matched = _SQLITE_FILE_URL.fullmatch(url)
    if matched is None:
        return None
    database = unquote(matched["database"])
    return None if database == ":memory:" else Path(database)


def stored(moment: datetime) -> str:
    """A timezone-aware moment as the ledger stores it (``schema.UTCDateTime``)."""
    if moment.tzinfo is None:
        raise ValueError("ledger datetimes must be timezone-aware")
    utc = moment.astimezone(UTC)
    return _STORED_DATETIME % (
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond
    )  # fmt: skip


def usable(path: Path) -> bool:
    """What the store's open accepts without creating or refusing anything."""
    folder = path.parent
    return (
        path.is_file()
        and os.access(path, os.R_OK | os.W_OK)
        and os.access(folder, os.W_OK | os.X_OK)
        and path.with_name(path.name + ".lock").is_file()
    )


def _read(url: str, query: str, parameters: Sequence[Any]) -> list[dict[str, Any]] | None:
    path = sqlite_path(url)
    if path is None or not usable(path):
        return None
    try:
        with _transaction(path) as cursor:
            if not at_head(cursor):
                return None
            cursor.execute(query, parameters)
            names = [column[0] for column in cursor.description]
            return [convert_row(names, values) for values in cursor.fetchall()]
    except sqlite3.Error:
        return None


@contextmanager
def _transaction(path: Path) -> Iterator[sqlite3.Cursor]:
    """One read transaction, as the store's reader opens it (``BEGIN``, the lock wait)."""
    wait_s = lock_wait_from(os.environ)
    connection = sqlite3.connect(path, timeout=wait_s, isolation_level=None)
    with closing(connection), closing(connection.cursor()) as cursor:
        cursor.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        cursor.execute("BEGIN")
        try:
            yield cursor
        finally:
            cursor.execute("ROLLBACK")


def at_head(cursor: sqlite3.Cursor) -> bool:
    """In WAL mode and stamped at this tool's revision: nothing for the store to do."""
    (journal,) = cursor.execute("PRAGMA journal_mode").fetchone()
    if journal != "wal":
        return False
    stamped = cursor.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ).fetchone()
    if stamped is None:
        return False
    revision = cursor.execute("SELECT version_num FROM alembic_version").fetchone()
    return revision is not None and revision[0] == HEAD


def convert_row(names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    """A row by column name, its date-times read as the store reads them."""
    row = dict(zip(names, values, strict=True))
    for name in _DATETIME_COLUMNS & row.keys():
        if row[name] is not None:  # SQLAlchemy's SQLite DATETIME, then schema.UTCDateTime
            row[name] = datetime.fromisoformat(row[name]).replace(tzinfo=UTC)
    return row
