"""Side screening evidence in the ledger's ``side_evidence`` table (r0006), so that CI
jobs sharing a ledger share it.

A plain SQLite file at this tool's revision is read and written with the standard
library (``sqlite_reads``: no SQLAlchemy in a replay that records the same way); a
PostgreSQL ledger through SQLAlchemy's engine for its URL. The entries' bytes are
:func:`orchestrator.adapters.evidence_cache.encode_entry`'s, checked by digest when read.
A ledger without the table (not yet upgraded: the store upgrades it when it records) has
no entry and takes none. One key is written once (``ON CONFLICT DO NOTHING``); after a
write the least recently used rows (a hit marks its row used) are removed until the
table holds at most ``max_bytes``. A database failure is a :class:`LedgerError`, which the
caller turns into "no reuse", never into a failed run.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from orchestrator.adapters.evidence_cache import DEFAULT_MAX_BYTES, encode_entry
from orchestrator.adapters.ledger.sqlite_reads import at_head, sqlite_path, stored, usable
from orchestrator.adapters.ledger_location import lock_wait_s as lock_wait_from
from orchestrator.core.side_evidence import SideEvidence
from orchestrator.errors import LedgerError

SIZE_ENV_VAR = "ORCHESTRATOR_EVIDENCE_LEDGER_BYTES"

_HAS_TABLE: Final = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'side_evidence'"
_SELECT: Final = "SELECT entry FROM side_evidence WHERE key = ?"
_TOUCH: Final = "UPDATE side_evidence SET used_at = ? WHERE key = ?"
_INSERT: Final = (
    "INSERT INTO side_evidence (key, scope, side, rev, run_id, stored_at, used_at, size, entry) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING"
)
_TOTAL: Final = "SELECT COALESCE(SUM(size), 0) FROM side_evidence"
_OLDEST: Final = "SELECT key, size FROM side_evidence ORDER BY used_at, key"
_DELETE: Final = "DELETE FROM side_evidence WHERE key = ?"


def max_bytes_from(env: dict[str, str] | os._Environ[str]) -> int:
    """``$ORCHESTRATOR_EVIDENCE_LEDGER_BYTES`` when a positive whole number, else 2 GiB."""
    text = env.get(SIZE_ENV_VAR, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_BYTES


@dataclass(frozen=True, kw_only=True)
class LedgerStore:
    """Entries in the ledger at ``url`` (see the module)."""

    url: str
    max_bytes: int = DEFAULT_MAX_BYTES

    @property
    def name(self) -> str:
        from orchestrator.adapters.ledger.sqlite_writes import shown_url

        return f"ledger {shown_url(self.url) or _without_password(self.url)}"

    def load(self, key: str) -> bytes | None:
        path = sqlite_path(self.url)
        if path is not None:
            return self._sqlite_load(path, key)
        loaded = self._alchemy(lambda conn: _alchemy_load(conn, key))
        return loaded if isinstance(loaded, bytes) else None

    def save(self, entry: SideEvidence, *, now: datetime | None = None) -> bool:
        data = encode_entry(entry)
        if len(data) > self.max_bytes:
            return False
        moment = now or datetime.now(UTC)
        path = sqlite_path(self.url)
        if path is not None:
            return self._sqlite_save(path, entry, data, moment)
        return bool(self._alchemy(lambda conn: _alchemy_save(conn, entry, data, moment, self)))

    # -- SQLite, with the standard library -------------------------------------------

    def _sqlite_load(self, path: Path, key: str) -> bytes | None:
        if not usable(path):
            return None
        with _sqlite(path, write=False) as cursor:
            if not at_head(cursor) or cursor.execute(_HAS_TABLE).fetchone() is None:
                return None
            row = cursor.execute(_SELECT, (key,)).fetchone()
        if row is None:
            return None
        try:  # a hit is used: the last to be evicted (best effort: a reader may not write)
            with _sqlite(path, write=True) as cursor:
                cursor.execute(_TOUCH, (stored(datetime.now(UTC)), key))
        except LedgerError:
            pass
        return bytes(row[0])

    def _sqlite_save(self, path: Path, entry: SideEvidence, data: bytes, now: datetime) -> bool:
        if not usable(path):
            return False
        with _sqlite(path, write=True) as cursor:
            if not at_head(cursor) or cursor.execute(_HAS_TABLE).fetchone() is None:
                return False
            cursor.execute(_INSERT, _row(entry, data, stored(now)))
            written = cursor.rowcount == 1
            _evict(cursor, self.max_bytes)
        return written

    # -- PostgreSQL (and any other URL), through SQLAlchemy ---------------------------

    def _alchemy(self, work: Any) -> Any:
        from sqlalchemy import inspect
        from sqlalchemy.exc import DBAPIError

        from orchestrator.adapters.ledger.connection import open_engine, parse_url, problem

        shown = _without_password(self.url)
        engine = open_engine(parse_url(self.url), shown, lock_wait_s=lock_wait_from(os.environ))
        try:
            with engine.connect() as conn, conn.begin():
                if not inspect(conn).has_table("side_evidence"):
                    return None
                return work(conn)
        except DBAPIError as error:
            raise problem(shown, error) from None
        finally:
            engine.dispose()


def _row(entry: SideEvidence, data: bytes, now: Any) -> tuple[Any, ...]:
    return (entry.key, entry.scope, entry.side, entry.rev, entry.run_id, now, now, len(data), data)


def _evict(cursor: Any, max_bytes: int) -> None:
    (total,) = cursor.execute(_TOTAL).fetchone()
    if total <= max_bytes:
        return
    for key, size in cursor.execute(_OLDEST).fetchall():
        if total <= max_bytes:
            break
        cursor.execute(_DELETE, (key,))
        total -= size


def _alchemy_load(conn: Any, key: str) -> bytes | None:
    from sqlalchemy import select, update

    from orchestrator.adapters.ledger.schema import SIDE_EVIDENCE as TABLE

    row = conn.execute(select(TABLE.c.entry).where(TABLE.c.key == key)).first()
    if row is None:
        return None
    conn.execute(update(TABLE).where(TABLE.c.key == key).values(used_at=datetime.now(UTC)))
    return bytes(row[0])


def _alchemy_save(
    conn: Any, entry: SideEvidence, data: bytes, now: datetime, store: LedgerStore
) -> bool:
    from sqlalchemy import delete, func, select
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    from orchestrator.adapters.ledger.schema import SIDE_EVIDENCE as TABLE

    values = dict(
        zip(
            ("key", "scope", "side", "rev", "run_id", "stored_at", "used_at", "size", "entry"),
            _row(entry, data, now),
            strict=True,
        )
    )
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    statement = insert(TABLE).values(**values).on_conflict_do_nothing().returning(TABLE.c.key)
    written = conn.execute(statement).first() is not None
    total = conn.execute(select(func.coalesce(func.sum(TABLE.c.size), 0))).scalar() or 0
    if total > store.max_bytes:
        rows = conn.execute(
            select(TABLE.c.key, TABLE.c.size).order_by(TABLE.c.used_at, TABLE.c.key)
        ).all()
        for key, size in rows:
            if total <= store.max_bytes:
                break
            conn.execute(delete(TABLE).where(TABLE.c.key == key))
            total -= size
    return written


@contextmanager
def _sqlite(path: Path, *, write: bool) -> Iterator[sqlite3.Cursor]:
    """One transaction on the SQLite file (``BEGIN IMMEDIATE`` to write), the ledger's
    lock wait; a database failure is one :class:`LedgerError` line."""
    wait_s = lock_wait_from(os.environ)
    try:
        connection = sqlite3.connect(path, timeout=wait_s, isolation_level=None)
        with closing(connection), closing(connection.cursor()) as cursor:
            cursor.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
            cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield cursor
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
            cursor.execute("COMMIT" if write else "ROLLBACK")
    except sqlite3.Error as error:
        raise LedgerError(f"ledger {path}: {str(error).strip()}") from None


def _without_password(url: str) -> str:
    from orchestrator.adapters.ledger.connection import display_url

    return display_url(url)
