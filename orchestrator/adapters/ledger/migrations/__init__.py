"""Alembic migration scripts of the ledger (``env.py``, ``versions/``), shipped in the package.

Run by :mod:`orchestrator.adapters.ledger.migrate` with an open connection; there is no
``alembic.ini``. A new revision is a new file in ``versions/`` whose ``revision`` is the
next number (``0005``), added to ``revisions.REVISIONS``, ending with ``mark_version``.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

_VERSIONS = sa.table(
    "schema_version", sa.column("version", sa.Integer), sa.column("applied_at", sa.DateTime)
)


def mark_version(version: int) -> None:
    """Add ``version`` to the pre-Alembic ``schema_version`` table (see schema.py)."""
    applied_at = datetime.now(UTC).replace(tzinfo=None)
    op.bulk_insert(_VERSIONS, [{"version": version, "applied_at": applied_at}])


def unmark_version(version: int) -> None:
    op.execute(_VERSIONS.delete().where(_VERSIONS.c.version == version))
