"""The schema's revisions, with no SQLAlchemy import (the SQLite read path checks them)."""

# The Alembic revisions, oldest first. Revision N is schema version N of the tool before
# Alembic (its ``schema_version`` table), so such a ledger is stamped at REVISIONS[N - 1].
# Kept here so that opening an up-to-date ledger does not import Alembic (nor reading one
# SQLAlchemy); a test checks them against the scripts.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006")
HEAD = REVISIONS[-1]
