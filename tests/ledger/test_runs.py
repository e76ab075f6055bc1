"""A replay's run row: written when the run ends, in the transaction of its decisions."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from ledger_factories import (
    FIXTURE_BYTES,
    NOW,
    ORIGIN_BYTES,
    SHRINK_PATH,
    eligible,
    evidence,
    flake_record,
)

from orchestrator import model
from orchestrator.adapters.ledger import Ledger, RunRecord
from orchestrator.core.lanes import decide
from orchestrator.core.replay_run import Pins, PropertyOutcome, ReplayOptions, RunPlan
from orchestrator.services import ledger_jobs, property_store
from orchestrator.services import recording as service

FINISHED = NOW + timedelta(seconds=42)


def plan(tmp_path: Path) -> RunPlan:
    fixture = tmp_path / "min.json"
    fixture.write_bytes(FIXTURE_BYTES)
    found, _ = eligible()
    options = ReplayOptions(
        repo=tmp_path,
        base="main",
        patch="HEAD",
        image="orchestrator-runner:latest",
        command=found.command,
        fixture=fixture,
        replays=5,
    )
    return RunPlan(
        run_id="run-42",
        run_dir=tmp_path / "run",
        started_at=NOW,
        options=options,
        origin_bytes=ORIGIN_BYTES,
        pins=Pins(
            base_rev=found.base_rev,
            patch_rev=found.patch_rev,
            image_ref=options.image,
            image_id=found.image_digest,
            repo_digests=(),
            fixture_digest=found.fixture_digest,
            origin_digest=found.origin_digest,
            shrink=model.ShrinkSummary(
                attempts=2, identical_minima=2, stable=True, shrink_path=SHRINK_PATH
            ),
            probe_version="1.0.0",
        ),
        pytest_args=("-q",),
    )


def infra_case() -> tuple[model.Evidence, model.Decision]:
    found = evidence(patch=("assert_fail", "timeout", "assert_fail", "assert_pass", "assert_fail"))
    found = dataclasses.replace(found, property_id="tests/test_roles.py::test_other")
    decision = decide(found)
    assert decision.lane is model.Lane.INFRA_QUEUE
    return found, decision


def test_a_recorded_replay_finishes_its_run_with_its_decisions(
    ledger_url: str, tmp_path: Path
) -> None:
    run = plan(tmp_path)
    properties = [
        PropertyOutcome(index=1, evidence=eligible()[0], decision=eligible()[1]),
        PropertyOutcome(index=2, evidence=infra_case()[0], decision=infra_case()[1]),
    ]
    request = service.LedgerRequest(
        url=ledger_url, now=NOW, freeze=True, owner="team-a", expires_at=NOW + timedelta(hours=72)
    )
    # The ledger records what the run's store holds (written when the run completes).
    run.run_dir.mkdir()
    decided = service.write_outcomes(run, properties)
    property_store.finish(run.run_dir, run.run_id)
    report = service.record_in_ledger(run, decided, request, finished_at=FINISHED, exit_status=3)
    flaky, infra = report["entries"]
    assert flaky["freeze_id"] is not None, flaky["freeze_refusals"]
    assert infra["infra_queue_id"] is not None
    with Ledger.open(ledger_url) as ledger:
        assert ledger.runs() == [
            RunRecord(
                id="run-42",
                started_at=NOW,
                finished_at=FINISHED,
                status="undecided",
                command=run.options.command,
                detail={"run_dir": str(run.run_dir), "properties": 2, "exit_status": 3},
            )
        ]
        decisions = ledger.events(kinds={model.EventKind.DECISION})
        assert [e.detail["run_id"] for e in decisions] == ["run-42", "run-42"]
        (freeze,) = ledger.live_freezes()
        assert freeze.run_id == "run-42"
        (queued,) = ledger.infra_entries()
        assert queued.run_id == "run-42"


def record_then_fail(ledger: Ledger) -> None:
    """Record a run, its decision and its freeze in one transaction, then fail."""
    found, decision = eligible()
    with ledger.transaction():
        ledger_jobs.record_run(ledger, "run-1", NOW, FINISHED, 0, "pytest -q", {})
        ledger_jobs.record_decision(ledger, found, decision, NOW, run_id="run-1")
        outcome = ledger.write_flake_freeze(
            flake_record(),
            decision=decision,
            now=NOW,
            fixture_bytes=FIXTURE_BYTES,
            origin_bytes=ORIGIN_BYTES,
            run_id="run-1",
        )
        assert outcome.written
        raise OSError("disk full")  # e.g. the run folder's disk, after the writes


def test_a_run_and_its_decisions_land_together_or_not_at_all(ledger_url: str) -> None:
    with Ledger.open(ledger_url) as ledger:
        with pytest.raises(OSError, match="disk full"):
            record_then_fail(ledger)
        assert ledger.runs() == []
        assert ledger.events() == []
        assert ledger.count_freezes() == 0


def test_recording_a_run_again_completes_the_row_a_write_referenced(ledger_url: str) -> None:
    with Ledger.open(ledger_url) as ledger:
        ledger_jobs.queue_infra(ledger, *infra_case(), NOW, run_id="run-7")
        (referenced,) = ledger.runs()
        assert (referenced.status, referenced.finished_at) == ("running", None)
        ledger_jobs.record_run(ledger, "run-7", NOW, FINISHED, 1, "pytest -q", {"a": 1})
        (finished,) = ledger.runs()
        assert (finished.status, finished.finished_at) == ("blocking", FINISHED)
        assert finished.detail == {"a": 1, "exit_status": 1}
