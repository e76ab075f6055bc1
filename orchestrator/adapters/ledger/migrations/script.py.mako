"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from orchestrator.adapters.ledger.migrations import mark_version, unmark_version
${imports if imports else ""}
revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}
    mark_version(${int(up_revision)})


def downgrade() -> None:
    unmark_version(${int(up_revision)})
    ${downgrades if downgrades else "pass"}
