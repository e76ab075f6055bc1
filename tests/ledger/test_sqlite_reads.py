"""The read commands' SQLite path (``sqlite_reads``) against the store, on the same ledger.

Real SQLite files: the path must give exactly the store's values, and hand every ledger
it cannot read as the store would (missing, older revision, not WAL, another back end)
back to the store. PostgreSQL is always read through the store.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
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

from orchestrator import cli
from orchestrator.adapters.ledger import Ledger, sqlite_reads
from orchestrator.adapters.ledger.revisions import REVISIONS
from orchestrator.core.lanes import decide
from orchestrator.services.ledger_jobs import queue_infra


def seed(url: str) -> list[datetime]:
    """Flake freezes (with their payloads) and a timing freeze (none); expiries with
    microseconds; infra cases. Returns the expiries."""
    _, decision = eligible()
    expiries = [
        NOW + timedelta(hours=1, microseconds=250),
        NOW - timedelta(days=1),
        NOW + timedelta(days=2, seconds=7),
        NOW,
    ]
    with Ledger.open(url) as ledger:
        for n, expires in enumerate(expiries[:3], start=1):
            opened = expires - timedelta(hours=1)
            outcome = ledger.write_flake_freeze(
                flake_record(n, owner=f"öwner-{n}", expires_at=expires, opened_at=opened),
                decision=decision,
                now=opened,
                fixture_bytes=FIXTURE_BYTES,
                origin_bytes=ORIGIN_BYTES,
                run_id="run-1" if n == 1 else None,
            )
            assert outcome.written, outcome.codes
        opened = expiries[3] - timedelta(hours=24)
        outcome = ledger.write_timing_freeze(
            timing_record(opened_at=opened, expires_at=expiries[3]),
            admission_code="timing_debt_opened",
            now=opened,
        )
        assert outcome.written, outcome.codes
        for patch in (
            ("assert_pass", "harness_error", "assert_pass", "assert_fail"),
            ("assert_pass", "timeout", "assert_pass", "assert_fail"),
        ):
            found = evidence(base=("assert_pass", "assert_fail") * 2, patch=patch)
            queue_infra(ledger, found, decide(found), NOW)
        assert ledger.count_freezes() == 4
    return expiries


def store_rows(url: str, expired_at: datetime | None) -> list[object]:
    with Ledger.open(url) as ledger:
        return list(ledger.live_freezes(expired_at=expired_at))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def test_the_sqlite_path_gives_the_stores_values(sqlite_url: str) -> None:
    expiries = seed(sqlite_url)
    cut_offs = [
        None,
        NOW,  # equal to one expiry: <= takes it
        expiries[0],
        expiries[0] - timedelta(microseconds=1),
        NOW.astimezone(timezone(timedelta(hours=-5))),  # the same moment elsewhere
        NOW + timedelta(days=30),
        NOW - timedelta(days=30),
    ]
    for cut_off in cut_offs:
        fast = sqlite_reads.live_freezes(sqlite_url, expired_at=cut_off)
        assert fast is not None
        slow = store_rows(sqlite_url, cut_off)
        assert fast == slow, cut_off
        assert [row.to_json() for row in fast] == [row.to_json() for row in slow]  # type: ignore[attr-defined]
    with Ledger.open(sqlite_url) as ledger:
        entries = ledger.infra_entries()
    assert len(entries) == 2
    assert sqlite_reads.infra_entries(sqlite_url) == entries


def test_payload_flags_and_types_are_the_stores(sqlite_url: str) -> None:
    seed(sqlite_url)
    rows = sqlite_reads.live_freezes(sqlite_url)
    assert rows is not None
    assert [(r.has_fixture_bytes, r.has_origin_bytes) for r in rows] == [
        (True, True),
        (True, True),
        (True, True),
        (False, False),
    ]
    assert all(r.fixture_bytes is None and r.origin_bytes is None for r in rows)
    assert all(r.expires_at.tzinfo is UTC and r.opened_at.tzinfo is UTC for r in rows)
    assert rows[0].expires_at.microsecond == 250
    assert {field.name for field in dataclasses.fields(rows[0])} >= {"run_id", "record_json"}


def _without_now(text: str) -> str:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return text
    doc.pop("now", None)
    return json.dumps(doc, sort_keys=True)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), _without_now(out), err


READS = (
    ("freeze", "list"),
    ("freeze", "list", "--json"),
    ("freeze", "list", "--expired"),
    ("freeze", "list", "--expired", "--json"),
    ("infra", "list"),
    ("infra", "list", "--json"),
    ("check",),
    ("check", "--json"),
)


@pytest.mark.parametrize("expired", [False, True], ids=["none-expired", "some-expired"])
def test_the_commands_print_the_same_on_either_path(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sqlite_url: str,
    expired: bool,
) -> None:
    _, decision = eligible()
    real_now = datetime.now(UTC)
    with Ledger.open(sqlite_url) as ledger:
        for n in range(3):
            expires = real_now + timedelta(days=2) if n or not expired else real_now
            outcome = ledger.write_flake_freeze(
                flake_record(n, opened_at=real_now - timedelta(days=1), expires_at=expires),
                decision=decision,
                now=real_now - timedelta(days=1),
                fixture_bytes=FIXTURE_BYTES,
                origin_bytes=ORIGIN_BYTES,
            )
            assert outcome.written, outcome.codes
        found = evidence(
            base=("assert_pass", "assert_fail") * 2,
            patch=("assert_pass", "harness_error", "assert_pass", "assert_fail"),
        )
        queue_infra(ledger, found, decide(found), NOW)
    fast = [run(capsys, *argv, "--ledger", sqlite_url) for argv in READS]
    monkeypatch.setattr(sqlite_reads, "live_freezes", lambda *_a, **_k: None)
    monkeypatch.setattr(sqlite_reads, "infra_entries", lambda *_a, **_k: None)
    slow = [run(capsys, *argv, "--ledger", sqlite_url) for argv in READS]
    assert fast == slow
    assert (fast[6][0], fast[7][0]) == ((1, 1) if expired else (0, 0))


def test_ledgers_it_cannot_read_as_the_store_would_go_to_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"sqlite:///{tmp_path / 'new' / 'ledger.db'}"
    assert sqlite_reads.live_freezes(missing) is None
    assert sqlite_reads.infra_entries(missing) is None
    assert run(capsys, "freeze", "list", "--ledger", missing)[:2] == (0, "no live freezes\n")
    assert sqlite_reads.live_freezes(missing) == []  # the store created it at the head

    older = tmp_path / "older.db"
    Ledger.open(f"sqlite:///{older}", target_revision=REVISIONS[-2]).close()
    assert sqlite_reads.live_freezes(f"sqlite:///{older}") is None
    assert run(capsys, "infra", "list", "--ledger", f"sqlite:///{older}")[0] == 0
    assert sqlite_reads.infra_entries(f"sqlite:///{older}") == []  # upgraded by the store

    rollback = tmp_path / "rollback.db"
    Ledger.open(f"sqlite:///{rollback}").close()
    with sqlite3.connect(rollback) as connection:
        connection.execute("PRAGMA journal_mode = DELETE")
    assert sqlite_reads.live_freezes(f"sqlite:///{rollback}") is None

    not_a_database = tmp_path / "notes.db"
    not_a_database.write_text("not a database\n")
    not_a_database.with_name("notes.db.lock").touch()
    assert sqlite_reads.live_freezes(f"sqlite:///{not_a_database}") is None


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////abs/ledger.db", Path("/abs/ledger.db")),
        ("sqlite:///relative/ledger.db", Path("relative/ledger.db")),
        ("sqlite+pysqlite:////abs/a%20b.db", Path("/abs/a b.db")),
        ("sqlite:///:memory:", None),
        ("sqlite://", None),
        ("sqlite:////abs/ledger.db?timeout=5", None),
        ("sqlite+aiosqlite:////abs/ledger.db", None),
        ("postgresql+psycopg://user@127.0.0.1:5432/ledger", None),
    ],
)
def test_only_plain_sqlite_file_urls_take_the_path(url: str, path: Path | None) -> None:
    assert sqlite_reads.sqlite_path(url) == path


def test_urls_are_read_as_sqlalchemy_reads_them() -> None:
    from sqlalchemy.engine import make_url

    for url in ("sqlite:////abs/ledger.db", "sqlite+pysqlite:////abs/a%20b.db"):
        assert sqlite_reads.sqlite_path(url) == Path(make_url(url).database or "")


@pytest.mark.postgres
@pytest.mark.parametrize("ledger_url", ["postgresql"], indirect=True)
def test_postgresql_is_read_through_the_store(ledger_url: str, backend: str) -> None:
    assert backend == "postgresql"
    seed(ledger_url)
    assert sqlite_reads.live_freezes(ledger_url) is None
    assert sqlite_reads.infra_entries(ledger_url) is None
    assert len(store_rows(ledger_url, None)) == 4
