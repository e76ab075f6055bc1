"""Ledger wiring shared by the commands: what a decision, an admission or a check records.

Functions here take an open :class:`~orchestrator.adapters.ledger.Ledger` and values; the
clock (``now``) is always passed in. The pure rules they rely on live in
``orchestrator.core`` (records validation, digests); nothing here decides a lane.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from orchestrator import model
from orchestrator.adapters.ledger.values import (
    DEFAULT_FLAKE_MAX_AGE,
    DEFAULT_TIMING_MAX_AGE,
    FreezeRow,
    InfraEntry,
    RunRecord,
    WriteOutcome,
)
from orchestrator.core.records import flake_freeze_from_replay, freeze_payloads

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported by whoever opens one
    from orchestrator.adapters.ledger import Ledger

EXPORT_SCHEMA = "freeze-export/1"
OPENED = "timing_debt_opened"


def _labels(replays: Sequence[model.Replay]) -> list[str]:
    return [replay.label for replay in replays]


def _calls(replays: Sequence[model.Replay]) -> list[dict[str, int]]:
    return [dict(sorted(replay.calls.items())) for replay in replays]


def record_decision(
    ledger: Ledger,
    evidence: model.Evidence,
    decision: model.Decision,
    now: datetime,
    run_id: str | None = None,
) -> int:
    """Append the DECISION event ``tally`` counts (lanes.md section 7)."""
    return record_decision_once(ledger, evidence, decision, now, run_id=run_id)[0]


def record_decision_once(
    ledger: Ledger,
    evidence: model.Evidence,
    decision: model.Decision,
    now: datetime,
    *,
    run_id: str | None,
) -> tuple[int, bool]:
    """The DECISION event, once per property and run: ``(event id, written now)``. A run
    that records a property again (a retried CI job with the same run id) gets the id of
    the first event and writes nothing."""
    event = decision_event(evidence, decision, now, run_id=run_id)
    if run_id is None:
        return ledger.append_event(event), True
    return ledger.append_decision_once(event, run_id=run_id)


def record_decisions_once(
    ledger: Ledger,
    decided: Sequence[tuple[model.Evidence, model.Decision]],
    now: datetime,
    *,
    run_id: str,
) -> list[tuple[int, bool]]:
    """:func:`record_decision_once` for every property of a run, in one statement."""
    events = [
        decision_event(evidence, decision, now, run_id=run_id) for evidence, decision in decided
    ]
    return ledger.append_decisions_once(events, run_id=run_id)


def decision_event(
    evidence: model.Evidence, decision: model.Decision, now: datetime, *, run_id: str | None
) -> model.Event:
    """The DECISION event of one property (not yet written)."""
    detail: dict[str, Any] = {
        "lane": decision.lane.value,
        "blocking": decision.blocking,
        "reasons": list(decision.reasons),
        "base_labels": _labels(evidence.base),
        "patch_labels": _labels(evidence.patch),
        "calls_base": _calls(evidence.base),
        "calls_patch": _calls(evidence.patch),
        "base_rev": evidence.base_rev,
        "patch_rev": evidence.patch_rev,
        "tests_from": evidence.tests_from,  # whose test files judged both sides, if one's
        "fixture_digest": evidence.fixture_digest,
        "origin_digest": evidence.origin_digest,
        "shrink": None if evidence.shrink is None else evidence.shrink.to_json(),
        "run_id": run_id,
    }
    return model.Event(
        id=None,
        at=now,
        kind=model.EventKind.DECISION,
        code=decision.code,
        subject=evidence.property_id,
        detail=detail,
    )


def decision_event_of(
    evidence: Mapping[str, Any],
    decision: Mapping[str, Any],
    now: datetime,
    *,
    run_id: str | None,
) -> model.Event:
    """:func:`decision_event` of a property as the run's store keeps it (its
    ``replay-evidence/1`` and ``replay-decision/1`` documents, as the tool wrote them):
    the same event, without making values of a whole suite's documents first."""
    replays = {side: _listed(evidence.get(side)) for side in ("base", "patch")}
    detail: dict[str, Any] = {
        "lane": decision.get("lane"),
        "blocking": decision.get("blocking"),
        "reasons": list(decision.get("reasons") or ()),
        "base_labels": [replay.get("label") for replay in replays["base"]],
        "patch_labels": [replay.get("label") for replay in replays["patch"]],
        "calls_base": [dict(sorted(replay.get("calls", {}).items())) for replay in replays["base"]],
        "calls_patch": [
            dict(sorted(replay.get("calls", {}).items())) for replay in replays["patch"]
        ],
        "base_rev": evidence.get("base_rev"),
        "patch_rev": evidence.get("patch_rev"),
        "tests_from": evidence.get("tests_from"),
        "fixture_digest": evidence.get("fixture_digest"),
        "origin_digest": evidence.get("origin_digest"),
        "shrink": evidence.get("shrink"),
        "run_id": run_id,
    }
    return model.Event(
        id=None,
        at=now,
        kind=model.EventKind.DECISION,
        code=str(decision.get("code")),
        subject=evidence.get("property_id"),
        detail=detail,
    )


def _listed(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def queue_infra(
    ledger: Ledger,
    evidence: model.Evidence,
    decision: model.Decision,
    now: datetime,
    run_id: str | None = None,
) -> int:
    """Put an ``infra_queue`` case in the infra queue (never in the freeze table)."""
    if decision.lane is not model.Lane.INFRA_QUEUE:
        raise ValueError(f"only infra_queue decisions are queued, not {decision.lane.value}")
    reasons = sorted(
        {
            f"{side}:{replay.label}:{replay.reason or 'unspecified'}"
            for side, replays in (("base", evidence.base), ("patch", evidence.patch))
            for replay in replays
            if model.Label.is_infra(replay.label)
        }
    )
    runners = sorted(
        {r.runner_id for r in (*evidence.base, *evidence.patch) if r.runner_id}
        | ({evidence.runner_id} if evidence.runner_id else set())
    )
    return ledger.enqueue_infra(
        InfraEntry(
            queued_at=now,
            property_id=evidence.property_id,
            code=decision.code,
            runner_id=", ".join(runners) or None,
            image_digest=evidence.image_digest,
            base_rev=evidence.base_rev,
            patch_rev=evidence.patch_rev,
            labels={"base": _labels(evidence.base), "patch": _labels(evidence.patch)},
            reasons=reasons,
            record={"evidence": evidence.to_json(), "decision": decision.to_json()},
            run_id=run_id,
        )
    )


def write_flake_freeze_from_replay(  # noqa: PLR0913, PLR0917 - the agreed interface
    ledger: Ledger,
    evidence: model.Evidence,
    decision: model.Decision,
    owner: str | None,
    expires_at: datetime | None,
    minimal_fixture_bytes: bytes | None,
    origin_bytes: bytes | None,
    shrink_path: Sequence[Mapping[str, Any]],
    now: datetime,
    *,
    run_id: str | None = None,
    max_age: timedelta = DEFAULT_FLAKE_MAX_AGE,
) -> WriteOutcome:
    """Write a flake freeze from a replay, or store why not (FREEZE_REFUSED). A replay
    without a fixture keeps JSON ``null`` as both payloads (``freeze_payloads``)."""
    record = flake_freeze_from_replay(
        evidence, owner=owner, expires_at=expires_at, shrink_path=shrink_path, now=now
    )
    fixture_bytes, origin_bytes = freeze_payloads(record, minimal_fixture_bytes, origin_bytes)
    return ledger.write_flake_freeze(
        record,
        decision=decision,
        now=now,
        fixture_bytes=fixture_bytes,
        origin_bytes=origin_bytes,
        max_age=max_age,
        run_id=run_id,
    )


@dataclass(frozen=True, kw_only=True)
class AdmissionOutcome:
    event_id: int
    freeze: WriteOutcome | None

    def to_json(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "freeze_id": None if self.freeze is None else self.freeze.freeze_id,
            "refusal_codes": [] if self.freeze is None else list(self.freeze.codes),
        }


def record_admission(
    ledger: Ledger,
    *,
    admission_code: str,
    record: model.TimingFreeze,
    now: datetime,
    detail: Mapping[str, Any] | None = None,
    max_age: timedelta = DEFAULT_TIMING_MAX_AGE,
    run_id: str | None = None,
) -> AdmissionOutcome:
    """Log an admission code; on ``timing_debt_opened`` also write the timing freeze.

    One transaction: the ADMISSION event and the freeze (or its refusal) land together.
    """
    with ledger.transaction():
        event_id = ledger.append_event(
            model.Event(
                id=None,
                at=now,
                kind=model.EventKind.ADMISSION,
                code=admission_code,
                subject=record.test_name,
                detail={
                    **(detail or {}),
                    "owner": record.owner,
                    "samples": list(record.samples or ()),
                    "budget_ms": record.budget_ms,
                    "spread_ms": record.spread_ms,
                    "run_id": run_id,
                },
            )
        )
        if admission_code != OPENED:
            return AdmissionOutcome(event_id=event_id, freeze=None)
        written = ledger.write_timing_freeze(
            record, admission_code=admission_code, now=now, max_age=max_age, run_id=run_id
        )
        return AdmissionOutcome(event_id=event_id, freeze=written)


OVERDUE_BY_CHECK = "expired_live"


def check_expired(ledger: Ledger, now: datetime) -> list[FreezeRow]:
    """Live freezes past their expiry; one OVERDUE event is appended for each."""
    with ledger.transaction():
        expired = ledger.live_freezes(expired_at=now)
        if expired:
            ledger.record_overdue(expired, now=now, code=OVERDUE_BY_CHECK)
    return expired


def export_document(rows: Sequence[FreezeRow]) -> dict[str, Any]:
    """All live rows for review in a pull request, in a stable order."""
    freezes = []
    for row in sorted(rows, key=lambda r: (r.kind.value, r.subject, r.expires_at, r.id)):
        entry: dict[str, Any] = {"id": row.id, "kind": row.kind.value, "record": dict(row.record)}
        if row.fixture_bytes is not None:
            entry["fixture"] = json.loads(row.fixture_bytes.decode("utf-8"))
        freezes.append(entry)
    return {"schema": EXPORT_SCHEMA, "freezes": freezes}


def record_run(
    ledger: Ledger,
    run_id: str,
    started_at: datetime,
    finished_at: datetime,
    exit_status: int,
    command: str | None,
    detail: Mapping[str, Any],
) -> None:
    """The run's row, written when it ends: status ``ok``, ``blocking`` or ``undecided``
    (its exit status's name)."""
    from orchestrator.errors import ExitCode

    ledger.record_run(
        RunRecord(
            id=run_id,
            started_at=started_at,
            finished_at=finished_at,
            status=ExitCode(exit_status).name.lower(),
            command=command,
            detail={**detail, "exit_status": exit_status},
        )
    )
