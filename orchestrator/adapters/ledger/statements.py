"""SQLAlchemy statements the store's reads and writes share (``store``, ``claims``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Table, insert, select
from sqlalchemy.engine import Connection

from orchestrator import model
from orchestrator.adapters.ledger.rows import (
    FREEZE_PAYLOAD_COLUMNS,
    FREEZE_PAYLOAD_FLAGS,
    FREEZE_SUMMARY_COLUMNS,
)
from orchestrator.adapters.ledger.schema import EVENTS, FREEZES, RUNS
from orchestrator.adapters.ledger.values import RUN_REFERENCED, canonical


def new_id(result: Any) -> int:
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def insert_event(conn: Connection, event_row: model.Event) -> int:
    result = conn.execute(
        insert(EVENTS).values(
            at=event_row.at,
            kind=event_row.kind.value,
            code=event_row.code,
            subject=event_row.subject,
            detail=canonical(dict(event_row.detail)),
        )
    )
    return new_id(result)


def overdue_values(
    *,
    freeze_id: int,
    subject: str,
    kind: str,
    owner: str,
    expires_at: datetime,
    now: datetime,
    code: str,
    detail: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "at": now,
        "kind": model.EventKind.OVERDUE.value,
        "code": code,
        "subject": subject,
        "detail": canonical(
            {
                **detail,
                "freeze_id": freeze_id,
                "kind": kind,
                "owner": owner,
                "expires_at": expires_at.isoformat(),
            }
        ),
    }


def freeze_select(*, payloads: bool) -> Any:
    """The ``freezes`` columns :func:`rows.freeze_row` maps: the summary, whether each
    payload is there, and with ``payloads`` the payload bytes."""
    columns = [FREEZES.c[name] for name in FREEZE_SUMMARY_COLUMNS]
    flags = [
        FREEZES.c[column].is_not(None).label(label)
        for column, label in zip(FREEZE_PAYLOAD_COLUMNS, FREEZE_PAYLOAD_FLAGS, strict=True)
    ]
    if payloads:
        columns += [FREEZES.c[name] for name in FREEZE_PAYLOAD_COLUMNS]
    return select(*columns, *flags)


def dialect_insert(conn: Connection, table: Table) -> Any:
    """INSERT with ``ON CONFLICT`` support in the connection's dialect (each dialect's
    module is imported when a ledger of it is written: a read never needs one)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def ensure_run(conn: Connection, run_id: str, now: datetime) -> None:
    """A write names a run not recorded yet: give it a row (the run completes it)."""
    conn.execute(
        dialect_insert(conn, RUNS)
        .values(id=run_id, started_at=now, status=RUN_REFERENCED, detail="{}")
        .on_conflict_do_nothing(index_elements=[RUNS.c.id])
    )
