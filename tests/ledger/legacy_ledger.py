"""Ledgers as the tool wrote them before Alembic managed the schema.

A frozen copy of that tool's schema code (its ``_tables``, ``_migrate_1`` to ``_migrate_4``
and ``schema_version`` bookkeeping): ``create(url, version)`` builds exactly the
database that tool left at schema ``version``, so the upgrade tests start from the
real thing, not from this tool's own older revisions. Never change it.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    insert,
)

_ID = BigInteger().with_variant(Integer(), "sqlite")


def _tables(metadata: MetaData) -> dict[str, Table]:
    """The version-1 tables."""
    return {
        "schema_version": Table(
            "schema_version",
            metadata,
            Column("version", Integer, primary_key=True, autoincrement=False),
            Column("applied_at", DateTime, nullable=False),
        ),
        "runs": Table(
            "runs",
            metadata,
            Column("id", String(128), primary_key=True),
            Column("started_at", DateTime, nullable=False),
            Column("finished_at", DateTime, nullable=True),
            Column("status", String(32), nullable=False),
            Column("command", Text, nullable=True),
            Column("detail", Text, nullable=False),
        ),
        "freezes": Table(
            "freezes",
            metadata,
            Column("id", _ID, primary_key=True, autoincrement=True),
            Column("kind", String(16), nullable=False),
            Column("subject", Text, nullable=False),
            Column("owner", Text, nullable=False),
            Column("opened_at", DateTime, nullable=False),
            Column("expires_at", DateTime, nullable=False),
            Column("record", Text, nullable=False),
            Column("record_digest", String(80), nullable=False, unique=True),
            Column("fixture_bytes", LargeBinary, nullable=True),
            Column("origin_bytes", LargeBinary, nullable=True),
            Column("run_id", String(128), nullable=True),
            sqlite_autoincrement=True,
        ),
        "events": Table(
            "events",
            metadata,
            Column("id", _ID, primary_key=True, autoincrement=True),
            Column("at", DateTime, nullable=False),
            Column("kind", String(32), nullable=False),
            Column("code", Text, nullable=False),
            Column("subject", Text, nullable=True),
            Column("detail", Text, nullable=False),
            sqlite_autoincrement=True,
        ),
        "infra_queue": Table(
            "infra_queue",
            metadata,
            Column("id", _ID, primary_key=True, autoincrement=True),
            Column("queued_at", DateTime, nullable=False),
            Column("property_id", Text, nullable=True),
            Column("code", Text, nullable=False),
            Column("runner_id", Text, nullable=True),
            Column("image_digest", Text, nullable=True),
            Column("base_rev", Text, nullable=True),
            Column("patch_rev", Text, nullable=True),
            Column("labels", Text, nullable=False),
            Column("reasons", Text, nullable=False),
            Column("record", Text, nullable=False),
            Column("run_id", String(128), ForeignKey("runs.id"), nullable=True),
            sqlite_autoincrement=True,
        ),
    }


_SQLITE_APPEND_ONLY = (
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END",
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END",
)
_PG_APPEND_ONLY = (
    "CREATE OR REPLACE FUNCTION ledger_events_append_only() RETURNS trigger AS $$ "
    "BEGIN RAISE EXCEPTION 'events are append-only'; END $$ LANGUAGE plpgsql",
    "CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events "
    "FOR EACH ROW EXECUTE FUNCTION ledger_events_append_only()",
    "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
    "FOR EACH STATEMENT EXECUTE FUNCTION ledger_events_append_only()",
)


def _ddl(conn: Connection, *statements: str) -> None:
    for statement in statements:
        conn.exec_driver_sql(statement)


def _types(conn: Connection) -> tuple[str, str]:
    if conn.dialect.name == "postgresql":
        return "BIGINT", "TIMESTAMP"
    return "INTEGER", "DATETIME"


def _migrate_1(conn: Connection) -> None:
    tables = _tables(MetaData())
    for name in ("runs", "freezes", "events", "infra_queue"):
        tables[name].create(conn)
    _ddl(conn, *(_PG_APPEND_ONLY if conn.dialect.name == "postgresql" else _SQLITE_APPEND_ONLY))


def _migrate_2(conn: Connection) -> None:
    _, timestamp = _types(conn)
    _ddl(
        conn,
        "ALTER TABLE freezes ADD COLUMN claimed_by VARCHAR(64)",
        f"ALTER TABLE freezes ADD COLUMN claimed_at {timestamp}",
        f"ALTER TABLE freezes ADD COLUMN probed_at {timestamp}",
        "CREATE INDEX ix_freezes_expires_at ON freezes (expires_at)",
        "CREATE INDEX ix_freezes_kind_subject ON freezes (kind, subject)",
        "CREATE INDEX ix_events_kind_at ON events (kind, at)",
        "CREATE INDEX ix_events_at ON events (at)",
        "CREATE INDEX ix_events_subject ON events (subject)",
        "CREATE INDEX ix_infra_queued_at ON infra_queue (queued_at)",
    )


def _migrate_3(conn: Connection) -> None:
    _ddl(conn, "CREATE INDEX ix_freezes_claimed_by ON freezes (claimed_by)")


def _migrate_4(conn: Connection) -> None:
    id_type, timestamp = _types(conn)
    _ddl(
        conn,
        f"CREATE TABLE freeze_claims (freeze_id {id_type} NOT NULL PRIMARY KEY "
        "REFERENCES freezes (id) ON DELETE CASCADE, claimed_by VARCHAR(64), "
        f"claimed_at {timestamp}, probed_at {timestamp})",
        "INSERT INTO freeze_claims (freeze_id, claimed_by, claimed_at, probed_at) "
        "SELECT id, claimed_by, claimed_at, probed_at FROM freezes "
        "WHERE claimed_by IS NOT NULL OR probed_at IS NOT NULL",
        "CREATE INDEX ix_freeze_claims_claimed_by ON freeze_claims (claimed_by)",
        "DROP INDEX ix_freezes_claimed_by",
        "ALTER TABLE freezes DROP COLUMN claimed_by",
        "ALTER TABLE freezes DROP COLUMN claimed_at",
        "ALTER TABLE freezes DROP COLUMN probed_at",
    )


MIGRATIONS = (_migrate_1, _migrate_2, _migrate_3, _migrate_4)
APPLIED_AT = datetime(2026, 10, 1, 8, 0)  # naive UTC, as that tool stored it


def create(url: str, version: int) -> None:
    """An empty ledger at the old tool's schema ``version`` (WAL on SQLite, as it set)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA journal_mode = WAL")
            versions = _tables(MetaData())["schema_version"]
            versions.create(conn)
            for step in range(1, version + 1):
                MIGRATIONS[step - 1](conn)
                conn.execute(insert(versions).values(version=step, applied_at=APPLIED_AT))
    finally:
        engine.dispose()


def migrate(url: str, to_version: int) -> None:
    """What the old tool did on open: apply its own migrations up to ``to_version``."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            versions = _tables(MetaData())["schema_version"]
            found = max(row.version for row in conn.execute(versions.select()))
            for step in range(found + 1, to_version + 1):
                MIGRATIONS[step - 1](conn)
                conn.execute(insert(versions).values(version=step, applied_at=APPLIED_AT))
    finally:
        engine.dispose()


def fill_version_1(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Rows in every table of a version-1 ledger, as that tool wrote them; returns them."""
    at = datetime(2026, 11, 30, 12, 0)
    tables = _tables(MetaData())
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(tables["runs"]),
                [
                    {"id": "run-1", "started_at": at, "status": "running", "detail": "{}"},
                    {
                        "id": "run-2",
                        "started_at": at,
                        "finished_at": at + timedelta(minutes=1),
                        "status": "running",
                        "command": "pytest -q",
                        "detail": '{"a":1}',
                    },
                ],
            )
            conn.execute(
                insert(tables["freezes"]),
                [
                    {
                        "kind": "flake" if n % 2 else "timing",
                        "subject": f"tests/test_x.py::test_{n}",
                        "owner": "old-owner",
                        "opened_at": at,
                        "expires_at": at + timedelta(hours=n),
                        "record": json.dumps({"n": n}),
                        "record_digest": f"sha256:{n:064x}",
                        "fixture_bytes": b'{"user_id":0}' if n % 2 else None,
                        "origin_bytes": b'{"user_id":0,"x":[1]}' if n % 2 else None,
                        "run_id": "run-1" if n % 2 else None,
                    }
                    for n in range(1, 6)
                ],
            )
            conn.execute(
                insert(tables["events"]),
                [
                    {
                        "at": at + timedelta(seconds=n),
                        "kind": "decision",
                        "code": f"code-{n}",
                        "subject": f"tests/test_x.py::test_{n % 3}",
                        "detail": json.dumps({"n": n, "text": "naïve ✓"}, ensure_ascii=False),
                    }
                    for n in range(7)
                ],
            )
            conn.execute(
                insert(tables["infra_queue"]).values(
                    queued_at=at,
                    property_id="tests/test_x.py::test_1",
                    code="timeout",
                    runner_id="local",
                    image_digest="sha256:" + "c" * 64,
                    base_rev="a" * 40,
                    patch_rev="b" * 40,
                    labels='{"base":["timeout"]}',
                    reasons='["base:timeout:deadline"]',
                    record="{}",
                    run_id="run-2",
                )
            )
    finally:
        engine.dispose()
    return snapshot(url)


DATA_TABLES = ("runs", "freezes", "events", "infra_queue")


def snapshot(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the data tables (the columns version 1 had), in id order."""
    tables = _tables(MetaData())
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                name: [
                    tuple(row)
                    for row in conn.execute(tables[name].select().order_by(tables[name].c.id))
                ]
                for name in DATA_TABLES
            }
    finally:
        engine.dispose()
