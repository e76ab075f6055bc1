"""A thaw job re-reads the rows it claimed by its token.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

from orchestrator.adapters.ledger.migrations import mark_version, unmark_version

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_freezes_claimed_by", "freezes", ["claimed_by"])
    mark_version(3)


def downgrade() -> None:
    unmark_version(3)
    op.drop_index("ix_freezes_claimed_by", table_name="freezes")
