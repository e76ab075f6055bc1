"""Real processes against one ledger: no lost or duplicated writes, kills, concurrent claims."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from ledger_factories import FIXTURE_BYTES, NOW, ORIGIN_BYTES, eligible, flake_record
from sqlalchemy import text
from sqlalchemy.engine import Connection

from orchestrator import model
from orchestrator.adapters.ledger import Ledger
from orchestrator.adapters.ledger.revisions import HEAD

WORKER = Path(__file__).with_name("ledger_worker.py")
REPO = Path(__file__).resolve().parents[2]


def spawn(*args: str, stdin: int = subprocess.PIPE) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def release_together(workers: list[subprocess.Popen[str]]) -> None:
    """Wait until every worker has opened the ledger, then let them all start at once."""
    for worker in workers:
        line = worker.stdout.readline()
        assert line.strip() == "ready", worker.stderr.read()
    for worker in workers:
        worker.stdin.write("go\n")
        worker.stdin.flush()


def finish(worker: subprocess.Popen[str]) -> str:
    out, err = worker.communicate(timeout=300)
    assert worker.returncode == 0, err
    return out.strip().splitlines()[-1]


def assert_consistent(ledger: Ledger) -> None:
    """Every live freeze has exactly one FREEZE_WRITTEN event and vice versa."""
    live = {row.id for row in ledger.live_freezes()}
    written = [e.detail["freeze_id"] for e in ledger.events(kinds={model.EventKind.FREEZE_WRITTEN})]
    assert len(written) == len(set(written))
    assert set(written) == live
    if ledger.engine.dialect.name == "sqlite":
        with ledger.engine.connect() as conn:
            assert conn.execute(text("PRAGMA integrity_check")).scalar_one() == "ok"


@pytest.mark.slow
def test_eight_processes_writing_200_freezes_each_lose_and_duplicate_nothing(
    ledger_url: str,
) -> None:
    Ledger.open(ledger_url).close()
    workers = [spawn("write", ledger_url, str(w * 1000 + 1), "200") for w in range(8)]
    release_together(workers)
    reported = [json.loads(finish(worker)) for worker in workers]
    all_ids = [i for ids in reported for i in ids]
    assert len(all_ids) == 1600
    assert len(set(all_ids)) == 1600
    with Ledger.open(ledger_url) as ledger:
        rows = ledger.live_freezes()
        assert {row.id for row in rows} == set(all_ids)
        expected = {
            flake_record(w * 1000 + 1 + i).property_id for w in range(8) for i in range(200)
        }
        assert sorted(row.subject for row in rows) == sorted(expected)
        assert_consistent(ledger)


def test_processes_writing_the_same_records_keep_one_row_each(ledger_url: str) -> None:
    """Idempotent inserts: identical records from four writers at once are one row each."""
    Ledger.open(ledger_url).close()
    workers = [spawn("write", ledger_url, "1", "100") for _ in range(4)]
    release_together(workers)
    reported = [json.loads(finish(worker)) for worker in workers]
    assert all(ids == reported[0] for ids in reported)
    assert len(set(reported[0])) == 100
    with Ledger.open(ledger_url) as ledger:
        assert {row.id for row in ledger.live_freezes()} == set(reported[0])
        assert_consistent(ledger)


@pytest.mark.slow
def test_several_processes_opening_one_fresh_ledger_at_once_all_succeed(
    ledger_url: str, backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The first open creates and migrates the ledger; the others wait for it, never fail
    (SQLite used to answer "database is locked" to the loser of this race)."""
    urls = [ledger_url]
    for n in range(1, 3):
        if backend == "sqlite":
            urls.append(f"sqlite:///{tmp_path / f'fresh-{n}.db'}")
        else:
            server = request.getfixturevalue("postgres_server")
            urls.append(server.url(server.create_database()))
    for url in urls:
        # One pipe is every worker's stdin: closing it wakes them all at the same moment.
        start, go = os.pipe()
        workers = [spawn("open", url, f"opener-{n}", stdin=start) for n in range(6)]
        os.close(start)
        for worker in workers:  # every worker has imported everything and waits
            assert worker.stdout.readline().strip() == "ready", worker.stderr.read()
        os.close(go)
        event_ids = [json.loads(finish(worker)) for worker in workers]
        assert len(set(event_ids)) == 6
        with Ledger.open(url) as ledger:
            assert ledger.schema_revision() == HEAD
            assert sorted(e.code for e in ledger.events()) == [f"opener-{n}" for n in range(6)]
            assert_consistent(ledger)


def test_a_writer_killed_inside_its_transaction_leaves_the_ledger_consistent(
    ledger_url: str,
) -> None:
    with Ledger.open(ledger_url) as ledger:
        _, decision = eligible()
        kept = ledger.write_flake_freeze(
            flake_record(1),
            decision=decision,
            now=NOW,
            fixture_bytes=FIXTURE_BYTES,
            origin_bytes=ORIGIN_BYTES,
        )
    worker = spawn("hold", ledger_url, "2")
    release_together([worker])
    assert worker.stdout.readline().strip() == "inside"
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=30)
    assert worker.returncode == -signal.SIGKILL
    with Ledger.open(ledger_url) as ledger:
        assert [row.id for row in ledger.live_freezes()] == [kept.freeze_id]
        assert_consistent(ledger)
        # The killed writer held the write lock; the ledger is writable again at once.
        _, decision = eligible()
        again = ledger.write_flake_freeze(
            flake_record(2),
            decision=decision,
            now=NOW,
            fixture_bytes=FIXTURE_BYTES,
            origin_bytes=ORIGIN_BYTES,
        )
        assert again.written
        assert_consistent(ledger)


def test_a_writer_killed_while_churning_leaves_whole_rows_only(ledger_url: str) -> None:
    Ledger.open(ledger_url).close()
    worker = spawn("churn", ledger_url, "1")
    release_together([worker])
    for _ in range(25):  # let it commit a few rows, then kill it wherever it is
        assert worker.stdout.readline().strip()
    worker.send_signal(signal.SIGKILL)
    worker.wait(timeout=30)
    with Ledger.open(ledger_url) as ledger:
        assert ledger.count_freezes() >= 25
        assert_consistent(ledger)


@pytest.mark.slow
def test_two_concurrent_thaw_jobs_never_process_the_same_row(ledger_url: str) -> None:
    with Ledger.open(ledger_url) as ledger:
        _, decision = eligible()
        due = [
            ledger.write_flake_freeze(
                flake_record(n, expires_at=NOW + timedelta(hours=1 + n % 5)),
                decision=decision,
                now=NOW,
                fixture_bytes=FIXTURE_BYTES,
                origin_bytes=ORIGIN_BYTES,
            ).freeze_id
            for n in range(1, 61)
        ]
    job_time = (NOW + timedelta(days=1)).isoformat()
    workers = [spawn("claim", ledger_url, job_time) for _ in range(2)]
    release_together(workers)
    first, second = (json.loads(finish(worker)) for worker in workers)
    assert not set(first) & set(second)
    assert sorted(first + second) == sorted(due)
    with Ledger.open(ledger_url) as ledger:
        outcomes = ledger.events(kinds={model.EventKind.THAWED, model.EventKind.OVERDUE})
        touched = [e.detail["freeze_id"] for e in outcomes]
        assert sorted(touched) == sorted(due)  # each row exactly one outcome event
        assert {row.id for row in ledger.live_freezes()} == {i for i in due if i % 2 == 0}


def wait_for_lock_wait(conn: Connection, *, besides: int) -> int:
    """The server process of the other session once it waits on a row lock (no sleep: the
    server's own view of its sessions, polled until the wait shows)."""
    while True:
        waiting = conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> :me AND wait_event_type = 'Lock'"
            ),
            {"me": besides},
        ).scalars()
        found = list(waiting)
        if found:
            return found[0]
        conn.commit()  # a new snapshot of the statistics for the next look


@pytest.mark.parametrize("outcome", ["thaw", "mark_overdue"])
def test_a_thaw_job_and_a_late_claimer_of_the_same_row_never_deadlock(
    postgres_server: Any, outcome: str
) -> None:
    """The interleaving that deadlocked two thaw jobs on PostgreSQL: job B claimed a row and
    committed; job A's pick, whose snapshot predates that commit, locked the row all the
    same and then touched its claim. B's outcome must lock the freeze first, as A does, so
    one waits for the other instead of each holding what the other needs."""
    url = postgres_server.url(postgres_server.create_database())
    with Ledger.open(url) as ledger:
        _, decision = eligible()
        freeze_id = ledger.write_flake_freeze(
            flake_record(1, expires_at=NOW + timedelta(hours=1)),
            decision=decision,
            now=NOW,
            fixture_bytes=FIXTURE_BYTES,
            origin_bytes=ORIGIN_BYTES,
        ).freeze_id
        job_time = NOW + timedelta(days=1)
        token, rows = ledger.claim_due(job_time)
        assert [row.id for row in rows] == [freeze_id]
        late = ledger.engine.connect()  # job A, its pick already holding the row
        watcher = ledger.engine.connect()
        try:
            late.execute(
                text("SELECT id FROM freezes WHERE id = :id FOR UPDATE"), {"id": freeze_id}
            )
            me = late.execute(text("SELECT pg_backend_pid()")).scalar_one()
            outcome_done: list[BaseException | int] = []

            def run_outcome() -> None:
                try:
                    if outcome == "thaw":
                        outcome_done.append(
                            ledger.thaw(freeze_id, token=token, now=job_time, detail={})
                        )
                    else:
                        outcome_done.append(
                            ledger.mark_overdue(
                                freeze_id, token=token, now=job_time, code="x", detail={}
                            )
                        )
                except BaseException as error:  # reported below
                    outcome_done.append(error)

            worker = threading.Thread(target=run_outcome)
            worker.start()
            wait_for_lock_wait(watcher, besides=me)
            # Job A's upsert of the claim: the row is B's, so it keeps it (WHERE is false).
            late.execute(
                text(
                    "INSERT INTO freeze_claims (freeze_id, claimed_by, claimed_at, probed_at) "
                    "VALUES (:id, 'job-a', :now, :now) ON CONFLICT (freeze_id) DO UPDATE "
                    "SET claimed_by = excluded.claimed_by "
                    "WHERE freeze_claims.claimed_by IS NULL"
                ),
                {"id": freeze_id, "now": job_time},
            )
            late.commit()
            worker.join(timeout=120)
            assert not worker.is_alive()
        finally:
            late.close()
            watcher.close()
        assert len(outcome_done) == 1
        assert isinstance(outcome_done[0], int), outcome_done
        kinds = {model.EventKind.THAWED, model.EventKind.OVERDUE}
        assert [e.detail["freeze_id"] for e in ledger.events(kinds=kinds)] == [freeze_id]
        live = {row.id for row in ledger.live_freezes()}
        assert live == (set() if outcome == "thaw" else {freeze_id})
