"""A side's screening evidence, kept for a later run of the same side.

One row per key (docs/lanes.md section 10, "Reusing a side's screening"): the entry's
compressed canonical JSON, its size, the run it came from and when it was last used (the
least recently used rows go first when the table outgrows its bound). Not part of the
append-only log: an entry is a cache, written once and evicted, never updated.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from orchestrator.adapters.ledger.migrations import mark_version, unmark_version

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "side_evidence",
        sa.Column("key", sa.String(80), primary_key=True),
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("side", sa.String(32), nullable=False),
        sa.Column("rev", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("stored_at", sa.DateTime, nullable=False),
        sa.Column("used_at", sa.DateTime, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("entry", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_side_evidence_used_at", "side_evidence", ["used_at"])
    mark_version(6)


def downgrade() -> None:
    unmark_version(6)
    op.drop_index("ix_side_evidence_used_at", table_name="side_evidence")
    op.drop_table("side_evidence")
