"""The freeze ledger (SQLite by default, PostgreSQL for teams), in parts:

- ``schema``: the tables at the newest revision (the models Alembic checks against);
- ``migrations/``: the Alembic scripts that build them, one per schema version;
- ``migrate``: create or upgrade the schema on open, under a lock;
- ``connection``: engines per URL and the write/read transaction scopes;
- ``values``: the frozen values the store hands out and takes in;
- ``store``: :class:`Ledger`, the reads and writes.

Choosing the URL is ``orchestrator.adapters.ledger_location`` (no SQLAlchemy import).
"""

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
