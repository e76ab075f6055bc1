"""`orchestrator replay` end to end: a small real repository, the real engine, the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli import stored_evidence, stored_records
from support.polling import wait_for
from support.scratch_git import commit, init

from orchestrator.adapters.docker import LABEL_PID, LABEL_RUN

pytestmark = pytest.mark.docker

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
ADD = "tests/test_lib.py::test_add"
STAMP = "tests/test_lib.py::test_stamp_keeps_payload"
FIXTURE = "tests/test_lib.py::test_fixture_is_mounted"

LIB_BASE = """\
def add(a, b):
    return a + b


def stamp(payload, clock):
    return {**payload, "at": clock()}
"""
# Breaks add, and reads the clock twice while returning the same dict (a retry disguise).
LIB_PATCH = """\
def add(a, b):
    return a - b


def stamp(payload, clock):
    clock()
    return {**payload, "at": clock()}
"""
TESTS = """\
import lib


def test_add():
    assert lib.add(2, 2) == 4


def test_stamp_keeps_payload(deps):
    clock = deps.clock(start=5.0)
    assert lib.stamp({"a": 1}, clock) == {"a": 1, "at": 5.0}


def test_fixture_is_mounted(replay_fixture, replay_seed):
    assert replay_fixture == {"n": 1}
    assert replay_seed == 7
"""


@dataclass(frozen=True)
class Repo:
    path: Path
    base: str
    patch: str
    same: str
    fixture: Path


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    root = tmp_path_factory.mktemp("replay-e2e")
    path = init(root / "repo")
    files = {"conftest.py": "", "lib.py": LIB_BASE, "tests/test_lib.py": TESTS}
    base = commit(path, files, "base")
    patch = commit(path, {"lib.py": LIB_PATCH}, "patch")
    subprocess.run(["git", "-C", str(path), "checkout", "-q", base], check=True)
    same = commit(path, {"lib.py": LIB_BASE + "\n# a comment\n"}, "same behaviour")
    fixture = root / "fixture.json"
    fixture.write_text('{"n": 1}')
    return Repo(path=path, base=base, patch=patch, same=same, fixture=fixture)


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str
    scratch: Path

    @property
    def report(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def run_cli(tmp_path: Path, *args: str) -> Result:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(scratch), "CI": "1"}
    done = subprocess.run(
        [str(CLI), "replay", *args],
        env=env,
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Result(code=done.returncode, stdout=done.stdout, stderr=done.stderr, scratch=scratch)


def assert_nothing_left(docker_client, result: Result, run_id: str) -> None:
    left = docker_client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    assert left == []
    assert list(result.scratch.iterdir()) == []


def by_property(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["property_id"]: entry for entry in report["decisions"]}


def test_bilateral_replay_decides_each_property(tmp_path, repo, runner_image_id, docker_client):
    out = tmp_path / "run"
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", "orchestrator-runner:latest", "--command", "pytest -q tests/",
        "--property", ADD, "--property", STAMP, "--property", FIXTURE,
        "--fixture", str(repo.fixture), "--replays", "3", "--timeout", "30", "--seed", "7",
        "--runner-id", "test-runner", "--out", str(out), "--json",
    )  # fmt: skip
    assert result.code == 1, result.stderr  # blocking lanes
    report = result.report
    assert report["schema"] == "replay-report/2"
    assert (report["properties"], report["decisions_left_out"]) == (3, 0)  # --json: all
    decided = by_property(report)
    assert list(decided) == [ADD, STAMP, FIXTURE]

    assert decided[ADD]["base_labels"] == ["assert_pass"] * 3
    assert decided[ADD]["patch_labels"] == ["assert_fail"] * 3
    assert (decided[ADD]["lane"], decided[ADD]["code"]) == (
        "property_regression",
        "assertion_regression",
    )

    # Same output, one more clock read: the call budget moved (seed 001's retry disguise).
    assert decided[STAMP]["base_labels"] == decided[STAMP]["patch_labels"] == ["assert_pass"] * 3
    assert decided[STAMP]["calls_base"]["clock"] == [1]
    assert decided[STAMP]["calls_patch"]["clock"] == [2]
    assert (decided[STAMP]["lane"], decided[STAMP]["code"]) == (
        "property_regression",
        "call_budget",
    )

    assert (decided[FIXTURE]["lane"], decided[FIXTURE]["code"]) == ("no_freeze", "not_reproduced")

    # The run folder: run log first, then evidence and decision per property, and the summary.
    log = json.loads((out / "run-log.json").read_text())
    assert log["base_rev"] == repo.base
    assert log["patch_rev"] == repo.patch
    assert log["image_digest"] == runner_image_id
    assert log["runner_id"] == "test-runner"
    assert log["seed"] == 7
    assert log["replays"] == 3
    assert log["probe_version"]
    assert log["started_at"]
    # What reproducing a replay needs besides: the fixture's bytes as every replay read
    # them, the hash seed, the containers' limits.
    assert log["fixture_file"] == "fixture.json"
    assert (out / "fixture.json").read_bytes() == repo.fixture.read_bytes()
    assert log["hash_seed"] == "7"
    assert log["limits"] == {"memory": "512m", "pids": 256, "cpus": 1.0, "tmp_size": "64m"}
    # summary.json lists what needs a look and counts the rest; the store holds them all.
    summary = json.loads((out / "summary.json").read_text())
    ledger = report["ledger"]
    assert summary == {
        **report,
        "decisions": [decided[ADD], decided[STAMP]],
        "decisions_left_out": 1,
        "ledger": {**ledger, "entries": ledger["entries"][:2], "entries_left_out": 1},
    }
    assert [entry["property_id"] for entry in ledger["entries"]] == [ADD, STAMP, FIXTURE]
    assert summary["lanes"] == {"property_regression": 2, "no_freeze": 1}
    records = stored_records(out)
    assert [record["entry"] for record in records] == report["decisions"]
    for index, property_id in enumerate([ADD, STAMP, FIXTURE], start=1):
        record = records[index - 1]
        assert (record["index"], record["property_id"]) == (index, property_id)
        evidence, decision = record["evidence"], record["decision"]
        assert evidence["property_id"] == property_id
        assert evidence["image_digest"] == runner_image_id
        assert evidence["oracle_changed"] is False
        assert evidence["shrink"] is None
        assert evidence["origin_digest"] == evidence["fixture_digest"]
        assert {r["image_digest"] for r in evidence["base"] + evidence["patch"]} == {
            runner_image_id
        }
        assert decision == decided[property_id]["decision"]
    assert sorted(p.name for p in (out / "raw" / "base").iterdir()) == [
        "replay-001.json", "replay-002.json", "replay-003.json"
    ]  # fmt: skip
    assert_progress_logged(result.stderr, tests=9, failures={"base": 0, "patch": 3})
    assert_nothing_left(docker_client, result, report["run_id"])


def assert_progress_logged(stderr: str, *, tests: int, failures: dict[str, int]) -> None:
    """The JSON log's replay.progress lines per side: the first as soon as a test finished
    (before any replay ended), the last with every test and failure counted."""
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    for side, failed in failures.items():
        logged = [
            line for line in lines if line["event"] == "replay.progress" and line["side"] == side
        ]
        assert len(logged) >= 2, stderr
        assert (logged[0]["tests_done"], logged[0]["done"]) == (1, 0)
        last = logged[-1]
        assert (last["done"], last["total"]) == (3, 3)
        assert (last["tests_done"], last["tests_total"], last["failures"]) == (tests, tests, failed)
        assert last["elapsed_s"] >= 0
        assert [line["tests_done"] for line in logged] == sorted(
            line["tests_done"] for line in logged
        )


def test_whole_command_without_properties_one_container_per_replay(tmp_path, repo, docker_client):
    out = tmp_path / "run"
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.same,
        "--image", "orchestrator-runner:latest", "--command", "python -m pytest -q tests/",
        "--fixture", str(repo.fixture), "--seed", "7", "--replays", "2", "--replays-all",
        "--isolation", "container", "--out", str(out), "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    decided = by_property(result.report)
    assert set(decided) == {ADD, STAMP, FIXTURE}
    for entry in decided.values():
        assert entry["base_labels"] == entry["patch_labels"] == ["assert_pass"] * 2
        assert entry["lane"] == "no_freeze"
    assert_nothing_left(docker_client, result, result.report["run_id"])


def test_an_edited_test_body_is_an_oracle_change_and_its_neighbours_are_compared(tmp_path, repo):
    edited = TESTS.replace("lib.add(2, 2) == 4", "lib.add(2, 2) == 2 + 2") + "\n# edited\n"
    changed = commit(repo.path, {"tests/test_lib.py": edited}, "edit one test")
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", changed,
        "--image", "orchestrator-runner:latest", "--property", ADD, "--property", STAMP,
        "--replays", "1", "--json",
    )  # fmt: skip
    assert result.code == 1, result.stderr
    decided = by_property(result.report)
    assert (decided[ADD]["lane"], decided[ADD]["code"], decided[ADD]["oracle_changed"]) == (
        "reject_run",
        "oracle_changed",
        True,
    )
    assert decided[ADD]["reasons"] == decided[ADD]["oracle_reasons"] == ["test body"]
    # The same file changed, but not test_stamp_keeps_payload's own code: compared as usual.
    assert (decided[STAMP]["lane"], decided[STAMP]["oracle_changed"]) == ("no_freeze", False)
    # Default run folder: .replay/runs/<run-id>/ under the working directory.
    assert (tmp_path / ".replay" / "runs" / result.report["run_id"] / "summary.json").is_file()


def test_an_unknown_revision_is_exit_2_and_writes_nothing(tmp_path, repo):
    out = tmp_path / "run"
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", "no-such-rev", "--patch", repo.patch,
        "--image", "orchestrator-runner:latest", "--out", str(out),
    )  # fmt: skip
    assert result.code == 2
    assert "no-such-rev" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_a_missing_image_is_exit_3_and_never_pulled(tmp_path, repo, docker_client):
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", "orchestrator-no-such-image:never", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.code == 3
    assert "never pulls" in result.stderr
    assert docker_client.images.list(name="orchestrator-no-such-image") == []


def test_a_shrink_report_for_another_fixture_is_exit_2(tmp_path, repo):
    report = tmp_path / "shrink.json"
    report.write_text(
        json.dumps(
            {
                "schema": "shrink-report/1",
                "minimal": {"n": 2},
                "minimal_digest": "sha256:" + "e" * 64,
                "origin_digest": "sha256:" + "f" * 64,
                "shrink_path": [],
                "attempts": 2,
                "identical_minima": 2,
                "stable": True,
            }
        )
    )
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", "orchestrator-runner:latest", "--fixture", str(repo.fixture),
        "--shrink-report", str(report), "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.code == 2
    assert "minimal digest" in result.stderr
    assert not (tmp_path / "run").exists()


HANGS = "import time\n\n\ndef test_hangs():\n    time.sleep(120)\n"


def _wait_for_running(docker_client, pid: int, count: int, timeout_s: float = 60) -> list[Any]:
    def running() -> list[Any]:
        found = docker_client.containers.list(filters={"label": f"{LABEL_PID}={pid}"})
        return found if len(found) >= count else []

    return wait_for(
        running, timeout=timeout_s, what=f"{count} running containers of pid {pid}", poll=0.2
    )


@pytest.mark.parametrize(
    "signals", [(signal.SIGINT,), (signal.SIGINT, signal.SIGINT), (signal.SIGTERM,)]
)
def test_an_interrupted_run_exits_130_and_leaves_nothing(tmp_path, docker_client, signals):
    path = init(tmp_path / "hang")
    sha = commit(path, {"tests/test_hang.py": HANGS}, "hangs")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    process = subprocess.Popen(
        [
            str(CLI), "replay", "--repo", str(path), "--base", sha, "--patch", sha,
            "--image", "orchestrator-runner:latest", "--replays", "2", "--timeout", "100",
            "--out", str(tmp_path / "run"),
        ],
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        containers = _wait_for_running(docker_client, process.pid, 2)
        for signum in signals:
            process.send_signal(signum)
            time.sleep(0.2)  # the second one lands while cleanup runs
        _, stderr = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    run_id = containers[0].labels[LABEL_RUN]
    assert docker_client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"}) == []
    assert [str(p) for p in scratch.rglob("*")] == [], stderr
    assert not (tmp_path / "run" / "summary.json").exists()  # no verdict


FLAKY = """\
import os
import tempfile

COUNTER = os.path.join(tempfile.gettempdir(), "shared-state")


def test_leaks_state(replay_fixture):
    try:
        with open(COUNTER) as handle:
            runs = int(handle.read()) + 1
    except FileNotFoundError:
        runs = 1
    with open(COUNTER, "w") as handle:
        handle.write(str(runs))
    assert runs % 2 == 1, "fails on every second run"
"""


def test_a_flaky_property_is_frozen_in_the_ledger_with_freeze(tmp_path, repo, docker_client):
    from datetime import UTC, datetime

    from orchestrator.adapters.ledger import Ledger
    from orchestrator.model import EventKind

    path = init(tmp_path / "flaky")
    base = commit(path, {"tests/test_flaky.py": FLAKY, "lib.py": "X = 1\n"}, "flaky")
    patch = commit(path, {"lib.py": "X = 2\n"}, "unrelated change")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    prop = "tests/test_flaky.py::test_leaks_state"
    common = (
        "--repo", str(path), "--base", base, "--patch", patch,
        "--image", "orchestrator-runner:latest", "--property", prop,
        "--fixture", str(repo.fixture), "--replays", "4", "--json",
    )  # fmt: skip
    result = run_cli(
        tmp_path, *common, "--ledger", url, "--freeze", "--owner", "team-a", "--expires", "72h"
    )
    assert result.code == 0, result.stderr
    (entry,) = result.report["decisions"]
    assert entry["base_labels"] == entry["patch_labels"] == ["assert_pass", "assert_fail"] * 2
    assert (entry["lane"], entry["code"]) == ("flake_queue_eligible", "flake_queue_eligible")
    (recorded,) = result.report["ledger"]["entries"]
    assert recorded["freeze_id"] is not None, recorded
    with Ledger.open(url) as store:
        (freeze,) = store.live_freezes()
        assert freeze.owner == "team-a"
        assert freeze.expires_at > datetime.now(UTC)
        decisions = store.events(kinds=[EventKind.DECISION])
        assert [(e.code, e.subject) for e in decisions] == [("flake_queue_eligible", prop)]

    # Without --owner it is a usage error before anything runs: no run, no ledger row.
    runs_before = sorted((tmp_path / ".replay" / "runs").iterdir())
    with Ledger.open(url) as store:
        events_before = store.events()
    again = run_cli(tmp_path, *common, "--ledger", url, "--freeze", "--expires", "72h")
    assert again.code == 2
    assert again.stdout == ""
    assert again.stderr.splitlines() == ["orchestrator: error: --freeze needs --owner"]
    assert sorted((tmp_path / ".replay" / "runs").iterdir()) == runs_before
    with Ledger.open(url) as store:
        assert store.events() == events_before
        assert len(store.live_freezes()) == 1


@pytest.mark.parametrize(
    ("freeze_args", "problem"),
    [
        (("--freeze", "--expires", "72h"), "--freeze needs --owner"),
        (("--freeze", "--owner", "me"), "--freeze needs --expires"),
        (("--freeze",), "--freeze needs --owner and --expires"),
        (("--freeze", "--owner", " ", "--expires", "72h"), "--freeze needs --owner"),
        (("--freeze", "--owner", "me", "--expires", "soon"), "--expires 'soon': expected"),
        (("--freeze", "--owner", "me", "--expires", "72h", "--no-record"), "--no-record"),
    ],
)
def test_a_freeze_it_could_not_write_is_refused_before_anything_runs(
    tmp_path, repo, freeze_args, problem
):
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", "orchestrator-runner:latest", "--property", ADD, *freeze_args,
    )  # fmt: skip
    assert result.code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("orchestrator: error: ")
    assert problem in line
    # Neither a run folder nor the default ledger: nothing was run, nothing written.
    assert not (tmp_path / ".replay").exists()
    assert list(result.scratch.iterdir()) == []


ADDED_ABOVE = FLAKY.replace(
    "def test_leaks_state",
    'def test_added_above(replay_fixture):\n    assert replay_fixture == {"n": 1}\n\n\n'
    "def test_leaks_state",
)


def test_a_test_added_above_a_flaky_one_leaves_it_flake_queue_eligible(tmp_path, repo):
    path = init(tmp_path / "above")
    base = commit(path, {"tests/test_flaky.py": FLAKY, "lib.py": "X = 1\n"}, "flaky")
    patch = commit(path, {"tests/test_flaky.py": ADDED_ABOVE}, "a test above the flaky one")
    common = (
        "--repo", str(path), "--base", base, "--patch", patch,
        "--image", "orchestrator-runner:latest", "--fixture", str(repo.fixture), "--json",
    )  # fmt: skip
    out = tmp_path / "flaky-run"
    flaky = "tests/test_flaky.py::test_leaks_state"
    result = run_cli(tmp_path, *common, "--property", flaky, "--replays", "2", "--out", str(out))
    assert result.code == 0, result.stderr
    (entry,) = result.report["decisions"]
    assert entry["base_labels"] == entry["patch_labels"] == ["assert_pass", "assert_fail"]
    assert (entry["lane"], entry["oracle_changed"]) == ("flake_queue_eligible", False)
    evidence = stored_evidence(out)
    on_base, on_patch = evidence["base"][1], evidence["patch"][1]
    # The patch moved the failing line down; the key, counted from the def, did not move.
    assert on_base["assertion_id"] != on_patch["assertion_id"]
    assert on_base["assertion_key"] == on_patch["assertion_key"]
    assert on_base["assertion_key"].startswith(f"{flaky}@test_leaks_state+")
    assert evidence["base_oracle_digest"] == evidence["patch_oracle_digest"]

    # The new test exists on the patch only: row 2, with what to run next.
    added = "tests/test_flaky.py::test_added_above"
    result = run_cli(tmp_path, *common, "--property", added, "--replays", "1")
    assert result.code == 1, result.stderr
    (entry,) = result.report["decisions"]
    assert (entry["lane"], entry["code"]) == ("reject_run", "oracle_changed")
    assert entry["reasons"] == [
        "new on patch: replay with --tests-from patch to ask whether it fails on base"
    ]

    # Judged by the patch's tests on both sides, both are compared: the flaky one stays
    # eligible, and the new one is asked the question (it passes on base too).
    result = run_cli(
        tmp_path, *common, "--property", flaky, "--property", added, "--replays", "2",
        "--tests-from", "patch",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    found = {e["property_id"]: (e["lane"], e["tests_from"]) for e in result.report["decisions"]}
    assert found == {
        flaky: ("flake_queue_eligible", patch),
        added: ("no_freeze", patch),
    }
    from orchestrator.adapters.ledger import Ledger
    from orchestrator.model import EventKind

    with Ledger.open(f"sqlite:///{tmp_path / '.replay' / 'ledger.db'}") as store:
        events = store.events(kinds=[EventKind.DECISION])
    assert [event.detail["tests_from"] for event in events[-2:]] == [patch, patch]


def test_owner_without_freeze_is_bad_input(tmp_path, repo):
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", "orchestrator-runner:latest", "--owner", "me",
    )  # fmt: skip
    assert result.code == 2
    assert "--freeze" in result.stderr


def test_a_private_fixture_file_is_still_read_in_the_container(tmp_path, repo):
    private = tmp_path / "private.json"
    private.write_text('{"n": 1}')
    private.chmod(0o600)
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.same,
        "--image", "orchestrator-runner:latest", "--property", FIXTURE, "--seed", "7",
        "--fixture", str(private), "--replays", "1", "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    (entry,) = result.report["decisions"]
    assert entry["base_labels"] == entry["patch_labels"] == ["assert_pass"]
    assert list(result.scratch.iterdir()) == []


def test_the_next_run_sweeps_what_a_killed_run_left(tmp_path, repo, docker_client):
    path = init(tmp_path / "hang")
    sha = commit(path, {"tests/test_hang.py": HANGS}, "hangs")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    killed = subprocess.Popen(
        [
            str(CLI), "replay", "--repo", str(path), "--base", sha, "--patch", sha,
            "--image", "orchestrator-runner:latest", "--replays", "1", "--timeout", "100",
            "--out", str(tmp_path / "killed"),
        ],
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        left = _wait_for_running(docker_client, killed.pid, 2)
    finally:
        killed.kill()  # SIGKILL: no cleanup at all
        killed.wait()
    assert any(p.name.startswith("orchestrator-replay-") for p in scratch.iterdir())
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.same,
        "--image", "orchestrator-runner:latest", "--property", ADD, "--replays", "1",
        "--out", str(tmp_path / "next"), "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    run_id = left[0].labels[LABEL_RUN]
    assert docker_client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"}) == []
    assert list(scratch.iterdir()) == []


def test_no_engine_is_exit_3_and_writes_nothing(tmp_path, repo, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    out = tmp_path / "run"
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", "orchestrator-runner:latest", "--out", str(out),
    )  # fmt: skip
    assert result.code == 3
    assert "no Docker engine" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_without_json_a_table_names_property_labels_deltas_lane_and_code(tmp_path, repo):
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", "orchestrator-runner:latest", "--property", STAMP, "--replays", "2",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.code == 1, result.stderr
    header, row, *rest = result.stdout.splitlines()
    assert header.split() == [
        "property", "base", "patch", "call", "deltas", "lane", "code", "reasons"
    ]  # fmt: skip
    assert row.split() == [
        STAMP, "assert_pass", "x2", "assert_pass", "x2", "clock:", "base", "{1}", "vs", "patch",
        "{2}", "property_regression", "call_budget", "-",  # the deltas column says why
    ]  # fmt: skip
    ledger_line, folder_line = rest
    assert folder_line == f"run folder: {tmp_path / 'run'}"
    # Every decision lands in the embedded ledger by default (the tally reads them there).
    assert ledger_line.startswith("ledger: ")
    assert ledger_line.endswith(".replay/ledger.db")
    from orchestrator.adapters.ledger import Ledger
    from orchestrator.model import EventKind

    with Ledger.open(f"sqlite:///{tmp_path / '.replay' / 'ledger.db'}") as store:
        events = store.events(kinds=[EventKind.DECISION])
        (run,) = store.runs()
    assert [(e.code, e.subject) for e in events] == [("call_budget", STAMP)]
    assert events[0].detail["base_labels"] == ["assert_pass"] * 2
    # The run's row is finished with the run's outcome, not left "running".
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (run.id, run.status, run.detail["exit_status"]) == (summary["run_id"], "blocking", 1)
    assert run.finished_at is not None
    assert run.started_at <= run.finished_at
    assert events[0].detail["run_id"] == run.id


def test_no_record_leaves_no_ledger(tmp_path, repo):
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", "orchestrator-runner:latest", "--property", STAMP, "--replays", "1",
        "--out", str(tmp_path / "run"), "--no-record",
    )  # fmt: skip
    assert result.code == 1, result.stderr
    assert not (tmp_path / ".replay").exists()
    assert "ledger:" not in result.stdout


def test_a_side_the_tool_itself_breaks_is_internal_error_not_docker_api(
    tmp_path, repo, docker_client
):
    from orchestrator.adapters.ledger import Ledger

    out = tmp_path / "run"
    # A real fault on the host, in the tool's own work: a directory stands where the patch
    # side's first raw result is copied, so that copy fails (IsADirectoryError, an OSError)
    # after the engine did everything right - as a full disk under the run folder would.
    (out / "raw" / "patch" / "replay-001.json").mkdir(parents=True)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.same,
        "--image", "orchestrator-runner:latest", "--property", ADD, "--replays", "2",
        "--out", str(out), "--ledger", url, "--json",
    )  # fmt: skip
    assert result.code == 3, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("orchestrator:")]
    assert len(errors) == 1, result.stderr
    assert "internal error in side patch" in errors[0]
    assert "IsADirectoryError" in errors[0]
    assert "not of the Docker engine" in errors[0]
    assert "docker_api" not in result.stderr
    assert "Traceback" not in result.stderr  # one line; the traceback went to the run folder
    kept = out / "raw" / "patch" / "internal-error.txt"
    assert str(kept) in errors[0]
    trace = kept.read_text()
    assert trace.startswith("Traceback")
    assert "IsADirectoryError" in trace
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    failed = [event for event in events if event.get("event") == "side.internal_error"]
    assert [(event["side"], event["traceback_file"]) for event in failed] == [("patch", str(kept))]
    # Not an engine case: nothing decided, nothing queued as infrastructure.
    assert result.stdout == ""
    assert not (out / "summary.json").exists()
    if (tmp_path / "ledger.db").exists():
        with Ledger.open(url) as store:
            assert store.infra_entries() == []
    run_id = json.loads((out / "run-log.json").read_text())["run_id"]
    assert_nothing_left(docker_client, result, run_id)


def test_git_failing_on_a_good_revision_is_exit_3_not_bad_input(tmp_path, docker_client):
    path = init(tmp_path / "corrupt")
    sha = commit(path, {"tests/test_a.py": "def test_a():\n    assert True\n"}, "c")
    blob = subprocess.run(
        ["git", "-C", str(path), "rev-parse", f"{sha}:tests/test_a.py"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (path / ".git" / "objects" / blob[:2] / blob[2:]).write_bytes(b"corrupt")
    out = tmp_path / "run"
    result = run_cli(
        tmp_path,
        "--repo", str(path), "--base", sha, "--patch", sha,
        "--image", "orchestrator-runner:latest", "--replays", "1", "--out", str(out),
    )  # fmt: skip
    assert result.code == 3, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("orchestrator:")]
    assert len(errors) == 1, result.stderr
    assert "git cat-file failed: tests/test_a.py" in errors[0]
    assert "Traceback" not in result.stderr
    run_id = json.loads((out / "run-log.json").read_text())["run_id"]
    assert_nothing_left(docker_client, result, run_id)
