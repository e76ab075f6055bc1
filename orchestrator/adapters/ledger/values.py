"""The values the ledger hands out and takes in (frozen; no database types here)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from orchestrator.kinds import FreezeKind

DEFAULT_FLAKE_MAX_AGE = timedelta(days=7)
DEFAULT_TIMING_MAX_AGE = timedelta(hours=72)


def canonical(value: Any) -> str:
    """The JSON the ledger stores (sorted keys, compact, UTF-8 kept)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def decision_ids(
    subjects: Sequence[str], inserted: Mapping[str, int], existing: Mapping[str, int]
) -> list[tuple[int, bool]]:
    """``(event id, written now)`` for each decision subject of a run, in order, from the
    ids the insert returned and those found already recorded. A subject named twice is
    new only the first time. Pure."""
    fresh = dict(inserted)
    known = dict(existing)
    results: list[tuple[int, bool]] = []
    for subject in subjects:
        if subject in fresh:
            results.append((fresh.pop(subject), True))
            known[subject] = results[-1][0]  # the same subject again: not new
        else:
            results.append((known[subject], False))
    return results


@dataclass(frozen=True, kw_only=True)
class FreezeRow:
    """One live freeze as stored."""

    id: int
    kind: FreezeKind
    subject: str
    owner: str
    opened_at: datetime
    expires_at: datetime
    record_json: str  # canonical JSON; parsed on first use (listing 1,000 rows stays cheap)
    fixture_bytes: bytes | None  # None also when the listing did not load payloads
    origin_bytes: bytes | None
    has_fixture_bytes: bool
    has_origin_bytes: bool
    run_id: str | None

    @cached_property
    def record(self) -> Mapping[str, Any]:
        parsed: Mapping[str, Any] = json.loads(self.record_json)
        return parsed

    def expired(self, now: datetime) -> bool:
        return self.expires_at <= now

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "subject": self.subject,
            "owner": self.owner,
            "opened_at": self.opened_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "record": dict(self.record),
            "run_id": self.run_id,
            "has_fixture_bytes": self.has_fixture_bytes,
            "has_origin_bytes": self.has_origin_bytes,
        }


@dataclass(frozen=True, kw_only=True)
class WriteOutcome:
    """What a freeze write did: a new (or identical existing) row, or refusal codes."""

    freeze_id: int | None
    codes: tuple[str, ...]
    event_id: int | None

    @property
    def written(self) -> bool:
        return self.freeze_id is not None


@dataclass(frozen=True, kw_only=True)
class InfraEntry:
    """One case for the infra queue (from an ``infra_queue`` decision)."""

    queued_at: datetime
    property_id: str | None
    code: str
    runner_id: str | None
    image_digest: str | None
    base_rev: str | None
    patch_rev: str | None
    labels: Mapping[str, Sequence[str]]
    reasons: Sequence[str]
    record: Mapping[str, Any]
    run_id: str | None = None
    id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "queued_at": self.queued_at.isoformat(),
            "property_id": self.property_id,
            "code": self.code,
            "runner_id": self.runner_id,
            "image_digest": self.image_digest,
            "base_rev": self.base_rev,
            "patch_rev": self.patch_rev,
            "labels": {side: list(labels) for side, labels in self.labels.items()},
            "reasons": list(self.reasons),
            "record": dict(self.record),
            "run_id": self.run_id,
        }


RUN_REFERENCED = "running"  # a run a write named before the run itself was recorded


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One replay run: recorded when it ends, with its outcome (``ok``, ``blocking``,
    ``undecided``). A row still ``running`` was only referenced by a write."""

    id: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    command: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
