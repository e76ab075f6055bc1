"""The freeze ledger (SQLite by default, PostgreSQL for teams), in parts:

- ``schema``: the tables at the newest revision (the models Alembic checks against);
- ``revisions``: the schema's revisions, newest last;
- ``migrations/``: the Alembic scripts that build them, one per schema version;
- ``migrate``: create or upgrade the schema on open, under a lock;
- ``connection``: engines per URL and the write/read transaction scopes;
- ``values``: the frozen values the store hands out and takes in;
- ``rows``: one mapping from a table's row to its value, for every read path;
- ``store``: :class:`Ledger`, the reads and writes (``statements``: the SQLAlchemy
  statements they share; ``claims``: the thaw jobs' claims and transitions);
- ``sqlite_reads``: the read commands' path on an up-to-date SQLite ledger, with the
  standard library's ``sqlite3`` (no SQLAlchemy); ``sqlite_writes``: a replay's recording
  (its run, decisions and infra cases, not freezes) on such a ledger, the same way;
- ``read_only``: the live freezes for the quarantine plugin, read without writing anything
  (SQLite in ``mode=ro`` with the standard library, PostgreSQL in a READ ONLY transaction).

Choosing the URL is ``orchestrator.adapters.ledger_location`` (no SQLAlchemy import).
The names below are imported when first used, so that importing ``sqlite_reads`` or
``values`` does not import the store (and SQLAlchemy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.lazy_names import lazy_names

if TYPE_CHECKING:
    from orchestrator.adapters.ledger.claims import CLAIM_TTL
    from orchestrator.adapters.ledger.connection import display_url
    from orchestrator.adapters.ledger.store import Ledger
    from orchestrator.adapters.ledger.values import (
        DEFAULT_FLAKE_MAX_AGE,
        DEFAULT_TIMING_MAX_AGE,
        FreezeRow,
        InfraEntry,
        RunRecord,
        WriteOutcome,
    )

_HOMES = {
    "CLAIM_TTL": "claims",
    "DEFAULT_FLAKE_MAX_AGE": "values",
    "DEFAULT_TIMING_MAX_AGE": "values",
    "FreezeRow": "values",
    "InfraEntry": "values",
    "Ledger": "store",
    "RunRecord": "values",
    "WriteOutcome": "values",
    "display_url": "connection",
}

__all__ = [
    "CLAIM_TTL",
    "DEFAULT_FLAKE_MAX_AGE",
    "DEFAULT_TIMING_MAX_AGE",
    "FreezeRow",
    "InfraEntry",
    "Ledger",
    "RunRecord",
    "WriteOutcome",
    "display_url",
]


__getattr__ = lazy_names(__name__, _HOMES)
