"""A replay's recording on an up-to-date SQLite ledger through the standard library
(``sqlite_writes``) against the store: the same writes must leave the same rows, and
every ledger the path may not write must go back to the store with nothing written."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator import model
from orchestrator.adapters.ledger import Ledger
from orchestrator.adapters.ledger.sqlite_writes import (
    SqliteRecorder,
    StoreNeeded,
    recorder_for,
    shown_url,
)
from orchestrator.adapters.ledger.values import InfraEntry, RunRecord
from orchestrator.errors import LedgerError

TABLES = ("runs", "events", "infra_queue")
ZONES = st.sampled_from(
    [UTC, timezone(timedelta(hours=-5)), timezone(timedelta(hours=5, minutes=30))]
)
MOMENTS = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=ZONES
)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
DETAIL = st.dictionaries(TEXT, st.none() | st.booleans() | st.integers() | TEXT, max_size=3)
RUN_IDS = st.sampled_from(["run-1", "run-2", "run-ä"])
SUBJECTS = st.sampled_from(["t.py::a", "t.py::b", "t.py::ü[1]"]) | TEXT.filter(bool)


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:
        return {
            table: connection.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
            for table in TABLES
        }


@pytest.fixture(scope="module")
def two_ledgers(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Two fresh ledgers at the head revision: one written by the store, one by the path."""
    folder = tmp_path_factory.mktemp("ledgers")
    urls = (f"sqlite:///{folder / 'store.db'}", f"sqlite:///{folder / 'path.db'}")
    for url in urls:
        Ledger.open(url).close()
    return urls


def decision(at: datetime, subject: str, detail: dict[str, Any]) -> model.Event:
    return model.Event(
        id=None,
        at=at,
        kind=model.EventKind.DECISION,
        code="consistent_pass",
        subject=subject,
        detail=detail,
    )


def apply(writer: Any, writes: list[tuple[str, Any]]) -> list[Any]:
    """The writes, in one transaction, as a replay's recording makes them."""
    answers: list[Any] = []
    with writer.transaction():
        for kind, value in writes:
            if kind == "run":
                writer.record_run(value)
            elif kind == "decisions":
                run_id, events = value
                answers.append(writer.append_decisions_once(events, run_id=run_id))
            else:
                answers.append(writer.enqueue_infra(value))
    return answers


RUNS = st.builds(
    RunRecord,
    id=RUN_IDS,
    started_at=MOMENTS,
    finished_at=st.none() | MOMENTS,
    status=st.sampled_from(["ok", "blocking", "undecided"]),
    command=st.none() | TEXT,
    detail=DETAIL,
)
DECISIONS = st.tuples(RUN_IDS, st.lists(st.builds(decision, MOMENTS, SUBJECTS, DETAIL), max_size=6))
INFRA = st.builds(
    InfraEntry,
    queued_at=MOMENTS,
    property_id=st.none() | SUBJECTS,
    code=st.sampled_from(["infra_timeout", "infra_harness"]),
    runner_id=st.none() | TEXT,
    image_digest=st.none() | TEXT,
    base_rev=st.none() | TEXT,
    patch_rev=st.none() | TEXT,
    labels=st.dictionaries(st.sampled_from(["base", "patch"]), st.lists(TEXT, max_size=3)),
    reasons=st.lists(TEXT, max_size=3),
    record=DETAIL,
    run_id=st.none() | RUN_IDS,
)
WRITES = st.lists(
    st.tuples(st.just("run"), RUNS)
    | st.tuples(st.just("decisions"), DECISIONS)
    | st.tuples(st.just("infra"), INFRA),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(writes=WRITES)
def test_the_path_leaves_the_rows_and_gives_the_ids_the_store_does(
    two_ledgers: tuple[str, str], writes: list[tuple[str, Any]]
) -> None:
    # Both ledgers get every example's writes: retried runs and repeated subjects meet
    # rows of earlier examples, as a retried CI job meets its first recording.
    store_url, path_url = two_ledgers
    with Ledger.open(store_url) as store:
        expected = apply(store, writes)
    recorder = recorder_for(path_url)
    assert recorder is not None
    assert apply(recorder, writes) == expected
    assert dump(path_url) == dump(store_url)


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger.open(url).close()
    recorder = recorder_for(url)
    assert recorder is not None
    before = dump(url)
    at = datetime(2026, 12, 1, tzinfo=UTC)

    def fail_half_way() -> None:
        with recorder.transaction():
            recorder.record_run(RunRecord(id="r", started_at=at, finished_at=at, status="ok"))
            raise RuntimeError("the caller failed half way")

    with pytest.raises(RuntimeError):
        fail_half_way()
    assert dump(url) == before


def test_a_ledger_that_left_the_head_revision_goes_back_to_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger.open(url).close()
    recorder = recorder_for(url)
    assert recorder is not None
    with sqlite3.connect(tmp_path / "ledger.db") as connection:  # as an older tool left it
        connection.execute("UPDATE alembic_version SET version_num = 'r0001'")
    before = dump(url)
    at = datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(StoreNeeded), recorder.transaction():
        recorder.record_run(RunRecord(id="r", started_at=at, finished_at=at, status="ok"))
    assert dump(url) == before


def test_another_writer_holding_the_lock_too_long_is_the_stores_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger.open(url).close()
    monkeypatch.setenv("ORCHESTRATOR_LEDGER_WAIT_S", "0.5")
    holder = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        recorder = recorder_for(url)
        assert recorder is not None
        with pytest.raises(LedgerError) as raised, recorder.transaction():
            pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(raised.value).startswith(f"ledger {url}: another writer held it locked too long")
    assert str(raised.value).endswith("nothing was written")


def test_a_writer_waits_for_another_to_finish(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger.open(url).close()
    holder = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    released.start()
    at = datetime(2026, 12, 1, tzinfo=UTC)
    recorder = recorder_for(url)
    assert recorder is not None
    with recorder.transaction():
        recorder.record_run(RunRecord(id="r", started_at=at, finished_at=at, status="ok"))
    released.join()
    holder.close()
    assert [row[0] for row in dump(url)["runs"]] == ["r"]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://user:secret@localhost/ledger",
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///%2Ftmp/ledger.db",
        "sqlite:///{folder}/ledger.db?mode=ro",
        "sqlite:///{folder}/missing.db",
    ],
)
def test_only_an_existing_plain_sqlite_file_takes_the_path(tmp_path: Path, url: str) -> None:
    url = url.format(folder=tmp_path)
    assert recorder_for(url) is None


def test_a_plain_sqlite_url_is_shown_as_the_store_shows_it(tmp_path: Path) -> None:
    from orchestrator.adapters.ledger import display_url

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert shown_url(url) == display_url(url) == url
    assert shown_url("postgresql://user:secret@localhost/ledger") is None


def test_writes_outside_a_transaction_are_refused(tmp_path: Path) -> None:
    recorder = SqliteRecorder(tmp_path / "ledger.db", "sqlite:///x")
    at = datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(RuntimeError):
        recorder.record_run(RunRecord(id="r", started_at=at, finished_at=at, status="ok"))


def test_a_run_that_writes_no_freeze_never_imports_sqlalchemy(tmp_path: Path) -> None:
    """The whole recording of such a run (checked before the containers, written after)
    on the standard library alone."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger.open(url).close()
    script = f"""
import sys
from datetime import UTC, datetime
from orchestrator import model
from orchestrator.adapters.ledger.values import RunRecord
from orchestrator.services.recording import open_ledger_for_run
from orchestrator.adapters.ledger.sqlite_writes import recorder_for
pending = open_ledger_for_run({url!r}, store_needed=False)
pending.check()
assert pending.result() is None
recorder = recorder_for({url!r})
at = datetime(2026, 12, 1, tzinfo=UTC)
with recorder.transaction():
    recorder.record_run(RunRecord(id="r", started_at=at, finished_at=at, status="ok"))
    event = model.Event(
        id=None, at=at, kind=model.EventKind.DECISION, code="c", subject="s", detail={{}}
    )
    assert recorder.append_decisions_once([event], run_id="r") == [(1, True)]
pending.close()
assert not [name for name in sys.modules if name.startswith("sqlalchemy")], "sqlalchemy"
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=60)
    assert [row[0] for row in dump(url)["runs"]] == ["r"]
