"""The first shape: runs, freezes, events, the infra queue, and the append-only guard.

Revision ID: 0001
Revises: -
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from orchestrator.adapters.ledger.migrations import mark_version

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

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


def _postgresql() -> bool:
    return bool(op.get_context().dialect.name == "postgresql")


def upgrade() -> None:
    op.create_table(
        "schema_version",
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("applied_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime, nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("command", sa.Text, nullable=True),
        sa.Column("detail", sa.Text, nullable=False),
    )
    op.create_table(
        "freezes",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("opened_at", sa.DateTime, nullable=False),
        sa.Column("expires_at", sa.DateTime, nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("record_digest", sa.String(80), nullable=False, unique=True),
        sa.Column("fixture_bytes", sa.LargeBinary, nullable=True),
        sa.Column("origin_bytes", sa.LargeBinary, nullable=True),
        sa.Column("run_id", sa.String(128), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "events",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("code", sa.Text, nullable=False),
        sa.Column("subject", sa.Text, nullable=True),
        sa.Column("detail", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "infra_queue",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("queued_at", sa.DateTime, nullable=False),
        sa.Column("property_id", sa.Text, nullable=True),
        sa.Column("code", sa.Text, nullable=False),
        sa.Column("runner_id", sa.Text, nullable=True),
        sa.Column("image_digest", sa.Text, nullable=True),
        sa.Column("base_rev", sa.Text, nullable=True),
        sa.Column("patch_rev", sa.Text, nullable=True),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("reasons", sa.Text, nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.id"), nullable=True),
        sqlite_autoincrement=True,
    )
    for statement in _PG_APPEND_ONLY if _postgresql() else _SQLITE_APPEND_ONLY:
        op.execute(statement)
    mark_version(1)


def downgrade() -> None:
    if _postgresql():
        op.execute("DROP TRIGGER events_no_truncate ON events")
        op.execute("DROP TRIGGER events_append_only ON events")
        op.execute("DROP FUNCTION ledger_events_append_only()")
    else:
        op.execute("DROP TRIGGER events_no_delete")
        op.execute("DROP TRIGGER events_no_update")
    for name in ("infra_queue", "events", "freezes", "runs", "schema_version"):
        op.drop_table(name)
