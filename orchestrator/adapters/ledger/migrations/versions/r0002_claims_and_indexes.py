"""Claims for concurrent thaw jobs, and the indexes the scheduled jobs read through.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from orchestrator.adapters.ledger.migrations import mark_version, unmark_version

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_INDEXES = (
    ("ix_freezes_expires_at", "freezes", ["expires_at"]),
    ("ix_freezes_kind_subject", "freezes", ["kind", "subject"]),
    ("ix_events_kind_at", "events", ["kind", "at"]),
    ("ix_events_at", "events", ["at"]),
    ("ix_events_subject", "events", ["subject"]),
    ("ix_infra_queued_at", "infra_queue", ["queued_at"]),
)


def upgrade() -> None:
    op.add_column("freezes", sa.Column("claimed_by", sa.String(64), nullable=True))
    op.add_column("freezes", sa.Column("claimed_at", sa.DateTime, nullable=True))
    op.add_column("freezes", sa.Column("probed_at", sa.DateTime, nullable=True))
    for name, table, columns in _INDEXES:
        op.create_index(name, table, columns)
    mark_version(2)


def downgrade() -> None:
    unmark_version(2)
    for name, table, _columns in reversed(_INDEXES):
        op.drop_index(name, table_name=table)
    # Dropped in place (SQLite >= 3.35), never by copying the table.
    with op.batch_alter_table("freezes", recreate="never") as batch:
        for column in ("probed_at", "claimed_at", "claimed_by"):
            batch.drop_column(column)
