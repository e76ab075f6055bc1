"""``orchestrator admit REQUEST --record --owner``: seed 004's cases written to the ledger."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from seed004 import admission_request

from orchestrator import cli, model
from orchestrator.adapters.ledger import Ledger


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_opened_timing_debt_is_recorded_with_the_owner_given(
    capsys: pytest.CaptureFixture[str], ledger_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(admission_request()))
    code, out, err = run(
        capsys, "admit", str(path), "--record", "--owner", "lat-owner", "--ledger", ledger_url
    )
    assert code == 0, err
    assert "timing_debt_opened" in out
    with Ledger.open(ledger_url) as ledger:
        (row,) = ledger.live_freezes()
        assert row.kind is model.FreezeKind.TIMING
        assert row.owner == "lat-owner"
        assert row.expires_at == datetime(2026, 9, 25, 11, 0, tzinfo=UTC)
        assert row.record["samples"] == [840.0, 700.0, 1000.0, 820.0, 900.0]
        (admission,) = ledger.events(kinds={model.EventKind.ADMISSION})
        assert (admission.code, admission.subject) == ("timing_debt_opened", "list_latency")
        assert len(ledger.events(kinds={model.EventKind.FREEZE_WRITTEN})) == 1


def test_a_refused_admission_is_recorded_as_its_code_and_writes_no_freeze(
    capsys: pytest.CaptureFixture[str], ledger_url: str, tmp_path: Path
) -> None:
    case_a = admission_request()
    case_a["checks"][1]["passed"] = False  # seed 004 case A: a red property
    path = tmp_path / "request.json"
    path.write_text(json.dumps(case_a))
    code, out, _ = run(capsys, "admit", str(path), "--record", "--ledger", ledger_url)
    assert code == 1
    assert "property_red" in out
    with Ledger.open(ledger_url) as ledger:
        assert ledger.count_freezes() == 0
        assert [e.code for e in ledger.events()] == ["property_red"]


def test_without_record_nothing_touches_the_ledger(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORCHESTRATOR_LEDGER", raising=False)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(admission_request()))
    assert run(capsys, "admit", str(path))[0] == 0
    assert not (tmp_path / ".replay").exists()
