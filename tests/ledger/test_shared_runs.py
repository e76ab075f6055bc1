"""Shards of one CI matrix record into one PostgreSQL ledger at the same time.

Two `orchestrator replay --shard` processes run at once against the throwaway PostgreSQL
server, each its own run id; then one of them is retried with the same run id, as a CI
system re-runs a failed job. Nothing is lost, nothing is recorded twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures.build_example import build_example  # noqa: E402
from orchestrator import model  # noqa: E402
from orchestrator.adapters.docker import RUNNER_IMAGE  # noqa: E402
from orchestrator.adapters.ledger import Ledger  # noqa: E402

CLI = ROOT / ".venv" / "bin" / "orchestrator"

pytestmark = [pytest.mark.docker, pytest.mark.postgres, pytest.mark.slow]


def start(args: list[str], scratch: Path) -> subprocess.Popen[str]:
    scratch.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [str(CLI), *args],
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=scratch,
    )


def finish(process: subprocess.Popen[str]) -> dict:
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode in (0, 1), stderr[-3000:]
    return json.loads(stdout)


def test_two_shards_record_into_one_postgresql_ledger_at_once_and_a_retry_adds_nothing(
    postgres_server, tmp_path: Path
) -> None:
    url = postgres_server.url(postgres_server.create_database())
    example = build_example(tmp_path / "example")

    def args(index: int, out: str) -> list[str]:
        return [
            "replay",
            "--repo",
            str(example.path),
            "--base",
            example.base,
            "--patch",
            example.rev("extra-clock-read"),
            "--image",
            RUNNER_IMAGE,
            "--fixture",
            str(example.fixture),
            "--replays",
            "2",
            "--shard",
            f"{index}/2",
            "--run-id",
            f"ci-77-shard-{index}",
            "--ledger",
            url,
            "--out",
            str(tmp_path / out),
            "--json",
        ]

    processes = [start(args(i, f"shard-{i}"), tmp_path / f"scratch-{i}") for i in (1, 2)]
    reports = [finish(process) for process in processes]
    decided = {e["property_id"]: e for report in reports for e in report["decisions"]}
    tests = ROOT / "fixtures" / "example" / "base" / "tests"
    count = sum(path.read_text().count("\ndef test_") for path in tests.glob("test_*.py"))
    assert len(decided) == count  # the whole example, split in two
    assert sum(len(report["decisions"]) for report in reports) == count

    with Ledger.open(url) as ledger:
        events = ledger.events(kinds={model.EventKind.DECISION})
        runs = {run.id: run for run in ledger.runs()}
    assert sorted(e.subject for e in events) == sorted(decided)  # none lost, none twice
    assert {e.detail["run_id"] for e in events} == {"ci-77-shard-1", "ci-77-shard-2"}
    for event in events:
        assert event.detail["lane"] == decided[event.subject]["lane"]
    assert {"ci-77-shard-1", "ci-77-shard-2"} <= set(runs)
    recorded = {
        entry["property_id"]: entry["decision_event"]
        for report in reports
        for entry in report["ledger"]["entries"]
    }
    assert recorded == {e.subject: e.id for e in events}

    # The CI system re-runs shard 1: same run id, a fresh job folder.
    retried = finish(start(args(1, "shard-1-retry"), tmp_path / "scratch-retry"))
    with Ledger.open(url) as ledger:
        after = ledger.events(kinds={model.EventKind.DECISION})
        infra = ledger.infra_entries()
    assert [e.id for e in after] == [e.id for e in events]  # no second decision event
    for entry in retried["ledger"]["entries"]:
        assert entry["already_recorded"] is True
        assert entry["decision_event"] == recorded[entry["property_id"]]
    assert infra == []  # nothing undecided in this example; nothing queued twice either
