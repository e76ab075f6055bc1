"""The ledger's tables as of the newest schema revision (lanes.md sections 5-7).

- ``freezes``: live flake and timing freezes. The canonical JSON of the record plus a few
  indexed columns; flake freezes also keep the minimal fixture's bytes and the original
  (unshrunk) payload's bytes, so a thaw or a reviewer can replay either.
- ``freeze_claims``: thaw-job state, kept apart so that a claim rewrites a tiny row.
- ``events``: the append-only log. Rows are inserted, never updated or deleted; the
  database enforces it (SQLite triggers, a PostgreSQL trigger; see migrations r0001).
  A decision event names its run: one decision per property and run (r0005).
- ``infra_queue``: cases the runner broke (``infra_queue`` decisions), never freezes.
- ``runs``: one row per recorded replay run.
- ``side_evidence``: a side's screening evidence by its key (r0006), for a later run of
  the same side to reuse; a cache (written once, the least recently used evicted), not
  part of the log.
- ``schema_version``: one row per schema version. Alembic's ``alembic_version`` is what
  this tool reads; this older table is kept current by every migration so that a tool
  from before Alembic refuses a newer ledger with its own clear message.

These models are what the migrations in ``migrations/versions`` build; a test runs
``alembic check`` to prove the two agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    text,
)


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


ID = BigInteger().with_variant(Integer(), "sqlite")
DECISION_PER_RUN = "kind = 'decision' AND run_id IS NOT NULL"

METADATA = MetaData()

VERSIONS = Table(
    "schema_version",
    METADATA,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", UTCDateTime, nullable=False),
)

RUNS = Table(
    "runs",
    METADATA,
    Column("id", String(128), primary_key=True),
    Column("started_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=True),
    Column("status", String(32), nullable=False),
    Column("command", Text, nullable=True),
    Column("detail", Text, nullable=False),
)

FREEZES = Table(
    "freezes",
    METADATA,
    Column("id", ID, primary_key=True, autoincrement=True),
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
    # The expiry index serves both the range and the order of `freeze list --expired`,
    # `check` and the thaw claim.
    Index("ix_freezes_expires_at", "expires_at"),
    Index("ix_freezes_kind_subject", "kind", "subject"),
    sqlite_autoincrement=True,
)

CLAIMS = Table(
    "freeze_claims",
    METADATA,
    Column(
        "freeze_id",
        ID,
        ForeignKey("freezes.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("claimed_by", String(64), nullable=True),
    Column("claimed_at", UTCDateTime, nullable=True),
    Column("probed_at", UTCDateTime, nullable=True),
    Index("ix_freeze_claims_claimed_by", "claimed_by"),
)

EVENTS = Table(
    "events",
    METADATA,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("at", UTCDateTime, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("code", Text, nullable=False),
    Column("subject", Text, nullable=True),
    Column("detail", Text, nullable=False),
    Column("run_id", String(128), nullable=True),  # decision events: their run (0005)
    Index("ix_events_kind_at", "kind", "at"),
    Index("ix_events_at", "at"),
    Index("ix_events_subject", "subject"),
    # One decision per property and run: a retried CI job records no second one.
    Index(
        "ux_events_decision_per_run",
        "run_id",
        "subject",
        unique=True,
        sqlite_where=text(DECISION_PER_RUN),
        postgresql_where=text(DECISION_PER_RUN),
    ),
    sqlite_autoincrement=True,
)

INFRA = Table(
    "infra_queue",
    METADATA,
    Column("id", ID, primary_key=True, autoincrement=True),
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
    Index("ix_infra_queued_at", "queued_at"),
    sqlite_autoincrement=True,
)

SIDE_EVIDENCE = Table(
    "side_evidence",
    METADATA,
    Column("key", String(80), primary_key=True),
    Column("scope", String(64), nullable=False),
    Column("side", String(32), nullable=False),
    Column("rev", String(64), nullable=False),
    Column("run_id", String(128), nullable=False),
    Column("stored_at", UTCDateTime, nullable=False),
    Column("used_at", UTCDateTime, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("entry", LargeBinary, nullable=False),  # the compressed canonical JSON
    Index("ix_side_evidence_used_at", "used_at"),
)
