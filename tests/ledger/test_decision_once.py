"""One decision event per property and run, on SQLite and PostgreSQL, also between writers
at once: a retried CI job (the same run id) records no second one."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from ledger_factories import NOW, PROPERTY, evidence

from orchestrator import model
from orchestrator.adapters.ledger import Ledger
from orchestrator.core.lanes import decide
from orchestrator.services import ledger_jobs


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    with Ledger.open(ledger_url) as store:
        yield store


def decisions(ledger: Ledger) -> list[model.Event]:
    return ledger.events(kinds={model.EventKind.DECISION})


def test_a_run_records_a_propertys_decision_once(ledger: Ledger) -> None:
    found = evidence()
    decision = decide(found)
    first = ledger_jobs.record_decision_once(ledger, found, decision, NOW, run_id="ci-1")
    again = ledger_jobs.record_decision_once(ledger, found, decision, NOW, run_id="ci-1")
    assert first[1] is True
    assert again == (first[0], False)
    other_run = ledger_jobs.record_decision_once(ledger, found, decision, NOW, run_id="ci-2")
    assert other_run[1] is True
    assert [(e.subject, e.detail["run_id"]) for e in decisions(ledger)] == [
        (PROPERTY, "ci-1"),
        (PROPERTY, "ci-2"),
    ]


def test_decisions_that_name_no_run_are_all_kept(ledger: Ledger) -> None:
    found = evidence()
    decision = decide(found)
    ids = {ledger_jobs.record_decision(ledger, found, decision, NOW) for _ in range(3)}
    assert len(ids) == 3
    assert len(decisions(ledger)) == 3


def test_writers_at_once_record_one_decision(ledger_url: str) -> None:
    found = evidence()
    decision = decide(found)
    Ledger.open(ledger_url).close()  # the schema exists before the race
    barrier = threading.Barrier(6)
    results: list[tuple[int, bool]] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            with Ledger.open(ledger_url) as store:
                barrier.wait(timeout=60)
                results.append(
                    ledger_jobs.record_decision_once(store, found, decision, NOW, run_id="ci-9")
                )
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sorted(new for _, new in results) == [False] * 5 + [True]
    assert len({event_id for event_id, _ in results}) == 1
    with Ledger.open(ledger_url) as store:
        assert len(decisions(store)) == 1


def test_a_whole_runs_decisions_in_one_statement_are_recorded_once(ledger: Ledger) -> None:
    found = [evidence(property_id=f"tests/test_m.py::test_{n}") for n in range(700)]
    decided = [(item, decide(item)) for item in found]
    # One property recorded before (a retried job that got that far): kept, not written again.
    first_id, _ = ledger_jobs.record_decision_once(ledger, *decided[3], NOW, run_id="ci-1")
    recorded = ledger_jobs.record_decisions_once(ledger, decided, NOW, run_id="ci-1")
    assert len(recorded) == len(decided)
    assert recorded[3] == (first_id, False)
    assert [new for index, (_, new) in enumerate(recorded) if index != 3] == [True] * 699
    events = {event.id: event for event in decisions(ledger)}
    assert len(events) == 700
    for (event_id, _), (item, decision) in zip(recorded, decided, strict=True):
        assert events[event_id].subject == item.property_id
        assert events[event_id].code == decision.code
        assert events[event_id].detail["run_id"] == "ci-1"
    # Again (the whole job retried): every id comes back, nothing is written.
    assert ledger_jobs.record_decisions_once(ledger, decided, NOW, run_id="ci-1") == [
        (event_id, False) for event_id, _ in recorded
    ]
    assert len(decisions(ledger)) == 700
    assert ledger_jobs.record_decisions_once(ledger, [], NOW, run_id="ci-1") == []
