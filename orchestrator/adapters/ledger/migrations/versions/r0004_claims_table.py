"""Claims move to their own table: claiming 1,000 rows no longer rewrites 1,000 records.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from orchestrator.adapters.ledger.migrations import mark_version, unmark_version

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_CLAIM_COLUMNS = ("claimed_by", "claimed_at", "probed_at")


def upgrade() -> None:
    op.create_table(
        "freeze_claims",
        sa.Column(
            "freeze_id",
            _ID,
            sa.ForeignKey("freezes.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("claimed_by", sa.String(64), nullable=True),
        sa.Column("claimed_at", sa.DateTime, nullable=True),
        sa.Column("probed_at", sa.DateTime, nullable=True),
    )
    op.execute(
        "INSERT INTO freeze_claims (freeze_id, claimed_by, claimed_at, probed_at) "
        "SELECT id, claimed_by, claimed_at, probed_at FROM freezes "
        "WHERE claimed_by IS NOT NULL OR probed_at IS NOT NULL"
    )
    op.create_index("ix_freeze_claims_claimed_by", "freeze_claims", ["claimed_by"])
    op.drop_index("ix_freezes_claimed_by", table_name="freezes")
    # In place (SQLite >= 3.35), never by copying: on SQLite a copy drops the old
    # ``freezes``, and with foreign keys on that would cascade into ``freeze_claims``.
    with op.batch_alter_table("freezes", recreate="never") as batch:
        for column in _CLAIM_COLUMNS:
            batch.drop_column(column)
    mark_version(4)


def downgrade() -> None:
    unmark_version(4)
    op.add_column("freezes", sa.Column("claimed_by", sa.String(64), nullable=True))
    op.add_column("freezes", sa.Column("claimed_at", sa.DateTime, nullable=True))
    op.add_column("freezes", sa.Column("probed_at", sa.DateTime, nullable=True))
    for column in _CLAIM_COLUMNS:
        op.execute(
            f"UPDATE freezes SET {column} = (SELECT {column} FROM freeze_claims "
            "WHERE freeze_claims.freeze_id = freezes.id)"
        )
    op.create_index("ix_freezes_claimed_by", "freezes", ["claimed_by"])
    op.drop_index("ix_freeze_claims_claimed_by", table_name="freeze_claims")
    op.drop_table("freeze_claims")
