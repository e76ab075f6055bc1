"""A flaky test of an ordinary suite, end to end: frozen by `replay --freeze` without a
fixture (real engine, real git, real SQLite), exported, quarantined in the team's own pytest
session, then thawed once its fix lands, after which the next session fails on it again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scratch_repo import FIXED_TEST, FLAKY, FLAKY_TEST, STEADY_TEST
from support.scratch_git import commit, git, init

from orchestrator.core.digest import NULL_DIGEST

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / ".venv" / "bin" / "orchestrator"


def orchestrator(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    scratch = cwd / "scratch"
    scratch.mkdir(exist_ok=True)
    return subprocess.run(
        [str(CLI), *args],
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1"},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def team_session(repo: Path, state: Path, source: str) -> subprocess.CompletedProcess[str]:
    """The team's CI test job: pytest with the quarantine, the flaky test made to fail
    (its state file says it ran once before)."""
    state.mkdir(exist_ok=True)
    (state / "shared-state").write_text("1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "orchestrator.quarantine", "-p", "no:cacheprovider",
         "--quarantine", source, "tests"],
        env={**env, "TMPDIR": str(state), "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "300"},
        cwd=repo, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


def test_a_flaky_test_without_a_fixture_is_quarantined_until_thaw_ends_its_freeze(
    tmp_path: Path, docker_client: object
) -> None:
    repo = init(tmp_path / "repo")
    files = {"pytest.ini": "[pytest]\n", "lib.py": "X = 1\n", "tests/test_flaky.py": FLAKY_TEST,
             "tests/test_steady.py": STEADY_TEST}  # fmt: skip
    base = commit(repo, files, "a suite with a flaky test")
    patch = commit(repo, {"lib.py": "X = 2\n"}, "an unrelated change")
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"

    # The pull request's replay: flaky on both sides, the same assertion, no fixture.
    replayed = orchestrator(
        tmp_path, "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", "orchestrator-runner:latest", "--property", FLAKY, "--replays", "4",
        "--ledger", ledger, "--freeze", "--owner", "team-a", "--expires", "72h", "--json",
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    report = json.loads(replayed.stdout)
    (decision,) = report["decisions"]
    assert (decision["lane"], decision["code"]) == ("flake_queue_eligible", "flake_queue_eligible")
    (entry,) = report["ledger"]["entries"]
    assert entry["freeze_refusals"] == []
    freeze_id = entry["freeze_id"]
    assert isinstance(freeze_id, int)
    shown = orchestrator(tmp_path, "freeze", "show", str(freeze_id), "--ledger", ledger)
    row = json.loads(shown.stdout)
    assert row["record"]["fixture_digest"] == row["record"]["origin_digest"] == NULL_DIGEST
    assert row["record"]["shrink_path"] == []
    assert (row["fixture"], row["origin"]) == (None, None)  # JSON null, as the replay read

    # The team's CI, from the exported file (no ledger credentials) or from the ledger.
    export = tmp_path / "freezes.json"
    exported = orchestrator(tmp_path, "freeze", "export", "--ledger", ledger, "--out", str(export))
    assert exported.returncode == 0, exported.stderr
    for source in (str(export), ledger):
        session = team_session(repo, tmp_path / "state", source)
        assert session.returncode == 0, session.stdout[-3000:]
        assert "1 passed, 1 quarantined" in session.stdout
        assert f"QUARANTINED {FLAKY} - quarantined by flake freeze {freeze_id} (owner team-a" in (
            session.stdout
        )

    # The fix lands; the scheduled thaw re-probes the freeze there and ends it.
    fixed = commit(repo, {"tests/test_flaky.py": FIXED_TEST}, "stop leaking state")
    thawed = orchestrator(
        tmp_path, "thaw", "--repo", str(repo), "--rev", fixed, "--due-within", "72h",
        "--ledger", ledger, "--json",
    )  # fmt: skip
    assert thawed.returncode == 0, thawed.stderr[-3000:]
    thaw_report = json.loads(thawed.stdout)
    assert (thaw_report["thawed"], thaw_report["overdue"]) == (1, 0)
    assert [r["code"] for r in thaw_report["results"]] == ["all_pass"]

    # The next session on a branch that still has the flaky test fails on it again.
    git(repo, "checkout", "-q", patch)
    again = orchestrator(tmp_path, "freeze", "export", "--ledger", ledger, "--out", str(export))
    assert again.returncode == 0, again.stderr
    assert json.loads(export.read_text())["freezes"] == []
    for source in (str(export), ledger):
        session = team_session(repo, tmp_path / "state", source)
        assert session.returncode == 1, session.stdout[-3000:]
        assert f"FAILED {FLAKY} - AssertionError: fails on every second run" in session.stdout
        assert "QUARANTINED" not in session.stdout  # nothing quarantined, nothing listed


@pytest.fixture(autouse=True)
def _no_ambient_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORCHESTRATOR_LEDGER", raising=False)
    monkeypatch.delenv("ORCHESTRATOR_QUARANTINE", raising=False)
