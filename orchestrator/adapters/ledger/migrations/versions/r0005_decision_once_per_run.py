"""A decision event names its run; one run records one decision per property.

A CI job that is retried (the same ``--run-id``) replays its properties again; the
second recording of a property's decision in that run is no new event. The database
holds the rule: a unique index on (run_id, subject) over decision events that name a
run. Events written before this revision name none and are left as they are.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from orchestrator.adapters.ledger.migrations import mark_version, unmark_version

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_WHERE = "kind = 'decision' AND run_id IS NOT NULL"


def upgrade() -> None:
    op.add_column("events", sa.Column("run_id", sa.String(128), nullable=True))
    op.create_index(
        "ux_events_decision_per_run",
        "events",
        ["run_id", "subject"],
        unique=True,
        sqlite_where=sa.text(_WHERE),
        postgresql_where=sa.text(_WHERE),
    )
    mark_version(5)


def downgrade() -> None:
    unmark_version(5)
    op.drop_index("ux_events_decision_per_run", table_name="events")
    # Dropped in place (SQLite >= 3.35), never by copying the append-only table.
    with op.batch_alter_table("events", recreate="never") as batch:
        batch.drop_column("run_id")
