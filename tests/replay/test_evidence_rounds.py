"""Rounds of evidence end to end (docs/lanes.md section 3b): a real repository, the real
engine, the real CLI. A test whose code under test fails on the patch only the second
time it runs in a container (a count kept in the container's /tmp) looks like a new
instability after five replays; the run replays it more on both sides, in rounds, and at
the cap sets it aside, not blocking, with one line saying why. A test that always fails
on the patch blocks at once, with no round."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli import stored_evidence, stored_records
from support.scratch_git import commit, init
from test_replay_command import assert_nothing_left, by_property, run_cli

pytestmark = pytest.mark.docker

IMAGE = "orchestrator-runner:latest"
SECOND = "tests/test_lib.py::test_value_on_its_second_call_too"
ALWAYS = "tests/test_lib.py::test_total"
FIRST = "tests/test_lib.py::test_first_on_its_first_call_too"

# Both sides count the calls in /tmp (the same file reads and writes: the call budgets of
# the sides stay equal); only the patch looks at the count.
LIB = """\
import os


def _calls(name):
    path = f"/tmp/{name}-calls"
    calls = int(open(path).read()) + 1 if os.path.exists(path) else 1
    with open(path, "w") as handle:
        handle.write(str(calls))
    return calls


def value():
    _calls("value")
    return 1


def total(items):
    return sum(items)


def first():
    _calls("first")
    return 1
"""
# The patch: value() is wrong the second time it runs in a container, first() the first
# time, total() always.
LIB_PATCH = """\
import os



def _calls(name):
    path = f"/tmp/{name}-calls"
    calls = int(open(path).read()) + 1 if os.path.exists(path) else 1
    with open(path, "w") as handle:
        handle.write(str(calls))
    return calls


def value():
    return 0 if _calls("value") == 2 else 1


def total(items):
    return sum(items) + 1


def first():
    return 0 if _calls("first") == 1 else 1
"""
TESTS = """\
import lib


def test_value_on_its_second_call_too():
    assert lib.value() == 1


def test_total():
    assert lib.total([1, 2]) == 3


def test_first_on_its_first_call_too():
    assert lib.first() == 1
"""


@dataclass(frozen=True)
class Repo:
    path: Path
    base: str
    patch: str


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    path = init(tmp_path_factory.mktemp("rounds") / "repo")
    base = commit(path, {"conftest.py": "", "lib.py": LIB, "tests/test_lib.py": TESTS}, "base")
    patch = commit(path, {"lib.py": LIB_PATCH}, "patch")
    return Repo(path=path, base=base, patch=patch)


def replay(tmp_path: Path, repo: Repo, *args: str):
    return run_cli(
        tmp_path,
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.patch,
        "--image", IMAGE, "--command", "pytest -q tests/", "--replays", "5",
        "--out", str(tmp_path / "run"), "--no-record", *args,
    )  # fmt: skip


def read(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def test_rounds_set_a_weak_instability_aside_and_a_regression_still_blocks(tmp_path, repo):
    result = replay(tmp_path, repo, "--property", SECOND, "--property", ALWAYS)
    assert result.code == 1, result.stderr  # the regression blocks
    out = tmp_path / "run"
    report = read(out / "summary.json")
    decided = by_property(report)

    # The regression: P/F at N = 5, decided at once (no round), blocking.
    always = decided[ALWAYS]
    assert (always["lane"], always["code"]) == ("property_regression", "assertion_regression")
    assert always["patch_labels"] == ["assert_fail"] * 5
    assert (always["replays"], always["adaptive"]) == (5, 0)

    # The second call: one failure in five on the patch, none on base: replayed to 10, then
    # to the cap, 20, each round in fresh containers (a run of named properties keeps
    # none), so it fails once per container: 3 of 20.
    second = decided[SECOND]
    assert (second["lane"], second["code"]) == ("no_freeze", "weak_evidence")
    assert second["blocking"] is False
    assert (second["replays"], second["adaptive"]) == (20, 15)
    assert second["base_labels"] == ["assert_pass"] * 20
    assert second["patch_labels"].count("assert_fail") == 3
    assert second["patch_labels"][1] == "assert_fail"  # the first container's second replay
    # Two properties at stake, three looks: 0.01 / 6.
    assert second["reasons"][0] == (
        "patch failed 3 of 20, base 0 of 20: p = 0.12 > 0.0017, not evidence of a new instability"
    )
    assert second["reasons"][1].startswith("the table said property_regression / new_instability")

    # The rounds, and what they spent, in the report, the run log and the printed lines.
    evidence = report["evidence"]
    assert [
        (r["round"], r["replays"], r["before"], r["properties"]) for r in evidence["rounds"]
    ] == [
        (1, 5, 5, [SECOND]),
        (2, 10, 10, [SECOND]),
    ]
    assert (evidence["replays_spent"], evidence["weak"], evidence["at_stake"]) == (30, 1, 2)
    assert read(out / "run-log.json")["evidence"] == evidence
    assert read(out / "run-log.json")["evidence_rule"] == {
        "false_block_rate": 0.01,
        "cap": 20,
        "looks": [5, 10, 20],
        "enabled": True,
    }
    assert "evidence: 1 replayed more in 2 rounds, 30 replays spent;" in result.stdout
    assert "evidence.round" in result.stderr

    # The evidence document declares the 20 replays (row 1 checks them) and every raw
    # replay file is where records.md says: raw/<side>/replay-<k>.json, k = 1..20.
    document = stored_evidence(out, second["property_id"])
    assert (document["replays"], document["adaptive"]) == (20, 15)
    for side in ("base", "patch"):
        assert sorted(p.name for p in (out / second["raw_dir"] / side).glob("replay-*.json")) == (
            sorted(f"replay-{k:03d}.json" for k in range(1, 21))
        )


def test_rounds_run_in_the_screenings_kept_containers(tmp_path, repo, docker_client):
    """Screened (no --property): the screening's containers serve the second phase and
    then every round, so first() fails once in all on the patch (its first call, in the
    screening): 1 of 20. In fresh containers it would fail once per round."""
    result = replay(tmp_path, repo, "--evidence-cap", "20")
    assert result.code == 1, result.stderr
    report = read(tmp_path / "run" / "summary.json")
    decided = {r["property_id"]: r["entry"] for r in stored_records(tmp_path / "run")}
    first = decided[FIRST]
    assert (first["code"], first["replays"], first["screened"]) == ("weak_evidence", 20, 1)
    assert first["patch_labels"][0] == "assert_fail"
    assert first["patch_labels"].count("assert_fail") == 1
    assert first["reasons"][0].startswith("patch failed 1 of 20, base 0 of 20: p = 0.5 >")
    assert [r["replays"] for r in report["evidence"]["rounds"]] == [5, 10]
    # Its second call never came in the screening: no signal, decided on one replay.
    assert (decided[SECOND]["code"], decided[SECOND]["replays"]) == ("not_reproduced", 1)
    assert decided[ALWAYS]["code"] == "assertion_regression"
    # The kept containers are gone with the run, and so are its scratch folders.
    assert_nothing_left(docker_client, result, report["run_id"])


def test_the_rule_off_blocks_as_the_table_says(tmp_path, repo):
    result = replay(tmp_path, repo, "--property", SECOND, "--false-block-rate", "1")
    assert result.code == 1, result.stderr
    second = by_property(read(tmp_path / "run" / "summary.json"))[SECOND]
    assert (second["code"], second["replays"]) == ("new_instability", 5)
