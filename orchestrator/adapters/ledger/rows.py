"""Rows as the ledger's values: one mapping per table, for every way the ledger is read.

No SQLAlchemy here. The store passes a SQLAlchemy row's mapping; the SQLite read path
(``sqlite_reads``) passes a ``sqlite3.Row`` whose date-times it has already converted as
SQLAlchemy does, so both paths build their values with the same code.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from orchestrator.adapters.ledger.values import FreezeRow, InfraEntry, RunRecord
from orchestrator.kinds import FreezeKind

if TYPE_CHECKING:
    from orchestrator import model


class Row(Protocol):
    """A row by column name: SQLAlchemy's ``row._mapping``, or a dict."""

    def __getitem__(self, name: str, /) -> Any: ...

    def __contains__(self, name: object, /) -> bool: ...


# The ``freezes`` columns a listing reads (the payload bytes are read only on request).
FREEZE_SUMMARY_COLUMNS = (
    "id",
    "kind",
    "subject",
    "owner",
    "opened_at",
    "expires_at",
    "record",
    "record_digest",
    "run_id",
)
FREEZE_PAYLOAD_COLUMNS = ("fixture_bytes", "origin_bytes")
# Whether a freeze has each payload, read beside the summary as these labels.
FREEZE_PAYLOAD_FLAGS = ("has_fixture_bytes", "has_origin_bytes")


def freeze_row(row: Row) -> FreezeRow:
    """A ``freezes`` row; its payload bytes when the row carries them, else None."""
    with_payloads = "fixture_bytes" in row
    return FreezeRow(
        id=row["id"],
        kind=FreezeKind(row["kind"]),
        subject=row["subject"],
        owner=row["owner"],
        opened_at=row["opened_at"],
        expires_at=row["expires_at"],
        record_json=row["record"],
        fixture_bytes=row["fixture_bytes"] if with_payloads else None,
        origin_bytes=row["origin_bytes"] if with_payloads else None,
        has_fixture_bytes=bool(row["has_fixture_bytes"]),
        has_origin_bytes=bool(row["has_origin_bytes"]),
        run_id=row["run_id"],
    )


def infra_entry(row: Row) -> InfraEntry:
    return InfraEntry(
        id=row["id"],
        queued_at=row["queued_at"],
        property_id=row["property_id"],
        code=row["code"],
        runner_id=row["runner_id"],
        image_digest=row["image_digest"],
        base_rev=row["base_rev"],
        patch_rev=row["patch_rev"],
        labels=json.loads(row["labels"]),
        reasons=tuple(json.loads(row["reasons"])),
        record=json.loads(row["record"]),
        run_id=row["run_id"],
    )


def event(row: Row) -> model.Event:
    # Imported here: the read commands' rows (freezes, infra cases) need none of
    # ``model``'s dataclasses, whose creation is most of its import time.
    from orchestrator import model

    return model.Event(
        id=row["id"],
        at=row["at"],
        kind=model.EventKind(row["kind"]),
        code=row["code"],
        subject=row["subject"],
        detail=json.loads(row["detail"]),
    )


def run_record(row: Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        status=row["status"],
        command=row["command"],
        detail=json.loads(row["detail"]),
    )
