"""The quarantine plugin's sources on a real ledger (SQLite and PostgreSQL): the ledger URL
and the file `freeze export` writes give the same freezes, and a session reads them without
writing anything."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ledger_factories import FIXTURE_BYTES, ORIGIN_BYTES, eligible, flake_record, timing_record

from orchestrator.adapters.ledger import Ledger, read_only
from orchestrator.core.digest import canonical_json
from orchestrator.core.quarantine import freezes_from_export
from orchestrator.errors import LedgerLocationError
from orchestrator.quarantine.source import load
from orchestrator.services.ledger_jobs import export_document

NOW = datetime.now(UTC)
FLAKY = "test_suite.py::test_flaky"
SLOW = "test_suite.py::test_slow"
SUITE = """\
def test_flaky():
    assert 1 == 2, "fails on every second run"


def test_slow():
    raise TimeoutError("no answer within the budget")
"""


def fill(url: str) -> None:
    """A flake freeze and a timing freeze naming the suite's two tests, opened now."""
    _, decision = eligible()
    with Ledger.open(url) as store:
        flake = flake_record(property_id=FLAKY, opened_at=NOW, expires_at=NOW + timedelta(days=3))
        assert store.write_flake_freeze(
            flake, decision=decision, now=NOW, fixture_bytes=FIXTURE_BYTES,
            origin_bytes=ORIGIN_BYTES,
        ).written  # fmt: skip
        timing = timing_record(test_name=SLOW, opened_at=NOW, expires_at=NOW + timedelta(hours=24))
        assert store.write_timing_freeze(
            timing, admission_code="timing_debt_opened", now=NOW
        ).written


def state(url: str) -> tuple[int, int, str | None]:
    """Events, freezes, and for SQLite the database file's digest."""
    with Ledger.open(url) as store:
        counts = store.count_events(), store.count_freezes()
    path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite") else None
    return (*counts, None if path is None else hashlib.sha256(path.read_bytes()).hexdigest())


def test_the_ledger_and_its_export_give_the_same_freezes(ledger_url: str, tmp_path: Path) -> None:
    fill(ledger_url)
    with Ledger.open(ledger_url) as store:
        stored = store.live_freezes()
        exported = export_document(store.live_freezes(payloads=True))
    assert read_only.live_freezes(ledger_url) == stored
    from_ledger = load(ledger_url)
    export = tmp_path / "freezes.json"
    export.write_bytes(canonical_json(exported))
    from_file = load(str(export))
    assert from_ledger.form == "ledger"
    assert from_file.form == "freeze-export/1"
    assert sorted(from_ledger.freezes, key=lambda f: f.freeze_id) == sorted(
        from_file.freezes, key=lambda f: f.freeze_id
    )
    assert freezes_from_export(json.loads(export.read_text())) == from_file.freezes
    assert {(f.test, f.kind.value, f.owner) for f in from_file.freezes} == {
        (FLAKY, "flake", "suite-owner"),
        (SLOW, "timing", "suite-owner"),
    }


def test_a_session_quarantines_from_the_ledger_and_writes_nothing_to_it(
    ledger_url: str, pytester: pytest.Pytester
) -> None:
    fill(ledger_url)
    before = state(ledger_url)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "orchestrator.quarantine", "-p", "no:cacheprovider", "--quarantine", ledger_url
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert result.parseoutcomes() == {"quarantined": 2}
    shown = ledger_url.rsplit("@", maxsplit=1)[-1]  # a PostgreSQL URL is shown without its password
    result.stdout.fnmatch_lines(
        [f"quarantine: 2 live freezes (1 flake, 1 timing), 0 expired, from *{shown} (ledger) at *"]
    )
    assert state(ledger_url) == before


def test_a_ledger_that_is_not_there_is_refused_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "ledger.db"
    with pytest.raises(LedgerLocationError, match="no such file"):
        read_only.live_freezes(f"sqlite:///{missing}")
    assert not missing.parent.exists()
    with pytest.raises(LedgerLocationError, match="only a sqlite:///PATH file"):
        read_only.live_freezes("sqlite://")


def test_a_ledger_past_its_expiry_is_read_as_it_is(ledger_url: str) -> None:
    """Rows past their expiry are still live rows (thaw ends them): the plugin reads them
    and says they expired."""
    _, decision = eligible()
    with Ledger.open(ledger_url) as store:
        old = dataclasses.replace(
            flake_record(property_id=FLAKY), opened_at=NOW - timedelta(days=2),
            expires_at=NOW + timedelta(days=1),
        )  # fmt: skip
        store.write_flake_freeze(
            old, decision=decision, now=NOW - timedelta(days=2), fixture_bytes=FIXTURE_BYTES,
            origin_bytes=ORIGIN_BYTES,
        )  # fmt: skip
    (freeze,) = load(ledger_url).freezes
    assert freeze.live(NOW)
    assert not freeze.live(NOW + timedelta(days=1))
