"""Screening, workers and recorded durations end to end: a real repository, the real engine,
the real CLI (`replay --screen`, `--replays-all`, `--jobs`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli import stored_evidence, stored_records
from support.scratch_git import commit, git, init
from test_replay_command import assert_nothing_left, by_property, run_cli

pytestmark = pytest.mark.docker

IMAGE = "orchestrator-runner:latest"
QUIET = ("tests/test_quiet.py::test_add", "tests/test_quiet.py::test_sub")
FLAKY = "tests/test_flaky.py::test_fails_first_in_each_container"
BUDGET = "tests/test_budget.py::test_stamp_reads_the_clock_once"
NEW = "tests/test_new.py::test_new"

LIB = """\
def add(a, b):
    return a + b


def stamp(payload, clock):
    return {**payload, "at": clock()}
"""
# Same output, one more clock read.
LIB_PATCH = LIB.replace("    return {**payload", "    clock()\n    return {**payload")
QUIET_TESTS = """\
import lib


def test_add():
    assert lib.add(2, 2) == 4


def test_sub():
    assert lib.add(2, -2) == 0
"""
# Fails the first time it runs in a container (its /tmp is fresh), passes afterwards.
FLAKY_TESTS = """\
import os

MARK = "/tmp/ran-before"


def test_fails_first_in_each_container():
    first = not os.path.exists(MARK)
    with open(MARK, "w"):
        pass
    assert not first
"""
BUDGET_TESTS = """\
import lib


def test_stamp_reads_the_clock_once(deps):
    clock = deps.clock(start=5.0)
    assert lib.stamp({"a": 1}, clock) == {"a": 1, "at": 5.0}
"""


@dataclass(frozen=True)
class Repo:
    path: Path
    base: str
    patch: str


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    path = init(tmp_path_factory.mktemp("screening") / "repo")
    files = {
        "conftest.py": "",
        "lib.py": LIB,
        "tests/test_quiet.py": QUIET_TESTS,
        "tests/test_flaky.py": FLAKY_TESTS,
        "tests/test_budget.py": BUDGET_TESTS,
    }
    base = commit(path, files, "base")
    new_test = "def test_new():\n    pass\n"
    patch = commit(path, {"lib.py": LIB_PATCH, "tests/test_new.py": new_test}, "patch")
    return Repo(path=path, base=base, patch=patch)


def replay(tmp_path: Path, repo: Repo, *args: str, out: str = "run"):
    return run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", IMAGE, "--command", "pytest -q tests/", "--out", str(tmp_path / out), *args,
    )  # fmt: skip


def evidence_of(out: Path, entry: dict[str, Any]) -> dict[str, Any]:
    return stored_evidence(out, entry["property_id"])


def test_screening_replays_only_the_properties_with_signal(tmp_path, repo, docker_client):
    result = replay(tmp_path, repo, "--replays", "3")
    assert result.code == 1, result.stderr  # the call budget and the new test block
    out = tmp_path / "run"
    report = json.loads((out / "summary.json").read_text())
    decided = {r["property_id"]: r["entry"] for r in stored_records(out)}
    assert set(decided) == {*QUIET, FLAKY, BUDGET, NEW}
    # summary.json lists what needs a look (not the quiet ones) and counts the others.
    assert {e["property_id"] for e in report["decisions"]} == set(decided) - set(QUIET)
    assert report["decisions_left_out"] == len(QUIET)
    # The table: what needs a look, blocking first (reject_run, property_regression, then
    # flake_queue_eligible), and one line counting the others; no row of theirs.
    rows = [line.split()[0] for line in result.stdout.splitlines()[1:4]]
    assert rows == [NEW, BUDGET, FLAKY]
    assert "2 more in no_freeze (behaved alike on both sides): --all lists them" in (
        result.stdout.splitlines()
    )
    assert not any(line.startswith(QUIET) for line in result.stdout.splitlines())

    # A P/P property with equal counts: one screening replay per side, and it says so.
    for property_id in QUIET:
        evidence = evidence_of(out, decided[property_id])
        assert (evidence["replays"], evidence["screened"], evidence["signal"]) == (1, 1, [])
        assert len(evidence["base"]) == len(evidence["patch"]) == 1
        assert (decided[property_id]["lane"], decided[property_id]["code"]) == (
            "no_freeze",
            "not_reproduced",
        )
        assert decided[property_id]["replays"] == 1

    # Failed once in screening: it gets N, its screening replay first.
    flaky = evidence_of(out, decided[FLAKY])
    assert flaky["replays"] == 3
    assert flaky["screened"] == 1
    assert "base: assert_fail x1" in flaky["signal"]
    # The second phase runs in the screening's container: its /tmp kept the mark.
    assert [r["label"] for r in flaky["base"]] == ["assert_fail", "assert_pass", "assert_pass"]
    assert decided[FLAKY]["lane"] == "flake_queue_eligible"

    # A call count that differs between the sides in screening earns the N replays.
    budget = evidence_of(out, decided[BUDGET])
    assert budget["replays"] == 3
    assert "calls clock: base {1} vs patch {2}" in budget["signal"]
    assert (decided[BUDGET]["lane"], decided[BUDGET]["code"]) == (
        "property_regression",
        "call_budget",
    )

    # A new test earns its replays too (and is an oracle change).
    new = evidence_of(out, decided[NEW])
    assert new["replays"] == 3
    assert [r["label"] for r in new["patch"]] == ["assert_pass"] * 3
    assert {r["reason"] for r in new["base"]} == {"not_found"}
    assert any(reason.startswith("oracle changed: new on patch") for reason in new["signal"])
    assert decided[NEW]["lane"] == "reject_run"

    # The run log records the policy; the summary and the table count it.
    log = json.loads((out / "run-log.json").read_text())
    assert log["screening"] == {"policy": "screen", "screen": 1, "replays": 3}
    assert report["screening"]["screened"] == 5
    assert report["screening"]["replayed"] == 3
    assert "screened 5, replayed 3" in result.stdout.splitlines()
    # Replay k of a property is raw/<side>/replay-<k>.json: the screening run, then N - K.
    assert sorted(path.name for path in (out / "raw" / "patch").iterdir()) == [
        f"replay-{k:03d}.json" for k in range(1, 4)
    ]
    assert not (out / "raw" / "replays").exists()
    assert {entry["raw_dir"] for entry in report["decisions"]} == {"raw"}
    assert_nothing_left(docker_client, result, report["run_id"])


def test_screening_k_times_then_the_evidence_declares_k(tmp_path, repo):
    result = replay(tmp_path, repo, "--screen", "2", "--replays", "4", "--json")
    assert result.code == 1, result.stderr
    decided = by_property(result.report)
    out = tmp_path / "run"
    for property_id in QUIET:
        evidence = evidence_of(out, decided[property_id])
        assert (evidence["replays"], evidence["screened"]) == (2, 2)
        assert [r["label"] for r in evidence["base"]] == ["assert_pass"] * 2
    # Two screening replays in one container: the flake failed the first and passed the
    # second; the second phase's two ran in the same container.
    flaky = evidence_of(out, decided[FLAKY])
    assert [r["label"] for r in flaky["base"]] == ["assert_fail"] + ["assert_pass"] * 3
    assert result.report["run_log"]["screening"] == {"policy": "screen", "screen": 2, "replays": 4}
    assert by_property(result.report)[FLAKY]["replays"] == 4
    # K >= N: the screening replays are all a property with signal gets.
    enough = replay(tmp_path, repo, "--screen", "2", "--replays", "2", "--json", out="enough")
    assert enough.code == 1, enough.stderr
    flaky_again = evidence_of(tmp_path / "enough", by_property(enough.report)[FLAKY])
    assert [r["label"] for r in flaky_again["base"]] == ["assert_fail", "assert_pass"]
    assert flaky_again["replays"] == 2


def test_replays_all_replays_every_property_n_times(tmp_path, repo):
    result = replay(tmp_path, repo, "--replays-all", "--replays", "2", "--json")
    assert result.code == 1, result.stderr
    for entry in result.report["decisions"]:
        assert entry["replays"] == 2
        assert len(entry["base_labels"]) == len(entry["patch_labels"]) == 2
        assert entry["screened"] == 0
    out = tmp_path / "run"
    evidence = evidence_of(out, by_property(result.report)[QUIET[0]])
    assert "screened" not in evidence
    assert result.report["screening"]["policy"] == "replays_all"
    assert result.report["screening"]["screened"] == 0


def test_named_properties_are_not_screened_unless_asked(tmp_path, repo):
    named = replay(tmp_path, repo, "--property", QUIET[0], "--replays", "2", "--json", out="a")
    assert named.code == 0, named.stderr
    assert by_property(named.report)[QUIET[0]]["replays"] == 2
    assert named.report["run_log"]["screening"]["policy"] == "replays_all"
    screened = replay(
        tmp_path, repo, "--property", QUIET[0], "--screen", "1", "--replays", "2", "--json",
        out="b",
    )  # fmt: skip
    assert screened.code == 0, screened.stderr
    assert by_property(screened.report)[QUIET[0]]["replays"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--screen", "1", "--replays-all"), "--screen and --replays-all"),
        (("--screen", "0"), "--screen"),
        (("--jobs", "0"), "--jobs"),
        (("--screen", "6", "--replays", "5"), "--screen 6 is more than --replays 5"),
        (("--replays", "1001"), "--replays"),
    ],
)
def test_screening_usage_mistakes_are_exit_2(tmp_path, repo, args, message):
    result = replay(tmp_path, repo, *args)
    assert result.code == 2
    assert message in result.stderr
    assert not (tmp_path / "run").exists()


def test_durations_are_recorded_per_repository_and_jobs_split_by_them(tmp_path, repo):
    first = replay(tmp_path, repo, "--replays-all", "--replays", "1", "--json", out="first")
    assert first.code == 1, first.stderr
    root = git(repo.path, "rev-list", "--max-parents=0", repo.base)
    store = tmp_path / ".replay" / "durations" / f"{root}.json"
    recorded = json.loads(store.read_text())
    assert recorded["schema"] == "replay-durations/1"
    assert recorded["repository"] == root
    assert set(recorded["durations_ms"]) == {*QUIET, FLAKY, BUDGET, NEW}
    measured = json.loads((tmp_path / "first" / "durations.json").read_text())
    assert measured["durations_ms"] == recorded["durations_ms"]
    assert first.report["run_log"]["durations"]["known"] == 0

    # The next run reads them, and splits each replay across two workers by module.
    second = replay(
        tmp_path, repo, "--replays-all", "--replays", "1", "--jobs", "2", "--json", out="second"
    )
    assert second.code == 1, second.stderr
    log = second.report["run_log"]
    assert log["jobs"] == 2
    assert log["durations"]["known"] == 5
    assert log["durations"]["file"] == str(store)
    raw = json.loads((tmp_path / "second" / "raw" / "base" / "replay-001.json").read_text())
    assert raw["workers"] == 2
    assert sum(worker["tests"] for worker in raw["worker_runs"]) == 4  # no test_new on base
    lanes = {e["property_id"]: (e["lane"], e["code"]) for e in first.report["decisions"]}
    assert {e["property_id"]: (e["lane"], e["code"]) for e in second.report["decisions"]} == lanes


def test_a_long_suite_whose_screening_may_be_reused_is_split_over_the_whole_engine(tmp_path, repo):
    """Workers are part of a side's reuse key, so their default cannot follow whether the
    other side is reused: a suite whose recorded tests take a minute or more, in a run
    that stores its screening, gets every CPU of the engine per side (a reused base then
    leaves the patch the whole engine); without a store it keeps the engine's share."""
    from orchestrator.core.schedule import SPLIT_FROM_MS

    root = git(repo.path, "rev-list", "--max-parents=0", repo.base)
    store = tmp_path / ".replay" / "durations" / f"{root}.json"
    store.parent.mkdir(parents=True)
    each = SPLIT_FROM_MS / len(QUIET)  # the suite's recorded tests: just a minute
    store.write_text(
        json.dumps(
            {
                "schema": "replay-durations/1",
                "repository": root,
                "updated_at": "2026-12-01T00:00:00Z",
                "durations_ms": dict.fromkeys(QUIET, each),
            }
        )
    )
    stored = replay(tmp_path, repo, "--replays", "1", "--no-record", "--json", out="kept")
    shared = replay(tmp_path, repo, "--replays", "1", "--json", out="stored")
    assert stored.code == shared.code == 1, stored.stderr + shared.stderr
    cpus = shared.report["run_log"]["engine_cpus"]
    assert stored.report["run_log"]["jobs"] == max(1, cpus // 2)  # nothing to reuse it
    assert shared.report["run_log"]["jobs"] == cpus
    assert shared.report["run_log"]["reuse"]["enabled"]


def test_no_record_keeps_no_durations_outside_the_run_folder(tmp_path, repo):
    result = replay(tmp_path, repo, "--replays", "1", "--no-record")
    assert result.code == 1, result.stderr
    assert (tmp_path / "run" / "durations.json").is_file()
    assert not (tmp_path / ".replay").exists()


def test_the_repository_key_is_the_mainline_root(tmp_path):
    from orchestrator.services.durations import repository_key

    path = init(tmp_path / "r")
    first = commit(path, {"a": "1"}, "one")
    commit(path, {"a": "2"}, "two")
    git(path, "checkout", "-q", "--orphan", "other")
    git(path, "rm", "-q", "-r", "--cached", ".")
    other_root = commit(path, {"b": "1"}, "other root")
    git(path, "checkout", "-q", "main")
    git(path, "merge", "-q", "--allow-unrelated-histories", "-m", "merge", "other")
    head = git(path, "rev-parse", "HEAD")
    assert repository_key(path, head) == first
    assert repository_key(path, other_root) == other_root
