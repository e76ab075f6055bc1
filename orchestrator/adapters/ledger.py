"""The freeze ledger: a thin SQLAlchemy Core store (SQLite by default, PostgreSQL for teams).

Tables (lanes.md sections 5-7):

- ``freezes``: live flake and timing freezes. The canonical JSON of the record plus a few
  indexed columns; flake freezes also keep the minimal fixture's bytes and the original
  (unshrunk) payload's bytes, so a thaw or a reviewer can replay either.
- ``events``: the append-only log. Rows are inserted, never updated or deleted; the
  database enforces it (SQLite triggers, a PostgreSQL trigger).
- ``infra_queue``: cases the runner broke (``infra_queue`` decisions), never freezes.
- ``runs``: one row per replay run.

Deciding whether a record may be written is the pure core's job
(``orchestrator.core.records``); this module calls it inside the write transaction so a
refusal event and "no freeze written" are one atomic outcome.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Engine,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    and_,
    create_engine,
    delete,
    event,
    func,
    insert,
    inspect,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError

from orchestrator import model
from orchestrator.errors import LedgerError

SCHEMA_VERSION = 4
DEFAULT_FLAKE_MAX_AGE = timedelta(days=7)
DEFAULT_TIMING_MAX_AGE = timedelta(hours=72)
# A claim older than this belongs to a thaw job that died; another job may take the row.
CLAIM_TTL = timedelta(hours=6)
_PG_MIGRATION_LOCK = 0x6C656467  # "ledg": serialises schema migrations across processes


def display_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in Python; naive UTC in the column (same ordering on both back ends)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("ledger datetimes must be timezone-aware")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


_ID = BigInteger().with_variant(Integer(), "sqlite")


def _tables(metadata: MetaData, version: int) -> dict[str, Table]:
    """The tables as of schema ``version`` (migrations create older shapes exactly)."""
    freezes_columns: list[Any] = [
        Column("id", _ID, primary_key=True, autoincrement=True),
        Column("kind", String(16), nullable=False),
        Column("subject", Text, nullable=False),  # property id or test name
        Column("owner", Text, nullable=False),
        Column("opened_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Column("record", Text, nullable=False),  # canonical JSON of the record
        Column("record_digest", String(80), nullable=False, unique=True),
        Column("fixture_bytes", LargeBinary, nullable=True),  # flake: the minimal fixture
        Column("origin_bytes", LargeBinary, nullable=True),  # flake: the unshrunk payload
        Column("run_id", String(128), nullable=True),
    ]
    tables = {
        "schema_version": Table(
            "schema_version",
            metadata,
            Column("version", Integer, primary_key=True, autoincrement=False),
            Column("applied_at", UTCDateTime, nullable=False),
        ),
        "runs": Table(
            "runs",
            metadata,
            Column("id", String(128), primary_key=True),
            Column("started_at", UTCDateTime, nullable=False),
            Column("finished_at", UTCDateTime, nullable=True),
            Column("status", String(32), nullable=False),
            Column("command", Text, nullable=True),
            Column("detail", Text, nullable=False),
        ),
        "freezes": Table("freezes", metadata, *freezes_columns, sqlite_autoincrement=True),
        "events": Table(
            "events",
            metadata,
            Column("id", _ID, primary_key=True, autoincrement=True),
            Column("at", UTCDateTime, nullable=False),
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
            Column("queued_at", UTCDateTime, nullable=False),
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
    if version >= 4:  # thaw-job state, kept apart so a claim rewrites a tiny row
        tables["freeze_claims"] = Table(
            "freeze_claims",
            metadata,
            Column(
                "freeze_id",
                _ID,
                ForeignKey("freezes.id", ondelete="CASCADE"),
                primary_key=True,
                autoincrement=False,
            ),
            Column("claimed_by", String(64), nullable=True),
            Column("claimed_at", UTCDateTime, nullable=True),
            Column("probed_at", UTCDateTime, nullable=True),
        )
    return tables


_METADATA = MetaData()
_T = _tables(_METADATA, SCHEMA_VERSION)
FREEZES = _T["freezes"]
EVENTS = _T["events"]
INFRA = _T["infra_queue"]
RUNS = _T["runs"]
VERSIONS = _T["schema_version"]
CLAIMS = _T["freeze_claims"]


# --- migrations -------------------------------------------------------------------------

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


def _migrate_1(conn: Connection) -> None:
    """The first shape: the four tables and the append-only guard on events."""
    metadata = MetaData()
    tables = _tables(metadata, 1)
    for name in ("runs", "freezes", "events", "infra_queue"):
        tables[name].create(conn)
    guard = _PG_APPEND_ONLY if conn.dialect.name == "postgresql" else _SQLITE_APPEND_ONLY
    for statement in guard:
        conn.exec_driver_sql(statement)


def _types(conn: Connection) -> tuple[str, str]:
    """(id type, timestamp type) in this dialect's DDL."""
    if conn.dialect.name == "postgresql":
        return "BIGINT", "TIMESTAMP"
    return "INTEGER", "DATETIME"


def _ddl(conn: Connection, *statements: str) -> None:
    for statement in statements:
        conn.exec_driver_sql(statement)


def _migrate_2(conn: Connection) -> None:
    """Claims for concurrent thaw jobs, and the indexes the scheduled jobs read through."""
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
    """A thaw job re-reads the rows it claimed by its token."""
    _ddl(conn, "CREATE INDEX ix_freezes_claimed_by ON freezes (claimed_by)")


def _migrate_4(conn: Connection) -> None:
    """Claims move to their own table: claiming 1,000 rows no longer rewrites 1,000 records."""
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


MIGRATIONS: tuple[Callable[[Connection], None], ...] = (
    _migrate_1,
    _migrate_2,
    _migrate_3,
    _migrate_4,
)
assert len(MIGRATIONS) == SCHEMA_VERSION


# --- values -----------------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, kw_only=True)
class FreezeRow:
    """One live freeze as stored."""

    id: int
    kind: model.FreezeKind
    subject: str
    owner: str
    opened_at: datetime
    expires_at: datetime
    record_json: str  # canonical JSON; parsed on first use (listing 1,000 rows stays cheap)
    fixture_bytes: bytes | None  # None also when the listing did not load payloads
    origin_bytes: bytes | None
    has_fixture_bytes: bool
    has_origin_bytes: bool
    run_id: str | None

    @cached_property
    def record(self) -> Mapping[str, Any]:
        parsed: Mapping[str, Any] = json.loads(self.record_json)
        return parsed

    def expired(self, now: datetime) -> bool:
        return self.expires_at <= now

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "subject": self.subject,
            "owner": self.owner,
            "opened_at": self.opened_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "record": dict(self.record),
            "run_id": self.run_id,
            "has_fixture_bytes": self.has_fixture_bytes,
            "has_origin_bytes": self.has_origin_bytes,
        }


@dataclass(frozen=True, kw_only=True)
class WriteOutcome:
    """What a freeze write did: a new (or identical existing) row, or refusal codes."""

    freeze_id: int | None
    codes: tuple[str, ...]
    event_id: int | None

    @property
    def written(self) -> bool:
        return self.freeze_id is not None


@dataclass(frozen=True, kw_only=True)
class InfraEntry:
    """One case for the infra queue (from an ``infra_queue`` decision)."""

    queued_at: datetime
    property_id: str | None
    code: str
    runner_id: str | None
    image_digest: str | None
    base_rev: str | None
    patch_rev: str | None
    labels: Mapping[str, Sequence[str]]
    reasons: Sequence[str]
    record: Mapping[str, Any]
    run_id: str | None = None
    id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "queued_at": self.queued_at.isoformat(),
            "property_id": self.property_id,
            "code": self.code,
            "runner_id": self.runner_id,
            "image_digest": self.image_digest,
            "base_rev": self.base_rev,
            "patch_rev": self.patch_rev,
            "labels": {side: list(labels) for side, labels in self.labels.items()},
            "reasons": list(self.reasons),
            "record": dict(self.record),
            "run_id": self.run_id,
        }


# --- the store --------------------------------------------------------------------------


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (IMMEDIATE for writers).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("ledger_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class Ledger:
    """The ledger behind one URL. Use as a context manager; it disposes its engine."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url
        self._tx: Connection | None = None

    # -- opening and versioning --

    @classmethod
    def open(cls, url: str, *, target_version: int = SCHEMA_VERSION) -> Ledger:
        """Connect, then create or upgrade the schema (``target_version`` is for tests)."""
        shown = display_url(url)
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise LedgerError(f"ledger URL {url!r} is not a database URL") from None
        try:
            if parsed.get_backend_name() == "sqlite":
                if parsed.database and parsed.database != ":memory:":
                    Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
                engine = create_engine(parsed, connect_args={"timeout": 60})
                _sqlite_setup(engine)
            elif parsed.get_backend_name() == "postgresql":
                engine = create_engine(parsed, pool_pre_ping=True)
            else:
                raise LedgerError(f"ledger {shown}: only sqlite and postgresql are supported")
        except (NoSuchModuleError, ImportError) as error:
            raise LedgerError(f"ledger {shown}: no driver ({error})") from None
        ledger = cls(engine, url)
        try:
            ledger._ensure_schema(target_version)
        except DBAPIError as error:
            engine.dispose()
            reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
            raise LedgerError(f"ledger {shown} cannot be opened: {reason}") from None
        except BaseException:
            engine.dispose()
            raise
        return ledger

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            return _read_version(conn)

    def _ensure_schema(self, target: int) -> None:
        with self.engine.connect() as conn:
            found = _read_version(conn)
            conn.rollback()
        if found > SCHEMA_VERSION:
            raise LedgerError(
                f"ledger {display_url(self.url)} has schema version {found}, newer than this "
                f"tool's {SCHEMA_VERSION}; upgrade orchestrator to use it"
            )
        if found >= target:
            return
        with self._write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
                )
            found = _read_version(conn)  # another process may have migrated meanwhile
            if not inspect(conn).has_table("schema_version"):
                VERSIONS.create(conn)
            now = datetime.now(UTC)
            for version in range(found + 1, target + 1):
                MIGRATIONS[version - 1](conn)
                conn.execute(insert(VERSIONS).values(version=version, applied_at=now))

    # -- transactions --

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        if self._tx is not None:
            yield self._tx
            return
        with self.engine.connect() as conn:
            conn.execution_options(ledger_write=True)
            with conn.begin():
                self._tx = conn
                try:
                    yield conn
                finally:
                    self._tx = None

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        if self._tx is not None:
            yield self._tx
            return
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[Ledger]:
        """Group several writes into one atomic transaction (all or nothing)."""
        with self._write():
            yield self

    # -- events --

    def append_event(self, event_row: model.Event) -> int:
        with self._write() as conn:
            return _insert_event(conn, event_row)

    def events(
        self,
        *,
        since: datetime | None = None,
        kinds: Collection[model.EventKind] | None = None,
        subject: str | None = None,
    ) -> list[model.Event]:
        query = select(EVENTS).order_by(EVENTS.c.id)
        if since is not None:
            query = query.where(EVENTS.c.at >= since)
        if kinds is not None:
            query = query.where(EVENTS.c.kind.in_([kind.value for kind in kinds]))
        if subject is not None:
            query = query.where(EVENTS.c.subject == subject)
        with self._read() as conn:
            return [
                model.Event(
                    id=row.id,
                    at=row.at,
                    kind=model.EventKind(row.kind),
                    code=row.code,
                    subject=row.subject,
                    detail=json.loads(row.detail),
                )
                for row in conn.execute(query)
            ]

    def count_events(self) -> int:
        with self._read() as conn:
            return int(conn.execute(select(func.count()).select_from(EVENTS)).scalar_one())

    # -- runs and the infra queue --

    def record_run(
        self,
        run_id: str,
        *,
        started_at: datetime,
        command: str | None,
        detail: Mapping[str, Any],
        status: str = "running",
    ) -> None:
        with self._write() as conn:
            conn.execute(
                insert(RUNS).values(
                    id=run_id,
                    started_at=started_at,
                    status=status,
                    command=command,
                    detail=_json(dict(detail)),
                )
            )

    def finish_run(self, run_id: str, *, finished_at: datetime, status: str) -> None:
        with self._write() as conn:
            conn.execute(
                update(RUNS)
                .where(RUNS.c.id == run_id)
                .values(finished_at=finished_at, status=status)
            )

    def runs(self) -> list[dict[str, Any]]:
        with self._read() as conn:
            return [
                {
                    "id": row.id,
                    "started_at": row.started_at.isoformat(),
                    "finished_at": row.finished_at.isoformat() if row.finished_at else None,
                    "status": row.status,
                    "command": row.command,
                    "detail": json.loads(row.detail),
                }
                for row in conn.execute(select(RUNS).order_by(RUNS.c.started_at, RUNS.c.id))
            ]

    def enqueue_infra(self, entry: InfraEntry) -> int:
        """Queue a case the runner broke, and log it (one transaction)."""
        with self._write() as conn:
            if entry.run_id is not None:
                _ensure_run(conn, entry.run_id, entry.queued_at)
            result = conn.execute(
                insert(INFRA).values(
                    queued_at=entry.queued_at,
                    property_id=entry.property_id,
                    code=entry.code,
                    runner_id=entry.runner_id,
                    image_digest=entry.image_digest,
                    base_rev=entry.base_rev,
                    patch_rev=entry.patch_rev,
                    labels=_json({k: list(v) for k, v in entry.labels.items()}),
                    reasons=_json(list(entry.reasons)),
                    record=_json(dict(entry.record)),
                    run_id=entry.run_id,
                )
            )
            infra_id = _new_id(result)
            _insert_event(
                conn,
                model.Event(
                    id=None,
                    at=entry.queued_at,
                    kind=model.EventKind.INFRA_QUEUED,
                    code=entry.code,
                    subject=entry.property_id,
                    detail={
                        "infra_id": infra_id,
                        "runner_id": entry.runner_id,
                        "reasons": list(entry.reasons),
                        "labels": {k: list(v) for k, v in entry.labels.items()},
                        "run_id": entry.run_id,
                    },
                ),
            )
            return infra_id

    def infra_entries(self) -> list[InfraEntry]:
        with self._read() as conn:
            return [
                InfraEntry(
                    id=row.id,
                    queued_at=row.queued_at,
                    property_id=row.property_id,
                    code=row.code,
                    runner_id=row.runner_id,
                    image_digest=row.image_digest,
                    base_rev=row.base_rev,
                    patch_rev=row.patch_rev,
                    labels=json.loads(row.labels),
                    reasons=tuple(json.loads(row.reasons)),
                    record=json.loads(row.record),
                    run_id=row.run_id,
                )
                for row in conn.execute(select(INFRA).order_by(INFRA.c.id))
            ]

    # -- freezes: writes --

    def write_flake_freeze(
        self,
        record: model.FlakeFreeze,
        *,
        decision: model.Decision,
        now: datetime,
        fixture_bytes: bytes | None,
        origin_bytes: bytes | None,
        max_age: timedelta = DEFAULT_FLAKE_MAX_AGE,
        run_id: str | None = None,
    ) -> WriteOutcome:
        """Validate with the core, then write the row and its event, or only a refusal event."""
        from orchestrator.core import records

        codes = records.validate_flake_freeze(record, decision=decision, now=now, max_age=max_age)
        codes = (*codes, *_bytes_codes(record, fixture_bytes, origin_bytes))
        subject = record.property_id
        if codes:
            return self._refuse(
                model.FreezeKind.FLAKE, subject, codes, owner=record.owner, now=now, run_id=run_id
            )
        assert record.property_id
        assert record.owner
        assert record.opened_at
        assert record.expires_at
        return self._insert_freeze(
            kind=model.FreezeKind.FLAKE,
            subject=record.property_id,
            owner=record.owner,
            opened_at=record.opened_at,
            expires_at=record.expires_at,
            document=records.flake_freeze_to_json(record),
            fixture_bytes=fixture_bytes,
            origin_bytes=origin_bytes,
            now=now,
            run_id=run_id,
            detail={"decision": decision.code},
        )

    def write_timing_freeze(
        self,
        record: model.TimingFreeze,
        *,
        admission_code: str,
        now: datetime,
        max_age: timedelta = DEFAULT_TIMING_MAX_AGE,
        run_id: str | None = None,
    ) -> WriteOutcome:
        from orchestrator.core import records

        codes = records.validate_timing_freeze(
            record, admission_code=admission_code, now=now, max_age=max_age
        )
        if codes:
            return self._refuse(
                model.FreezeKind.TIMING,
                record.test_name,
                codes,
                owner=record.owner,
                now=now,
                run_id=run_id,
            )
        assert record.test_name
        assert record.owner
        assert record.opened_at
        assert record.expires_at
        return self._insert_freeze(
            kind=model.FreezeKind.TIMING,
            subject=record.test_name,
            owner=record.owner,
            opened_at=record.opened_at,
            expires_at=record.expires_at,
            document=records.timing_freeze_to_json(record),
            fixture_bytes=None,
            origin_bytes=None,
            now=now,
            run_id=run_id,
            detail={"admission": admission_code},
        )

    def _refuse(
        self,
        kind: model.FreezeKind,
        subject: str | None,
        codes: tuple[str, ...],
        *,
        owner: str | None,
        now: datetime,
        run_id: str | None,
    ) -> WriteOutcome:
        refusal = model.Event(
            id=None,
            at=now,
            kind=model.EventKind.FREEZE_REFUSED,
            code=codes[0],
            subject=subject,
            detail={"codes": list(codes), "kind": kind.value, "owner": owner, "run_id": run_id},
        )
        return WriteOutcome(freeze_id=None, codes=codes, event_id=self.append_event(refusal))

    def _insert_freeze(
        self,
        *,
        kind: model.FreezeKind,
        subject: str,
        owner: str,
        opened_at: datetime,
        expires_at: datetime,
        document: Mapping[str, Any],
        fixture_bytes: bytes | None,
        origin_bytes: bytes | None,
        now: datetime,
        run_id: str | None,
        detail: Mapping[str, Any],
    ) -> WriteOutcome:
        from orchestrator.core.digest import digest

        body = _json(dict(document))
        record_digest = digest(dict(document))
        for attempt in (1, 2):
            try:
                with self._write() as conn:
                    existing = conn.execute(
                        select(FREEZES.c.id).where(FREEZES.c.record_digest == record_digest)
                    ).scalar_one_or_none()
                    if existing is not None:  # the same record again: one row, not two
                        return WriteOutcome(freeze_id=int(existing), codes=(), event_id=None)
                    if run_id is not None:
                        _ensure_run(conn, run_id, now)
                    result = conn.execute(
                        insert(FREEZES).values(
                            kind=kind.value,
                            subject=subject,
                            owner=owner,
                            opened_at=opened_at,
                            expires_at=expires_at,
                            record=body,
                            record_digest=record_digest,
                            fixture_bytes=fixture_bytes,
                            origin_bytes=origin_bytes,
                            run_id=run_id,
                        )
                    )
                    freeze_id = _new_id(result)
                    event_id = _insert_event(
                        conn,
                        model.Event(
                            id=None,
                            at=now,
                            kind=model.EventKind.FREEZE_WRITTEN,
                            code=kind.value,
                            subject=subject,
                            detail={
                                **detail,
                                "freeze_id": freeze_id,
                                "owner": owner,
                                "expires_at": expires_at.isoformat(),
                                "record_digest": record_digest,
                                "run_id": run_id,
                            },
                        ),
                    )
                    return WriteOutcome(freeze_id=freeze_id, codes=(), event_id=event_id)
            except IntegrityError:
                # A concurrent writer stored the identical record first (PostgreSQL); the
                # retry finds it. Inside an outer transaction nothing can be retried.
                if attempt == 2 or self._tx is not None:
                    raise
        raise AssertionError("unreachable")

    # -- freezes: reads --

    def live_freezes(
        self,
        *,
        expired_at: datetime | None = None,
        kind: model.FreezeKind | None = None,
        payloads: bool = False,
    ) -> list[FreezeRow]:
        """Live rows in id order; with ``expired_at``, those expired then, by expiry.

        ``payloads`` also loads the fixture and origin bytes (``export`` needs them; a
        listing does not).
        """
        query = _freeze_select(payloads=payloads)
        if expired_at is None:
            query = query.order_by(FREEZES.c.id)
        else:  # the expiry index serves both the range and the order
            query = query.where(FREEZES.c.expires_at <= expired_at).order_by(
                FREEZES.c.expires_at, FREEZES.c.id
            )
        if kind is not None:
            query = query.where(FREEZES.c.kind == kind.value)
        with self._read() as conn:
            return [_freeze_row(row) for row in conn.execute(query).all()]

    def freeze(self, freeze_id: int) -> FreezeRow | None:
        with self._read() as conn:
            row = conn.execute(
                _freeze_select(payloads=True).where(FREEZES.c.id == freeze_id)
            ).one_or_none()
            return None if row is None else _freeze_row(row)

    def count_freezes(self) -> int:
        with self._read() as conn:
            return int(conn.execute(select(func.count()).select_from(FREEZES)).scalar_one())

    def due_freezes(self, now: datetime, within: timedelta = timedelta(0)) -> list[FreezeRow]:
        """Rows whose expiry falls at or before ``now + within`` (read only, no claim)."""
        return self.live_freezes(expired_at=now + within)

    # -- thaw: claims and transitions --

    def claim_due(
        self,
        now: datetime,
        *,
        within: timedelta = timedelta(0),
        claimant: str | None = None,
        limit: int | None = None,
    ) -> tuple[str, list[FreezeRow]]:
        """Atomically claim the due rows no other job holds or has probed since ``now``.

        Returns the claim token and the claimed rows. A row stays claimed until
        :meth:`thaw` deletes it or :meth:`mark_overdue` releases it; a row probed at or
        after ``now`` by a concurrent job is not probed again by this one.
        """
        token = claimant or uuid.uuid4().hex
        stale = now - CLAIM_TTL
        held_free = or_(  # an existing claim row that no live job holds
            and_(
                CLAIMS.c.claimed_by.is_(None),
                or_(CLAIMS.c.probed_at.is_(None), CLAIMS.c.probed_at < now),
            ),
            and_(CLAIMS.c.claimed_by.is_not(None), CLAIMS.c.claimed_at < stale),
        )
        pick = (
            select(FREEZES.c.id)
            .select_from(FREEZES.outerjoin(CLAIMS, CLAIMS.c.freeze_id == FREEZES.c.id))
            .where(
                FREEZES.c.expires_at <= now + within,
                or_(CLAIMS.c.freeze_id.is_(None), held_free),
            )
            .order_by(FREEZES.c.expires_at, FREEZES.c.id)
        )
        if limit is not None:
            pick = pick.limit(limit)
        with self._write() as conn:
            postgres = conn.dialect.name == "postgresql"
            if postgres:  # SQLite's BEGIN IMMEDIATE already serialises claimers
                pick = pick.with_for_update(of=FREEZES, skip_locked=True)
            ids = list(conn.execute(pick).scalars())
            if ids:
                upsert = (postgresql_insert if postgres else sqlite_insert)(CLAIMS)
                # The WHERE re-checks a row another job claimed meanwhile: it stays theirs.
                upsert = upsert.on_conflict_do_update(
                    index_elements=[CLAIMS.c.freeze_id],
                    set_={
                        "claimed_by": upsert.excluded.claimed_by,
                        "claimed_at": upsert.excluded.claimed_at,
                        "probed_at": upsert.excluded.probed_at,
                    },
                    where=held_free,
                )
                conn.execute(
                    upsert,
                    [
                        {"freeze_id": i, "claimed_by": token, "claimed_at": now, "probed_at": now}
                        for i in ids
                    ],
                )
            rows = conn.execute(
                _freeze_select(payloads=True)
                .join(CLAIMS, CLAIMS.c.freeze_id == FREEZES.c.id)
                .where(CLAIMS.c.claimed_by == token)
                .order_by(FREEZES.c.expires_at, FREEZES.c.id)
            )
            return token, [_freeze_row(row) for row in rows]

    def thaw(self, freeze_id: int, *, token: str, now: datetime, detail: Mapping[str, Any]) -> int:
        """Delete a claimed live row and append the THAWED event (one transaction)."""
        with self._write() as conn:
            row = self._claimed(conn, freeze_id, token)
            conn.execute(delete(CLAIMS).where(CLAIMS.c.freeze_id == freeze_id))
            conn.execute(delete(FREEZES).where(FREEZES.c.id == freeze_id))
            return _insert_event(
                conn,
                model.Event(
                    id=None,
                    at=now,
                    kind=model.EventKind.THAWED,
                    code="thawed",
                    subject=row.subject,
                    detail={
                        **detail,
                        "freeze_id": freeze_id,
                        "kind": row.kind,
                        "owner": row.owner,
                        "record": json.loads(row.record),
                    },
                ),
            )

    def mark_overdue(
        self, freeze_id: int, *, token: str, now: datetime, code: str, detail: Mapping[str, Any]
    ) -> int:
        """Keep the row, release the claim, append the OVERDUE event (one transaction)."""
        with self._write() as conn:
            row = self._claimed(conn, freeze_id, token)
            conn.execute(  # probed_at stays: this job does not take the row again
                update(CLAIMS)
                .where(CLAIMS.c.freeze_id == freeze_id)
                .values(claimed_by=None, claimed_at=None)
            )
            result = conn.execute(
                insert(EVENTS).values(
                    _overdue_values(
                        freeze_id=row.id,
                        subject=row.subject,
                        kind=row.kind,
                        owner=row.owner,
                        expires_at=row.expires_at,
                        now=now,
                        code=code,
                        detail=detail,
                    )
                )
            )
            return _new_id(result)

    def release(self, freeze_id: int, *, token: str) -> None:
        """Give a claimed row back untouched (the job could not probe it)."""
        with self._write() as conn:
            conn.execute(
                delete(CLAIMS).where(CLAIMS.c.freeze_id == freeze_id, CLAIMS.c.claimed_by == token)
            )

    def record_overdue(self, rows: Sequence[FreezeRow], *, now: datetime, code: str) -> int:
        """Append one OVERDUE event per row found live past expiry (``check``); returns count."""
        if not rows:
            return 0
        with self._write() as conn:
            conn.execute(
                insert(EVENTS),
                [
                    _overdue_values(
                        freeze_id=row.id,
                        subject=row.subject,
                        kind=row.kind.value,
                        owner=row.owner,
                        expires_at=row.expires_at,
                        now=now,
                        code=code,
                        detail={},
                    )
                    for row in rows
                ],
            )
        return len(rows)

    @staticmethod
    def _claimed(conn: Connection, freeze_id: int, token: str) -> Any:
        holder = conn.execute(
            select(CLAIMS.c.claimed_by).where(CLAIMS.c.freeze_id == freeze_id)
        ).scalar_one_or_none()
        row = conn.execute(select(FREEZES).where(FREEZES.c.id == freeze_id)).one_or_none()
        if row is None or holder != token:
            raise LedgerError(f"freeze {freeze_id} is not claimed by this job")
        return row


def _new_id(result: Any) -> int:
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def _read_version(conn: Connection) -> int:
    if not inspect(conn).has_table("schema_version"):
        return 0
    found = conn.execute(select(func.max(VERSIONS.c.version))).scalar_one_or_none()
    return int(found or 0)


def _insert_event(conn: Connection, event_row: model.Event) -> int:
    result = conn.execute(
        insert(EVENTS).values(
            at=event_row.at,
            kind=event_row.kind.value,
            code=event_row.code,
            subject=event_row.subject,
            detail=_json(dict(event_row.detail)),
        )
    )
    return _new_id(result)


def _overdue_values(
    *,
    freeze_id: int,
    subject: str,
    kind: str,
    owner: str,
    expires_at: datetime,
    now: datetime,
    code: str,
    detail: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "at": now,
        "kind": model.EventKind.OVERDUE.value,
        "code": code,
        "subject": subject,
        "detail": _json(
            {
                **detail,
                "freeze_id": freeze_id,
                "kind": kind,
                "owner": owner,
                "expires_at": expires_at.isoformat(),
            }
        ),
    }


def _ensure_run(conn: Connection, run_id: str, now: datetime) -> None:
    if conn.execute(select(RUNS.c.id).where(RUNS.c.id == run_id)).first() is None:
        conn.execute(insert(RUNS).values(id=run_id, started_at=now, status="running", detail="{}"))


_SUMMARY_COLUMNS = [c for c in FREEZES.c if c.name not in ("fixture_bytes", "origin_bytes")]
_SUMMARY_WIDTH = len(_SUMMARY_COLUMNS) + 2


def _freeze_select(*, payloads: bool) -> Any:
    columns = list(_SUMMARY_COLUMNS)
    flags = [
        FREEZES.c.fixture_bytes.is_not(None).label("has_fixture_bytes"),
        FREEZES.c.origin_bytes.is_not(None).label("has_origin_bytes"),
    ]
    if payloads:
        columns += [FREEZES.c.fixture_bytes, FREEZES.c.origin_bytes]
    return select(*columns, *flags)


def _freeze_row(row: Any) -> FreezeRow:
    with_payloads = len(row) > _SUMMARY_WIDTH
    return FreezeRow(
        id=row.id,
        kind=model.FreezeKind(row.kind),
        subject=row.subject,
        owner=row.owner,
        opened_at=row.opened_at,
        expires_at=row.expires_at,
        record_json=row.record,
        fixture_bytes=row.fixture_bytes if with_payloads else None,
        origin_bytes=row.origin_bytes if with_payloads else None,
        has_fixture_bytes=bool(row.has_fixture_bytes),
        has_origin_bytes=bool(row.has_origin_bytes),
        run_id=row.run_id,
    )


def _bytes_codes(
    record: model.FlakeFreeze, fixture_bytes: bytes | None, origin_bytes: bytes | None
) -> tuple[str, ...]:
    """The ledger keeps both payloads' bytes; they must be present and match their digests."""
    from orchestrator.core.digest import digest

    codes: list[str] = []
    for name, blob, expected in (
        ("fixture_bytes", fixture_bytes, record.fixture_digest),
        ("origin_bytes", origin_bytes, record.origin_digest),
    ):
        if blob is None:
            codes.append(f"missing_field:{name}")
            continue
        try:
            parsed = json.loads(blob.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            codes.append(f"{name}_not_json")
            continue
        if expected and digest(parsed) != expected:
            codes.append(f"{name}_digest_mismatch")
    return tuple(codes)


def default_root() -> Path:
    """The folder whose ``.replay/`` holds the embedded ledger: the current directory."""
    return Path(os.getcwd())
