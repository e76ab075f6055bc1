"""The ledger as the commands ask it: each function opens it, asks, and closes it.

The read commands (``freeze list``, ``infra list``, ``check``) take the standard
library's path on an up-to-date SQLite ledger (``adapters/ledger/sqlite_reads``) and open
the store (SQLAlchemy, Alembic) only when that path cannot answer, so they start fast;
nothing heavy is imported here before a function runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    from orchestrator import model
    from orchestrator.adapters.ledger import FreezeRow as FreezeRow  # noqa: PLC0414
    from orchestrator.adapters.ledger import InfraEntry as InfraEntry  # noqa: PLC0414
    from orchestrator.services.ledger_jobs import AdmissionOutcome


def live_freezes(url: str, *, expired_at: datetime | None = None) -> list[FreezeRow]:
    """The live freezes (only those past ``expired_at`` when given)."""
    from orchestrator.adapters.ledger import sqlite_reads

    rows = sqlite_reads.live_freezes(url, expired_at=expired_at)
    if rows is not None:
        return list(rows)
    from orchestrator.adapters.ledger import Ledger  # not an up-to-date SQLite ledger

    with Ledger.open(url) as store:
        return list(store.live_freezes(expired_at=expired_at))


def infra_entries(url: str) -> list[InfraEntry]:
    """The queued infrastructure cases."""
    from orchestrator.adapters.ledger import sqlite_reads

    entries = sqlite_reads.infra_entries(url)
    if entries is not None:
        return list(entries)
    from orchestrator.adapters.ledger import Ledger

    with Ledger.open(url) as store:
        return list(store.infra_entries())


def overdue_freezes(url: str, now: datetime) -> list[FreezeRow]:
    """The live freezes past their expiry at ``now``, each recorded as overdue (a write:
    the store reads them again in its transaction)."""
    from orchestrator.adapters.ledger import sqlite_reads

    expired = sqlite_reads.live_freezes(url, expired_at=now)
    if expired is not None and not expired:
        return []
    from orchestrator.adapters.ledger import Ledger
    from orchestrator.services.ledger_jobs import check_expired

    with Ledger.open(url) as store:
        return check_expired(store, now)


def freeze(url: str, freeze_id: int) -> FreezeRow | None:
    """One live freeze with its stored payloads (None: no such live freeze)."""
    from orchestrator.adapters.ledger import Ledger

    with Ledger.open(url) as store:
        return store.freeze(freeze_id)


def export_document(url: str) -> dict[str, Any]:
    """Every live freeze with its payloads, for review in a pull request."""
    from orchestrator.adapters.ledger import Ledger
    from orchestrator.services.ledger_jobs import export_document as document

    with Ledger.open(url) as store:
        return document(store.live_freezes(payloads=True))


def record_admission(
    url: str,
    *,
    admission_code: str,
    record: model.TimingFreeze,
    now: datetime,
    detail: Mapping[str, Any] | None = None,
) -> AdmissionOutcome:
    """An admission's code (and the timing freeze it opens), appended to the ledger."""
    from orchestrator.adapters.ledger import Ledger
    from orchestrator.services.ledger_jobs import record_admission as record_in

    with Ledger.open(url) as store:
        return record_in(
            store, admission_code=admission_code, record=record, now=now, detail=detail
        )
