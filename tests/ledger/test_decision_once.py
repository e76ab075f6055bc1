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
