"""The live freezes, read without writing anything: the quarantine plugin's path
(``orchestrator.quarantine``), which runs inside a team's test session.

Neither back end creates, upgrades or locks the schema, as opening the store would:

- SQLite (``sqlite:///PATH``): the standard library's ``sqlite3`` with ``mode=ro``, so
  SQLite itself refuses any write (no SQLAlchemy import). The file must exist. A reader in
  WAL mode may leave the empty ``-wal`` and ``-shm`` files beside it, which the next
  writer uses as always.
- PostgreSQL: SQLAlchemy, in a ``READ ONLY`` transaction.

The query is the listing's (``rows.FREEZE_SUMMARY_COLUMNS``, no payloads), in id order.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from orchestrator.adapters.ledger import rows
from orchestrator.adapters.ledger.sqlite_reads import FREEZE_COLUMNS, convert_row, sqlite_path
from orchestrator.adapters.ledger.values import FreezeRow
from orchestrator.errors import LedgerError, LedgerLocationError

_WAIT_S = 10.0  # a writer's transaction is short; a reader waits that long at most


def live_freezes(url: str) -> list[FreezeRow]:
    """Every live freeze of the ledger at ``url``. A URL or file that cannot be read is a
    :class:`LedgerLocationError`; a database that fails, a :class:`LedgerError`."""
    path = sqlite_path(url)
    if path is not None:
        return _sqlite(path, url)
    if url.startswith("sqlite"):
        raise LedgerLocationError(f"ledger {url}: only a sqlite:///PATH file can be read")
    return _store(url)


def _sqlite(path: Path, url: str) -> list[FreezeRow]:
    if not path.is_file():
        raise LedgerLocationError(f"ledger {url}: no such file {path}")
    query = f"SELECT {FREEZE_COLUMNS} FROM freezes ORDER BY id"
    try:
        connection = sqlite3.connect(
            f"file:{quote(str(path.resolve()))}?mode=ro", uri=True, timeout=_WAIT_S
        )
        with closing(connection), closing(connection.cursor()) as cursor:
            cursor.execute(query)
            names = [column[0] for column in cursor.description]
            found = [convert_row(names, values) for values in cursor.fetchall()]
    except sqlite3.Error as error:
        raise LedgerError(f"ledger {url}: cannot read its freezes: {error}") from None
    return [rows.freeze_row(row) for row in found]


def _store(url: str) -> list[FreezeRow]:
    from sqlalchemy.exc import DBAPIError

    from orchestrator.adapters.ledger.connection import display_url, open_engine, parse_url
    from orchestrator.adapters.ledger.connection import problem as database_problem
    from orchestrator.adapters.ledger.schema import FREEZES
    from orchestrator.adapters.ledger.statements import freeze_select

    shown = display_url(url)
    engine = open_engine(parse_url(url), shown)
    try:
        with engine.connect() as connection:
            conn = connection.execution_options(postgresql_readonly=True)
            with conn.begin():
                found = conn.execute(freeze_select(payloads=False).order_by(FREEZES.c.id)).all()
                return [rows.freeze_row(row._mapping) for row in found]
    except DBAPIError as error:
        raise database_problem(shown, error) from None
    finally:
        engine.dispose()
