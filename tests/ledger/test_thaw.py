"""Thaw and the budget probe: real thaws and samples in the replay engine (the pure verdicts
are tests/unit/test_core_thaw.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ledger_factories import (
    FIXTURE_BYTES,
    MINIMAL,
    ORIGIN_BYTES,
    SAMPLES_STILL_SLOW,
    SAMPLES_THAWED,
    eligible,
    flake_record,
    timing_record,
)
from support.polling import wait_for

from orchestrator import cli, model
from orchestrator.adapters.ledger import Ledger
from orchestrator.core.digest import digest
from orchestrator.core.durations import parse_duration
from orchestrator.core.thaw import timing_thaw_verdict
from orchestrator.errors import InputError

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"


def test_durations_parse_or_name_the_option() -> None:
    assert parse_duration("72h", option="--x") == timedelta(hours=72)
    assert parse_duration("7d", option="--x") == timedelta(days=7)
    assert parse_duration("30m", option="--x") == timedelta(minutes=30)
    assert parse_duration("0s", option="--x") == timedelta(0)
    with pytest.raises(InputError, match="--due-within: not a duration"):
        parse_duration("soon", option="--due-within")


def test_thaw_of_timing_freezes_with_seed_004_lists_through_the_ledger(ledger_url: str) -> None:
    """The ledger side of a timing thaw: the verdict decides delete vs overdue."""
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    with Ledger.open(ledger_url) as ledger:
        ids = []
        for n in range(2):
            record = timing_record(
                test_name=f"tests/test_latency.py::test_{n}",
                opened_at=now - timedelta(hours=30),
                expires_at=now - timedelta(hours=6),
            )
            outcome = ledger.write_timing_freeze(
                record, admission_code="timing_debt_opened", now=now - timedelta(hours=30)
            )
            ids.append(outcome.freeze_id)
        token, rows = ledger.claim_due(now)
        assert [r.id for r in rows] == ids
        for row, samples in zip(rows, (SAMPLES_THAWED, SAMPLES_STILL_SLOW), strict=True):
            verdict = timing_thaw_verdict(["assert_pass"] * 5, samples, row.record["budget_ms"])
            if verdict.thawed:
                ledger.thaw(row.id, token=token, now=now, detail={"samples_ms": list(samples)})
            else:
                ledger.mark_overdue(row.id, token=token, now=now, code=verdict.code, detail={})
        assert [r.id for r in ledger.live_freezes()] == [ids[1]]
        (overdue,) = ledger.events(kinds={model.EventKind.OVERDUE})
        assert (overdue.code, overdue.detail["freeze_id"]) == ("over_budget", ids[1])


# --- real thaws and samples in the replay engine ------------------------------------------

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}
PROPERTY = "tests/test_roles.py::test_role_allowed"
TEST_ROLES = """\
import roles


def test_role_allowed(replay_fixture):
    assert roles.normalize(replay_fixture) in ("admin", "user")
"""
# Fails on every other call within one container (a counter in the container's /tmp):
# a deterministic flake, so the test cannot pass by luck.
ROLES_FLAKY = """\
from pathlib import Path

COUNTER = Path("/tmp/roles-calls")


def normalize(payload):
    calls = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(calls + 1))
    return payload.get("role") if calls % 2 == 0 else (payload.get("role") or "user")
"""
ROLES_FIXED = """\
def normalize(payload):
    return payload.get("role") or "user"
"""
# Sample 1 sleeps 400 ms, the rest 100 ms: median ~100 ms, spread ~300 ms.
TEST_LATENCY = """\
import time
from pathlib import Path

COUNTER = Path("/tmp/latency-calls")


def test_list_latency():
    calls = int(COUNTER.read_text()) if COUNTER.exists() else 0
    COUNTER.write_text(str(calls + 1))
    time.sleep(0.4 if calls == 0 else 0.1)


def test_fast():
    assert sum(range(10)) == 45
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, body in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(body)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository whose flaky revision is followed by a fixed one."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    common = {"tests/test_roles.py": TEST_ROLES, "tests/test_latency.py": TEST_LATENCY}
    flaky = commit(repo, {**common, "roles.py": ROLES_FLAKY}, "flaky")
    fixed = commit(repo, {"roles.py": ROLES_FIXED}, "fixed")
    return repo, flaky, fixed


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def freeze_due_flake(url: str, image_id: str, n: int = 0) -> int:
    """A flake freeze on the minimal fixture, written two days ago, expired an hour ago."""
    now = datetime.now(UTC)
    written_at = now - timedelta(days=2)
    _, decision = eligible()
    record = flake_record(
        n,
        property_id=PROPERTY,
        image_digest=image_id,
        command="pytest -q",
        seed=0,
        opened_at=written_at,
        expires_at=now - timedelta(hours=1, minutes=n),  # n: distinct records
    )
    with Ledger.open(url) as ledger:
        outcome = ledger.write_flake_freeze(
            record,
            decision=decision,
            now=written_at,
            fixture_bytes=FIXTURE_BYTES,
            origin_bytes=ORIGIN_BYTES,
        )
    assert outcome.written, outcome.codes
    assert outcome.freeze_id is not None
    return outcome.freeze_id


@pytest.mark.docker
def test_thaw_of_a_passing_flake_freeze_deletes_the_row_and_keeps_the_event(
    capsys: pytest.CaptureFixture[str],
    ledger_url: str,
    runner_image_id: str,
    project: tuple[Path, str, str],
) -> None:
    repo, _, fixed = project
    freeze_id = freeze_due_flake(ledger_url, runner_image_id)
    code, out, err = run(
        capsys, "thaw", "--repo", str(repo), "--rev", fixed, "--json", "--ledger", ledger_url
    )
    assert code == 0, err
    report = json.loads(out)
    (result,) = report["results"]
    assert (result["freeze_id"], result["outcome"], result["code"]) == (
        freeze_id,
        "thawed",
        "all_pass",
    )
    assert result["labels"] == ["assert_pass"] * 5
    with Ledger.open(ledger_url) as ledger:
        assert ledger.freeze(freeze_id) is None
        (thawed,) = ledger.events(kinds={model.EventKind.THAWED})
        assert thawed.detail["freeze_id"] == freeze_id
        assert thawed.detail["rev"] == fixed
        assert thawed.detail["record"]["fixture_digest"] == digest(MINIMAL)
    # Nothing is due any more: a second run probes nothing and exits 0.
    assert run(capsys, "thaw", "--repo", str(repo), "--ledger", ledger_url)[0] == 0


@pytest.mark.docker
def test_thaw_of_a_still_flaky_freeze_leaves_it_overdue_and_exits_1(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    runner_image_id: str,
    project: tuple[Path, str, str],
) -> None:
    repo, flaky, _ = project
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    freeze_id = freeze_due_flake(url, runner_image_id)
    code, out, err = run(capsys, "thaw", "--repo", str(repo), "--rev", flaky, "--ledger", url)
    assert code == 1
    header, row = (line.split() for line in out.splitlines())
    assert header == ["outcome", "freeze", "kind", "subject", "owner", "code", "reasons"]
    assert row[:3] == ["OVERDUE", str(freeze_id), "flake"]
    assert row[5:7] == ["still_failing", "3/5"]
    assert "still overdue" in err
    with Ledger.open(url) as ledger:
        row = ledger.freeze(freeze_id)
        assert row is not None  # never renewed: the expiry is unchanged
        assert row.expires_at < datetime.now(UTC)
        (overdue,) = ledger.events(kinds={model.EventKind.OVERDUE})
        assert overdue.code == "still_failing"
        assert overdue.detail["labels"].count("assert_fail") == 3  # replays 1, 3, 5 fail
        assert ledger.events(kinds={model.EventKind.THAWED}) == []


@pytest.mark.docker
def test_thaw_of_a_timing_freeze_takes_five_new_samples(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    runner_image_id: str,
    project: tuple[Path, str, str],
) -> None:
    repo, _, fixed = project
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = datetime.now(UTC)
    with Ledger.open(url) as ledger:
        outcome = ledger.write_timing_freeze(
            timing_record(
                test_name="tests/test_latency.py::test_fast",
                budget_ms=5000.0,
                opened_at=now - timedelta(hours=30),
                expires_at=now - timedelta(hours=6),
            ),
            admission_code="timing_debt_opened",
            now=now - timedelta(hours=30),
        )
    code, out, err = run(
        capsys,
        "thaw",
        "--repo", str(repo),
        "--rev", fixed,
        "--replays", "1",
        "--image", runner_image_id,
        "--json",
        "--ledger", url,
    )  # fmt: skip
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    assert result["code"] == "within_budget"
    assert len(result["samples_ms"]) == 5  # at least five, even with --replays 1
    with Ledger.open(url) as ledger:
        assert ledger.freeze(outcome.freeze_id) is None


@pytest.mark.docker
def test_budget_probe_classifies_and_admits_timing_debt(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    runner_image_id: str,
    project: tuple[Path, str, str],
) -> None:
    repo, _, fixed = project
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    common = [
        "budget",
        "--repo", str(repo),
        "--rev", fixed,
        "--image", runner_image_id,
        "--property", "tests/test_latency.py::test_list_latency",
        "--json",
        "--ledger", url,
    ]  # fmt: skip
    code, out, err = run(capsys, *common, "--budget-ms", "80")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["labels"] == ["assert_pass"] * 5
    assert len(doc["samples_ms"]) == 5
    assert doc["samples_ms"][0] >= 400.0
    assert doc["latency_class"] == "timing"  # median ~100 > 80, spread ~300 > 20
    assert "admission" not in doc

    code, out, err = run(
        capsys, *common, "--budget-ms", "80", "--admit", "--owner", "lat-owner", "--max-age", "24h"
    )
    assert code == 0, err
    admission = json.loads(out)["admission"]
    assert admission["code"] == "timing_debt_opened"
    freeze_id = admission["ledger"]["freeze_id"]
    with Ledger.open(url) as ledger:
        row = ledger.freeze(freeze_id)
        assert row is not None
        assert row.kind is model.FreezeKind.TIMING
        assert row.owner == "lat-owner"
        assert row.expires_at - row.opened_at == timedelta(hours=24)
        assert len(row.record["samples"]) == 5

    # Within budget the spread is irrelevant: a generous budget is no timing debt.
    code, out, _ = run(capsys, *common, "--budget-ms", "100000", "--admit", "--owner", "lat-owner")
    assert code == 1
    doc = json.loads(out)
    assert doc["latency_class"] == "unknown"
    assert doc["admission"]["code"] == "spread_too_tight"
    with Ledger.open(url) as ledger:
        codes = [e.code for e in ledger.events(kinds={model.EventKind.ADMISSION})]
        assert codes == ["timing_debt_opened", "spread_too_tight"]
        assert ledger.count_freezes() == 1


@pytest.mark.docker
@pytest.mark.slow
def test_two_thaw_jobs_at_once_probe_each_freeze_once(
    postgres_server: Any,
    runner_image_id: str,
    project: tuple[Path, str, str],
    tmp_path: Path,
) -> None:
    """Two `orchestrator thaw` processes on one shared (PostgreSQL) ledger."""
    import os
    import sys

    repo, _, fixed = project
    url = postgres_server.url(postgres_server.create_database())
    ids = {freeze_due_flake(url, runner_image_id, n) for n in (1, 2)}
    argv = [
        sys.executable, "-m", "orchestrator", "thaw",
        "--repo", str(repo), "--rev", fixed, "--replays", "2", "--json", "--ledger", url,
    ]  # fmt: skip
    jobs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "CI": "1"}, cwd=tmp_path)
        for _ in range(2)
    ]  # fmt: skip
    reports = []
    for job in jobs:
        out, err = job.communicate(timeout=600)
        assert job.returncode == 0, err
        reports.append(json.loads(out))
    probed = [r["freeze_id"] for report in reports for r in report["results"]]
    assert sorted(probed) == sorted(ids)  # every due freeze probed, none twice
    with Ledger.open(url) as ledger:
        thawed = [e.detail["freeze_id"] for e in ledger.events(kinds={model.EventKind.THAWED})]
        assert sorted(thawed) == sorted(ids)
        assert ledger.count_freezes() == 0


def test_thaw_without_an_engine_exits_3_and_gives_the_claims_back(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    project: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, _, fixed = project
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    freeze_id = freeze_due_flake(url, "sha256:" + "0" * 64)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    code, out, err = run(capsys, "thaw", "--repo", str(repo), "--rev", fixed, "--ledger", url)
    assert code == 3
    assert out == ""
    assert err.strip().splitlines()[-1].startswith("orchestrator: error: ")
    with Ledger.open(url) as ledger:
        _, claimed = ledger.claim_due(datetime.now(UTC))
        assert [row.id for row in claimed] == [freeze_id]  # not stuck with the dead job
        assert ledger.events(kinds={model.EventKind.OVERDUE, model.EventKind.THAWED}) == []


def test_thaw_refuses_an_unknown_revision_before_claiming(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, project: tuple[Path, str, str]
) -> None:
    repo, _, _ = project
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    code, _, err = run(capsys, "thaw", "--repo", str(repo), "--rev", "nope", "--ledger", url)
    assert code == 2
    assert "unknown revision" in err
    code, _, err = run(capsys, "thaw", "--due-within", "soon", "--ledger", url)
    assert code == 2
    assert "--due-within" in err


# --- a thaw that dies, an engine that drops ------------------------------------------------

ROLES_HANGS = """\
import time


def normalize(payload):
    time.sleep(600)
"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_sigkilled_thaws_claims_and_scratch_are_taken_back_by_the_next_thaw(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    runner_image_id: str,
    docker_client: Any,
    project: tuple[Path, str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, _, fixed = project
    hangs = commit(repo, {"roles.py": ROLES_HANGS}, "hangs")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    freeze_id = freeze_due_flake(url, runner_image_id)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "CI": "1"}
    killed = subprocess.Popen(
        [str(CLI), "thaw", "--repo", str(repo), "--rev", hangs, "--timeout", "300",
         "--ledger", url],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        label = {"label": f"orchestrator.pid={killed.pid}"}

        def probing() -> list[Any]:
            assert killed.poll() is None, "the thaw ended before its probe ran"
            return docker_client.containers.list(filters=label)

        wait_for(probing, timeout=120, what="the thaw's probe to start", poll=0.1)
    finally:
        killed.kill()
        killed.wait()
    left = sorted(path.name.split("-")[1] for path in scratch.iterdir())
    assert {"thaw", "replay"} <= set(left)  # the killed job's folders, both prefixes
    with Ledger.open(url) as ledger:
        (holder,) = ledger.claimants()  # the dead job still holds the freeze
        assert f":{killed.pid}:" in holder

    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    code, out, err = run(
        capsys, "thaw", "--repo", str(repo), "--rev", fixed, "--json", "--ledger", url
    )
    assert code == 0, err
    (result,) = json.loads(out)["results"]
    assert (result["freeze_id"], result["outcome"]) == (freeze_id, "thawed")
    assert list(scratch.iterdir()) == []  # swept, thaw-* included
    assert docker_client.containers.list(all=True, filters=label) == []
    with Ledger.open(url) as ledger:
        assert ledger.claimants() == []


def test_another_hosts_claim_is_left_to_the_claim_lifetime(tmp_path: Path) -> None:
    from orchestrator.core.owners import ProcessOwner, claim_token
    from orchestrator.services.thaw import release_dead_claims

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    freeze_due_flake(url, "sha256:" + "0" * 64)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    elsewhere = ProcessOwner(host_id="f" * 16, pid=dead.pid, start="1")
    with Ledger.open(url) as ledger:
        token, rows = ledger.claim_due(datetime.now(UTC), claimant=claim_token(elsewhere, "a" * 12))
        assert len(rows) == 1
        assert release_dead_claims(ledger) == 0  # its pid means nothing on this host
        assert ledger.claimants() == [token]


@pytest.mark.docker
def test_an_engine_that_drops_under_thaw_is_one_line_exit_3_and_the_claim_comes_back(
    tmp_path: Path, runner_image_id: str, project: tuple[Path, str, str]
) -> None:
    from engine_relay import DroppingRelay

    repo, _, fixed = project
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    freeze_id = freeze_due_flake(url, runner_image_id)
    relay = DroppingRelay(Path(f"/tmp/orch-thaw-relay-{os.getpid()}.sock"))
    try:
        done = subprocess.run(
            [str(CLI), "thaw", "--repo", str(repo), "--rev", fixed, "--ledger", url],
            env={**os.environ, "DOCKER_HOST": relay.url, "TMPDIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        relay.close()
        relay.listen.unlink(missing_ok=True)
    assert relay.dropped
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("orchestrator: error:")]
    assert len(errors) == 1, done.stderr
    assert "cannot be inspected" in errors[0]
    with Ledger.open(url) as ledger:
        _, claimed = ledger.claim_due(datetime.now(UTC))
        assert [row.id for row in claimed] == [freeze_id]
