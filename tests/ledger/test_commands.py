"""The ledger commands through the real CLI entry point, on both back ends."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ledger_factories import FIXTURE_BYTES, MINIMAL, ORIGIN_BYTES, eligible, flake_record

from orchestrator import cli, model
from orchestrator.adapters.ledger import Ledger
from orchestrator.core.digest import canonical_json


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def seed_freezes(url: str) -> tuple[int, int]:
    """One freeze expired an hour ago and one expiring in three days (real clock)."""
    now = datetime.now(UTC)
    _, decision = eligible()
    ids = []
    with Ledger.open(url) as ledger:
        for n, opened, expires in (
            (1, now - timedelta(days=2), now - timedelta(hours=1)),
            (2, now, now + timedelta(days=3)),
        ):
            outcome = ledger.write_flake_freeze(
                flake_record(n, opened_at=opened, expires_at=expires, owner=f"owner-{n}"),
                decision=decision,
                now=opened,
                fixture_bytes=FIXTURE_BYTES,
                origin_bytes=ORIGIN_BYTES,
            )
            assert outcome.written, outcome.codes
            ids.append(outcome.freeze_id)
    return ids[0], ids[1]


def test_freeze_list_show_and_export(
    capsys: pytest.CaptureFixture[str], ledger_url: str, tmp_path: Path
) -> None:
    expired_id, live_id = seed_freezes(ledger_url)

    code, out, _ = run(capsys, "freeze", "list", "--ledger", ledger_url)
    assert code == 0
    header, *rows = (line.split() for line in out.splitlines())
    assert header == ["id", "kind", "state", "expires_at", "owner", "subject"]
    assert sorted((int(r[0]), r[1], r[2], r[4]) for r in rows) == [
        (expired_id, "flake", "EXPIRED", "owner-1"),
        (live_id, "flake", "live", "owner-2"),
    ]

    code, out, _ = run(capsys, "freeze", "list", "--expired", "--json", "--ledger", ledger_url)
    doc = json.loads(out)
    assert code == 0
    assert [f["id"] for f in doc["freezes"]] == [expired_id]
    assert doc["freezes"][0]["expired"] is True

    code, out, _ = run(capsys, "freeze", "show", str(live_id), "--ledger", ledger_url)
    shown = json.loads(out)
    assert code == 0
    assert shown["record"]["owner"] == "owner-2"
    assert shown["fixture"] == MINIMAL
    assert canonical_json(shown["origin"]) == canonical_json(json.loads(ORIGIN_BYTES))

    target = tmp_path / "review" / "freezes.json"
    code, _, _ = run(capsys, "freeze", "export", "--out", str(target), "--ledger", ledger_url)
    assert code == 0
    exported = target.read_bytes()
    doc = json.loads(exported)
    assert exported == canonical_json(doc) + b"\n"
    assert sorted(f["id"] for f in doc["freezes"]) == sorted([expired_id, live_id])
    code, out, _ = run(capsys, "freeze", "export", "--ledger", ledger_url)
    assert out.encode() == exported  # stable: the same rows export the same bytes


def test_freeze_show_of_an_unknown_id_is_a_one_line_usage_error(
    capsys: pytest.CaptureFixture[str], ledger_url: str
) -> None:
    code, out, err = run(capsys, "freeze", "show", "999", "--ledger", ledger_url)
    assert code == 2
    assert out == ""
    assert err.strip() == "orchestrator: error: freeze 999: no such live freeze"


def test_check_exits_1_listing_expired_freezes_and_logs_overdue(
    capsys: pytest.CaptureFixture[str], ledger_url: str
) -> None:
    code, out, _ = run(capsys, "check", "--ledger", ledger_url)
    assert (code, out.strip()) == (0, "no live freeze is past its expiry")
    expired_id, _ = seed_freezes(ledger_url)
    code, out, err = run(capsys, "check", "--ledger", ledger_url)
    assert code == 1
    assert f"freeze {expired_id}" in out
    assert "owner=owner-1" in out
    assert "owner-2" not in out
    assert "past expiry" in err
    code, out, _ = run(capsys, "check", "--json", "--ledger", ledger_url)
    assert code == 1
    assert [f["id"] for f in json.loads(out)["expired"]] == [expired_id]
    with Ledger.open(ledger_url) as ledger:
        overdue = ledger.events(kinds={model.EventKind.OVERDUE})
    assert [e.detail["freeze_id"] for e in overdue] == [expired_id, expired_id]


def test_infra_list(capsys: pytest.CaptureFixture[str], ledger_url: str) -> None:
    code, out, _ = run(capsys, "infra", "list", "--ledger", ledger_url)
    assert (code, out.strip()) == (0, "infra queue is empty")
    from ledger_factories import NOW, evidence

    from orchestrator.core.lanes import decide
    from orchestrator.services.ledger_jobs import queue_infra

    found = evidence(
        base=("assert_pass", "assert_fail", "assert_pass", "assert_fail"),
        patch=("assert_pass", "harness_error", "assert_pass", "assert_fail"),
    )
    with Ledger.open(ledger_url) as ledger:
        queue_infra(ledger, found, decide(found), NOW)
    code, out, _ = run(capsys, "infra", "list", "--ledger", ledger_url)
    assert code == 0
    header, row = (line.split() for line in out.splitlines())
    assert header == ["id", "queued_at", "code", "runner", "property", "labels", "reasons"]
    assert row[2:4] == ["harness_error", "local"]
    assert row[-1] == "patch:harness_error:unspecified"
    code, out, _ = run(capsys, "infra", "list", "--json", "--ledger", ledger_url)
    (case,) = json.loads(out)["cases"]
    assert case["labels"]["patch"][1] == "harness_error"
    assert case["reasons"] == ["patch:harness_error:unspecified"]


def test_ledger_from_environment_and_default_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORCHESTRATOR_LEDGER", raising=False)
    assert run(capsys, "freeze", "list")[0] == 0
    assert (tmp_path / ".replay" / "ledger.db").exists()
    elsewhere = tmp_path / "shared.db"
    monkeypatch.setenv("ORCHESTRATOR_LEDGER", f"sqlite:///{elsewhere}")
    assert run(capsys, "check")[0] == 0
    assert elsewhere.exists()


def test_a_newer_or_unreachable_ledger_exits_3_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with Ledger.open(url) as ledger, ledger.engine.begin() as conn:  # a newer tool's revision
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0009'")
    code, out, err = run(capsys, "freeze", "list", "--ledger", url)
    assert code == 3
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "newer than this tool" in err
    code, _, err = run(capsys, "check", "--ledger", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert code == 3
    assert len(err.strip().splitlines()) == 1
    assert "cannot be opened" in err


def test_help_texts_explain(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["freeze", "--help"], ["freeze", "export", "--help"], ["check", "--help"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0
        assert "--ledger" in out or "list" in out


@pytest.mark.parametrize(
    "command", [("freeze", "list"), ("infra", "list"), ("check",), ("freeze", "export")]
)
@pytest.mark.parametrize("where", ["under a file", "not a url"])
def test_a_ledger_that_cannot_be_used_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: tuple[str, ...], where: str
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    url = f"sqlite:///{blocker}/ledger.db" if where == "under a file" else "not a url"
    code, out, err = run(capsys, *command, "--ledger", url)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("orchestrator: error: ledger")
    assert blocker.read_text() == ""
