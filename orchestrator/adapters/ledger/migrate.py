"""Create or upgrade the ledger's schema on open, with Alembic.

Opening an up-to-date ledger costs one or two queries and no Alembic import: the
revision in ``alembic_version`` is compared with :data:`revisions.HEAD`. Otherwise, under
a lock that serialises every process opening the same ledger, the revision is read
again (another process may have migrated meanwhile) and Alembic upgrades it inside one
transaction:

- PostgreSQL: a transaction-scoped advisory lock, then the DDL (transactional there).
- SQLite: an exclusive ``flock`` on ``<database>.lock`` beside the file, held around
  the whole check; under it the file is switched to WAL once, then the migrations run
  in one ``BEGIN IMMEDIATE`` transaction.

A ledger written before Alembic has no ``alembic_version`` but a ``schema_version``
table whose highest version N matches revision N (``revisions.REVISIONS``): it is stamped
at that revision, in the same transaction, and upgraded from there. A revision this
tool does not know belongs to a newer tool: the ledger is refused, never touched.
"""

from __future__ import annotations

import fcntl
import io
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, func, inspect, select, text
from sqlalchemy.engine import Connection

from orchestrator import interrupts
from orchestrator.adapters.ledger.revisions import HEAD, REVISIONS
from orchestrator.adapters.ledger.schema import VERSIONS
from orchestrator.errors import LedgerError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
_PG_MIGRATION_LOCK = 0x6C656467  # "ledg": serialises schema migrations across processes


@dataclass(frozen=True, kw_only=True)
class Found:
    """Where a ledger's schema stands."""

    revision: str | None  # None: nothing there yet
    stamped: bool  # False: a ledger from before Alembic (or an empty database)

    @property
    def known(self) -> bool:
        return self.revision is None or self.revision in REVISIONS

    def behind(self, target: str) -> bool:
        if self.revision is None:
            return True
        return REVISIONS.index(self.revision) < REVISIONS.index(target)


def read_revision(conn: Connection) -> Found:
    inspector = inspect(conn)
    if inspector.has_table("alembic_version"):
        stored = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        return Found(revision=stored, stamped=True)
    if inspector.has_table("schema_version"):
        legacy = conn.execute(select(func.max(VERSIONS.c.version))).scalar()
        if legacy:
            version = int(legacy)
            known = 1 <= version <= len(REVISIONS)
            return Found(
                revision=REVISIONS[version - 1] if known else f"{version:04d}", stamped=False
            )
    return Found(revision=None, stamped=False)


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration, built here (there is no alembic.ini)."""
    from alembic.config import Config

    # Alembic's own messages would land in a command's output (``--json`` included).
    config = Config(stdout=io.StringIO())
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def ensure_schema(
    engine: Engine,
    *,
    shown: str,
    database: Path | None,
    target: str = HEAD,
    lock_wait_s: float = 60.0,
) -> None:
    """Bring the ledger behind ``engine`` to ``target`` (``database``: the SQLite file)."""
    if target not in REVISIONS:
        raise ValueError(f"unknown schema revision {target!r}")
    with _file_lock(database, shown, lock_wait_s):
        if _ready(engine, shown=shown, wal=database is not None, target=target):
            return
        if database is not None:
            _use_wal(engine)
        with engine.connect() as conn:
            conn.execution_options(ledger_write=True)  # BEGIN IMMEDIATE on SQLite
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
                    )
                found = read_revision(conn)  # another process may have migrated meanwhile
                _refuse_newer(found, shown)
                if found.stamped and not found.behind(target):
                    return
                _upgrade(conn, found, target)


def _ready(engine: Engine, *, shown: str, wal: bool, target: str) -> bool:
    with engine.connect() as conn:
        found = read_revision(conn)
        journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar() if wal else "wal"
        conn.rollback()
    _refuse_newer(found, shown)
    return found.stamped and not found.behind(target) and journal == "wal"


def _refuse_newer(found: Found, shown: str) -> None:
    if not found.known:
        raise LedgerError(
            f"ledger {shown} has schema version {found.revision}, newer than this "
            f"tool's {HEAD}; upgrade orchestrator to use it"
        )


def _upgrade(conn: Connection, found: Found, target: str) -> None:
    from alembic import command

    config = alembic_config(conn)
    if found.revision is not None and not found.stamped:
        command.stamp(config, found.revision)  # a ledger from before Alembic
    command.upgrade(config, target)


def _use_wal(engine: Engine) -> None:
    """Switch the file to WAL (persistent; outside any transaction, as SQLite requires)."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()
    finally:
        raw.close()


@contextmanager
def _file_lock(database: Path | None, shown: str, wait_s: float) -> Iterator[None]:
    """Hold ``<database>.lock`` exclusively (SQLite only; released if the process dies).

    Waits at most ``wait_s`` for another process, polling, so a signal is acted on."""
    if database is None:
        yield
        return
    lock = database.with_name(database.name + ".lock")
    try:
        handle = open(lock, "a")  # noqa: SIM115 - closed below, after the lock is released
    except OSError as error:
        raise LedgerError(f"ledger {shown} cannot be opened: {lock}: {error.strerror}") from None
    with handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"ledger {shown}: another process held its schema lock ({lock}) "
                        f"for {wait_s:g} s; nothing was written"
                    ) from None
            interrupts.checkpoint()
            time.sleep(0.05)
        yield
