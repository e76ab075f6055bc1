"""The ledger store on real SQLite and a real PostgreSQL: schema, refusals, append-only log."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from ledger_factories import (
    FIXTURE_BYTES,
    NOW,
    ORIGIN_BYTES,
    eligible,
    evidence,
    flake_record,
    timing_record,
)
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from orchestrator import model
from orchestrator.adapters.ledger import Ledger
from orchestrator.core import records
from orchestrator.core.digest import NULL_DIGEST, canonical_json
from orchestrator.core.lanes import decide
from orchestrator.errors import LedgerError, LedgerLocationError
from orchestrator.services import ledger_jobs


@pytest.fixture
def ledger(ledger_url: str):
    with Ledger.open(ledger_url) as store:
        yield store


def write_flake(ledger: Ledger, record: model.FlakeFreeze, **kwargs):
    _, decision = eligible()
    options = {"fixture_bytes": FIXTURE_BYTES, "origin_bytes": ORIGIN_BYTES}
    options.update(kwargs)
    return ledger.write_flake_freeze(record, decision=decision, now=NOW, **options)


# --- opening -------------------------------------------------------------------------


def test_an_unusable_url_is_refused_as_input() -> None:
    with pytest.raises(LedgerLocationError, match="not a database URL"):
        Ledger.open("not a url at all")
    with pytest.raises(LedgerLocationError, match="only sqlite and postgresql"):
        Ledger.open("mysql://nobody@127.0.0.1/x")


def test_an_unusable_sqlite_path_is_refused_as_input(tmp_path: Path) -> None:
    afile = tmp_path / "plain-file"
    afile.write_text("not a folder\n")
    with pytest.raises(LedgerLocationError, match="is a file, not a folder"):
        Ledger.open(f"sqlite:///{afile}/sub/ledger.db")
    with pytest.raises(LedgerLocationError, match="is a folder"):
        Ledger.open(f"sqlite:///{tmp_path}")
    assert afile.read_text() == "not a folder\n"


# --- the append-only event log --------------------------------------------------------


def test_the_event_log_refuses_update_and_delete(ledger: Ledger, backend: str) -> None:
    event_id = ledger.append_event(
        model.Event(id=None, at=NOW, kind=model.EventKind.DECISION, code="kept", detail={"a": 1})
    )
    statements = [
        "UPDATE events SET code = 'rewritten'",
        "DELETE FROM events",
        f"DELETE FROM events WHERE id = {event_id}",
    ]
    if backend == "postgresql":
        statements.append("TRUNCATE events")
    for statement in statements:
        with pytest.raises(DBAPIError, match="append-only"), ledger.engine.begin() as conn:
            conn.execute(text(statement))
    (kept,) = ledger.events()
    assert (kept.id, kept.code, dict(kept.detail)) == (event_id, "kept", {"a": 1})


def test_events_filter_by_time_and_kind(ledger: Ledger) -> None:
    kinds = [model.EventKind.DECISION, model.EventKind.OVERDUE, model.EventKind.DECISION]
    for hours, kind in enumerate(kinds):
        ledger.append_event(
            model.Event(id=None, at=NOW + timedelta(hours=hours), kind=kind, code=f"c{hours}")
        )
    assert [e.code for e in ledger.events()] == ["c0", "c1", "c2"]
    assert [e.code for e in ledger.events(since=NOW + timedelta(hours=1))] == ["c1", "c2"]
    assert [e.code for e in ledger.events(kinds={model.EventKind.DECISION})] == ["c0", "c2"]
    assert all(e.at.tzinfo is not None for e in ledger.events())


# --- flake freezes --------------------------------------------------------------------


def test_a_complete_flake_freeze_is_stored_with_both_payloads(ledger: Ledger) -> None:
    record = flake_record()
    outcome = write_flake(ledger, record)
    assert outcome.written
    assert outcome.codes == ()
    row = ledger.freeze(outcome.freeze_id)
    assert row is not None
    assert row.kind is model.FreezeKind.FLAKE
    assert (row.subject, row.owner) == (record.property_id, record.owner)
    assert (row.opened_at, row.expires_at) == (record.opened_at, record.expires_at)
    assert canonical_json(dict(row.record)) == canonical_json(records.flake_freeze_to_json(record))
    # seed 000: the minimal row never replaces the wide one; both byte strings are kept.
    assert row.fixture_bytes == FIXTURE_BYTES
    assert row.origin_bytes == ORIGIN_BYTES
    (written,) = ledger.events(kinds={model.EventKind.FREEZE_WRITTEN})
    assert written.detail["freeze_id"] == outcome.freeze_id
    assert written.subject == record.property_id


def test_the_same_record_twice_is_one_row(ledger: Ledger) -> None:
    first = write_flake(ledger, flake_record())
    second = write_flake(ledger, flake_record())
    assert first.freeze_id == second.freeze_id
    assert ledger.count_freezes() == 1


def _nothing_written_and_refusal_logged(ledger: Ledger, outcome, before: int) -> None:
    assert not outcome.written
    assert ledger.count_freezes() == 0
    refusals = ledger.events(kinds={model.EventKind.FREEZE_REFUSED})
    assert len(refusals) == before + 1
    assert refusals[-1].code == outcome.codes[0]
    assert refusals[-1].detail["codes"] == list(outcome.codes)


def test_every_missing_flake_field_is_refused_with_its_own_code(ledger: Ledger) -> None:
    refused = 0
    for name in records.FLAKE_FIELDS:
        empties: list[object] = [None]
        if isinstance(getattr(flake_record(), name), str):
            empties.append("  ")
        for empty in empties:
            outcome = write_flake(ledger, flake_record(**{name: empty}))
            assert outcome.codes[0] == f"missing_field:{name}", (name, outcome.codes)
            _nothing_written_and_refusal_logged(ledger, outcome, refused)
            refused += 1


def test_missing_or_mismatched_payload_bytes_are_refused(ledger: Ledger) -> None:
    cases = [
        ({"fixture_bytes": None}, "missing_field:fixture_bytes"),
        ({"origin_bytes": None}, "missing_field:origin_bytes"),
        ({"fixture_bytes": b'{"user_id": 1}'}, "fixture_bytes_digest_mismatch"),
        ({"origin_bytes": FIXTURE_BYTES}, "origin_bytes_digest_mismatch"),
        ({"fixture_bytes": b"\xff not json"}, "fixture_bytes_not_json"),
    ]
    for refused, (change, code) in enumerate(cases):
        outcome = write_flake(ledger, flake_record(), **change)
        assert outcome.codes == (code,)
        _nothing_written_and_refusal_logged(ledger, outcome, refused)


def test_flake_expiry_must_be_future_and_within_the_maximum(ledger: Ledger) -> None:
    bad = [
        (NOW, "expiry_not_in_future"),
        (NOW - timedelta(seconds=1), "expiry_not_in_future"),
        (NOW + timedelta(days=7, seconds=1), "expiry_beyond_max"),
    ]
    for refused, (expires_at, code) in enumerate(bad):
        outcome = write_flake(ledger, flake_record(expires_at=expires_at))
        assert outcome.codes == (code,)
        _nothing_written_and_refusal_logged(ledger, outcome, refused)
    tighter = write_flake(ledger, flake_record(), max_age=timedelta(days=1))
    assert tighter.codes == ("expiry_beyond_max",)
    assert write_flake(ledger, flake_record(expires_at=NOW + timedelta(days=7))).written


def test_only_an_eligible_decision_may_write_a_flake_freeze(ledger: Ledger) -> None:
    uniform = evidence(patch=("assert_fail",) * 5)
    decision = decide(uniform)
    assert decision.lane is model.Lane.BLOCK_PATCH
    outcome = ledger.write_flake_freeze(
        flake_record(),
        decision=decision,
        now=NOW,
        fixture_bytes=FIXTURE_BYTES,
        origin_bytes=ORIGIN_BYTES,
    )
    assert outcome.codes == ("not_flake_queue_eligible",)
    _nothing_written_and_refusal_logged(ledger, outcome, 0)


def test_an_unshrunk_fixture_needs_no_path_but_a_shrunk_one_does(ledger: Ledger) -> None:
    refused = write_flake(ledger, flake_record(shrink_path=()))
    assert refused.codes == ("shrink_path_missing",)
    unshrunk = flake_record(shrink_path=(), origin_digest=flake_record().fixture_digest)
    assert write_flake(ledger, unshrunk, origin_bytes=FIXTURE_BYTES).written


def test_replay_service_builds_the_record_from_pinned_facts(ledger: Ledger) -> None:
    found, decision = eligible()
    outcome = ledger_jobs.write_flake_freeze_from_replay(
        ledger,
        found,
        decision,
        "suite-owner",
        NOW + timedelta(hours=72),
        FIXTURE_BYTES,
        ORIGIN_BYTES,
        flake_record().shrink_path,
        NOW,
        run_id="run-1",
    )
    assert outcome.written, outcome.codes
    row = ledger.freeze(outcome.freeze_id)
    assert row is not None
    assert row.record["assertion_id"] == found.patch[0].assertion_id
    assert row.record["replays"] == {
        "base": [r.label for r in found.base],
        "patch": [r.label for r in found.patch],
    }
    assert row.record["seed"] == found.seed
    assert row.run_id == "run-1"
    (run,) = ledger.runs()  # referenced before the run itself was recorded
    assert (run.id, run.status, run.finished_at) == ("run-1", "running", None)


def test_a_replay_without_a_fixture_freezes_with_the_null_payload(ledger: Ledger) -> None:
    """Most flaky tests read no JSON fixture: the replay's digests are those of `null` and
    nothing was shrunk. The row keeps `null` as both payloads and an empty shrink path."""
    found = evidence(fixture_digest=NULL_DIGEST, origin_digest=NULL_DIGEST, shrink=None)
    decision = decide(found)
    assert decision.lane is model.Lane.FLAKE_QUEUE_ELIGIBLE
    outcome = ledger_jobs.write_flake_freeze_from_replay(
        ledger, found, decision, "o", NOW + timedelta(hours=72), None, None, (), NOW
    )
    assert outcome.written, outcome.codes
    row = ledger.freeze(outcome.freeze_id)
    assert row is not None
    assert (row.fixture_bytes, row.origin_bytes) == (b"null", b"null")
    assert row.record["fixture_digest"] == row.record["origin_digest"] == NULL_DIGEST
    assert row.record["shrink_path"] == []
    # A payload that is not null still needs its bytes: only what the digest names is kept.
    with_fixture = evidence(origin_digest=evidence().fixture_digest, shrink=None)
    refused = ledger_jobs.write_flake_freeze_from_replay(
        ledger, with_fixture, decide(with_fixture), "o", NOW + timedelta(hours=72), None, None,
        (), NOW,
    )  # fmt: skip
    assert refused.codes == ("missing_field:fixture_bytes", "missing_field:origin_bytes")
    incomplete = evidence(fixture_digest=NULL_DIGEST, origin_digest=NULL_DIGEST, shrink=None)
    refused = ledger_jobs.write_flake_freeze_from_replay(
        ledger, incomplete, decision, None, NOW + timedelta(hours=72), None, None, (), NOW
    )
    assert refused.codes == ("missing_field:owner",)
    assert ledger.count_freezes() == 1


# --- timing freezes and admissions ----------------------------------------------------


def test_every_missing_timing_field_is_refused_with_its_own_code(ledger: Ledger) -> None:
    for refused, name in enumerate(records.TIMING_FIELDS):
        outcome = ledger.write_timing_freeze(
            timing_record(**{name: None}), admission_code="timing_debt_opened", now=NOW
        )
        assert outcome.codes[0] == f"missing_field:{name}"
        _nothing_written_and_refusal_logged(ledger, outcome, refused)


def test_timing_expiry_defaults_to_at_most_72_hours(ledger: Ledger) -> None:
    too_long = timing_record(max_age_hours=73.0, expires_at=NOW + timedelta(hours=73))
    outcome = ledger.write_timing_freeze(too_long, admission_code="timing_debt_opened", now=NOW)
    assert outcome.codes == ("expiry_beyond_max",)
    ok = timing_record(max_age_hours=72.0, expires_at=NOW + timedelta(hours=72))
    assert ledger.write_timing_freeze(ok, admission_code="timing_debt_opened", now=NOW).written


def test_an_admission_is_logged_and_only_opened_debt_writes_a_freeze(ledger: Ledger) -> None:
    rejected = ledger_jobs.record_admission(
        ledger, admission_code="spread_too_tight", record=timing_record(), now=NOW
    )
    assert rejected.freeze is None
    assert ledger.count_freezes() == 0
    opened = ledger_jobs.record_admission(
        ledger, admission_code="timing_debt_opened", record=timing_record(), now=NOW
    )
    assert opened.freeze is not None
    assert opened.freeze.written
    admissions = ledger.events(kinds={model.EventKind.ADMISSION})
    assert [e.code for e in admissions] == ["spread_too_tight", "timing_debt_opened"]
    (row,) = ledger.live_freezes()
    assert row.kind is model.FreezeKind.TIMING
    assert row.record["samples"] == list(timing_record().samples)


def test_an_opened_admission_with_a_bad_record_writes_nothing(ledger: Ledger) -> None:
    outcome = ledger_jobs.record_admission(
        ledger, admission_code="timing_debt_opened", record=timing_record(owner=""), now=NOW
    )
    assert outcome.freeze is not None
    assert outcome.freeze.codes == ("missing_field:owner",)
    assert ledger.count_freezes() == 0
    kinds = [e.kind for e in ledger.events()]
    assert kinds == [model.EventKind.ADMISSION, model.EventKind.FREEZE_REFUSED]


# --- decisions, the infra queue, overdue findings -------------------------------------


def test_a_decision_event_carries_what_tally_counts(ledger: Ledger) -> None:
    found = evidence(base=("assert_pass",) * 3, patch=("assert_pass",) * 3)
    found = dataclasses.replace(
        found,
        patch=tuple(dataclasses.replace(r, calls={"clock": 2}) for r in found.patch),
    )
    decision = decide(found)
    assert decision.code == "call_budget"
    ledger_jobs.record_decision(ledger, found, decision, NOW, "run-7")
    (logged,) = ledger.events(kinds={model.EventKind.DECISION})
    assert logged.code == "call_budget"
    assert logged.subject == found.property_id
    assert logged.detail["lane"] == "property_regression"
    assert logged.detail["base_labels"] == ["assert_pass"] * 3
    assert logged.detail["patch_labels"] == ["assert_pass"] * 3
    assert logged.detail["calls_base"] == [{"clock": 1}] * 3
    assert logged.detail["calls_patch"] == [{"clock": 2}] * 3


def test_infra_cases_go_to_the_infra_queue_never_to_freezes(ledger: Ledger) -> None:
    found = evidence(patch=("assert_fail", "timeout", "assert_fail", "assert_pass", "assert_fail"))
    found = dataclasses.replace(
        found,
        patch=tuple(
            dataclasses.replace(r, reason="deadline") if r.label == "timeout" else r
            for r in found.patch
        ),
    )
    decision = decide(found)
    assert decision.lane is model.Lane.INFRA_QUEUE
    infra_id = ledger_jobs.queue_infra(ledger, found, decision, NOW, run_id="run-2")
    (entry,) = ledger.infra_entries()
    assert entry.id == infra_id
    assert entry.code == "timeout"
    assert entry.runner_id == "local"
    assert entry.reasons == ("patch:timeout:deadline",)
    assert list(entry.labels["patch"]) == [r.label for r in found.patch]
    assert ledger.count_freezes() == 0
    (queued,) = ledger.events(kinds={model.EventKind.INFRA_QUEUED})
    assert queued.detail["infra_id"] == infra_id
    with pytest.raises(ValueError, match="only infra_queue"):
        ledger_jobs.queue_infra(ledger, *eligible(), NOW)


def test_check_finds_expired_live_freezes_and_logs_each(ledger: Ledger) -> None:
    soon = write_flake(ledger, flake_record(1, expires_at=NOW + timedelta(hours=1)))
    later = write_flake(ledger, flake_record(2, expires_at=NOW + timedelta(days=5)))
    assert ledger_jobs.check_expired(ledger, NOW) == []
    found = ledger_jobs.check_expired(ledger, NOW + timedelta(hours=2))
    assert [row.id for row in found] == [soon.freeze_id]
    (overdue,) = ledger.events(kinds={model.EventKind.OVERDUE})
    assert overdue.detail["freeze_id"] == soon.freeze_id
    assert overdue.detail["owner"] == "suite-owner"
    assert ledger.freeze(later.freeze_id) is not None


# --- claims for thaw ------------------------------------------------------------------


def test_claims_thaw_and_overdue_transitions(ledger: Ledger) -> None:
    ids = [
        write_flake(ledger, flake_record(n, expires_at=NOW + timedelta(hours=n))).freeze_id
        for n in (1, 2, 30)
    ]
    due_at = NOW + timedelta(hours=3)
    assert [r.id for r in ledger.due_freezes(due_at)] == ids[:2]
    token, claimed = ledger.claim_due(due_at)
    assert [r.id for r in claimed] == ids[:2]
    assert ledger.claim_due(due_at)[1] == []  # held by the first job
    ledger.thaw(ids[0], token=token, now=due_at, detail={"rev": "x"})
    ledger.mark_overdue(ids[1], token=token, now=due_at, code="still_flaky", detail={})
    assert ledger.freeze(ids[0]) is None
    assert ledger.freeze(ids[1]) is not None
    assert ledger.claim_due(due_at)[1] == []  # probed at this instant: not again
    later = ledger.claim_due(due_at + timedelta(days=1))[1]
    assert [r.id for r in later] == [ids[1]]  # the next scheduled run re-probes it
    with pytest.raises(LedgerError, match="not claimed"):
        ledger.thaw(ids[2], token=token, now=due_at, detail={})
    thawed = ledger.events(kinds={model.EventKind.THAWED})
    assert [e.detail["freeze_id"] for e in thawed] == [ids[0]]
    overdue = ledger.events(kinds={model.EventKind.OVERDUE})
    assert [(e.code, e.detail["freeze_id"]) for e in overdue] == [("still_flaky", ids[1])]
