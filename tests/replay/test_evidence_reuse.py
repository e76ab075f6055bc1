"""Reusing the base side's screening end to end: real repositories, the real engine, the
real CLI. A second pull request on the same base takes the base's screening from the
ledger (no base container starts for it), decides as a run with --no-reuse does; a
pull request's tests laid over the base (--tests-from patch) plant nothing another pull
request reads; a side whose screening did not go cleanly stores nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.scratch_git import commit, git, init
from test_replay_command import by_property, run_cli

pytestmark = pytest.mark.docker

IMAGE = "orchestrator-runner:latest"
LIB = "def add(a, b):\n    return a + b\n"
TESTS = """\
import lib


def test_add():
    assert lib.add(2, 2) == 4


def test_neg():
    assert lib.add(2, -2) == 0
"""
# Kills the replay's driver: the base side's container does not end well.
KILLER = """\
import os
import signal


def test_kills_its_driver():
    os.kill(os.getppid(), signal.SIGKILL)
"""


def replay(tmp_path: Path, repo: Path, base: str, patch: str, out: str, *args: str):
    return run_cli(
        tmp_path,
        "--repo", str(repo), "--base", base, "--patch", patch, "--image", IMAGE,
        "--command", "pytest -q tests/", "--replays", "3", "--out", str(tmp_path / out),
        "--evidence-cache", str(tmp_path / "cache"), "--json", *args,
    )  # fmt: skip


def reuse_of(tmp_path: Path, out: str, side: str) -> dict[str, Any]:
    log = json.loads((tmp_path / out / "run-log.json").read_text())
    (entry,) = [item for item in log["reuse"]["sides"] if item["side"] == side]
    return dict(entry)


def lanes(report: dict[str, Any]) -> dict[str, tuple[str, str, list[str], list[str]]]:
    return {
        p: (e["lane"], e["code"], e["base_labels"], e["patch_labels"])
        for p, e in by_property(report).items()
    }


def base_containers_created(docker_client, run_id: str, since: float) -> list[str]:
    """The names of the base side's containers the engine created for this run."""
    events = docker_client.events(
        since=int(since),
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "container", "event": "create", "label": f"orchestrator.run-id={run_id}"},
    )
    return [
        event["Actor"]["Attributes"].get("name", "")
        for event in events
        if event["Actor"]["Attributes"].get("orchestrator.side") == "base"
    ]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, str, str, str]:
    path = init(tmp_path_factory.mktemp("reuse") / "repo")
    base = commit(path, {"conftest.py": "", "lib.py": LIB, "tests/test_lib.py": TESTS}, "base")
    first = commit(path, {"README": "one\n"}, "first pull request")
    git(path, "checkout", "-q", base)
    broken = LIB.replace("a + b", "a - b")
    second = commit(path, {"lib.py": broken}, "second pull request: a regression")
    return path, base, first, second


def test_a_second_pull_request_on_the_same_base_reuses_its_screening(tmp_path, repo, docker_client):
    path, base, first, second = repo
    one = replay(tmp_path, path, base, first, "one")
    assert one.code == 0, one.stderr
    stored = reuse_of(tmp_path, "one", "base")
    assert stored["reused_from"] is None
    assert stored["scope"] == "shared"
    assert len(stored["stored_in"]) == 2  # the ledger and the cache folder

    since = time.time() - 1
    two = replay(tmp_path, path, base, second, "two")
    assert two.code == 1, two.stderr
    taken = reuse_of(tmp_path, "two", "base")
    assert taken["key"] == stored["key"]
    assert taken["reused_from"] == one.report["run_id"]
    assert taken["found_in"].startswith("ledger ")
    # The base's screening came from the store: its raw file is the stored bytes...
    assert (tmp_path / "two" / "raw" / "base" / "replay-001.json").read_bytes() == (
        tmp_path / "one" / "raw" / "base" / "replay-001.json"
    ).read_bytes()
    # ...and no base container started for it: only the second phase's, fresh.
    created = base_containers_created(docker_client, two.report["run_id"], since)
    assert created
    assert all("-replays-" in name for name in created), created
    # The second phase replayed both sides fresh: the regression has N on both.
    decided = by_property(two.report)
    for entry in decided.values():
        assert entry["lane"] == "property_regression"
        assert entry["base_labels"] == ["assert_pass"] * 3

    # The same run without reuse decides every property alike.
    fresh = replay(tmp_path, path, base, second, "fresh", "--no-reuse")
    assert fresh.code == 1, fresh.stderr
    assert lanes(fresh.report) == lanes(two.report)
    log = json.loads((tmp_path / "fresh" / "run-log.json").read_text())
    assert log["reuse"] == {"enabled": False, "evidence_cache": str(tmp_path / "cache")}

    # The cache folder alone serves a job that has no ledger.
    alone = replay(tmp_path, path, base, first, "alone", "--no-record")
    assert alone.code == 0, alone.stderr
    assert reuse_of(tmp_path, "alone", "base")["found_in"].startswith("cache ")


def test_tests_laid_over_the_base_by_a_pull_request_plant_nothing_for_another(tmp_path, repo):
    path, base, first, second = repo
    planted = replay(tmp_path, path, base, first, "planted", "--tests-from", "patch")
    assert planted.code == 0, planted.stderr
    scoped = reuse_of(tmp_path, "planted", "base")
    assert scoped["scope"] == f"patch:{planted.report['run_log']['patch_rev']}"
    assert scoped["stored_in"]
    # Another pull request with the very same test files on the same base: not reused.
    other = replay(tmp_path, path, base, second, "other", "--tests-from", "patch")
    assert other.code == 1, other.stderr
    assert reuse_of(tmp_path, "other", "base")["reused_from"] is None
    assert reuse_of(tmp_path, "other", "base")["key"] != scoped["key"]
    # Nor a run without the overlay (its key is the shared one of the base's own tree).
    replay(tmp_path, path, base, first, "plain")
    assert reuse_of(tmp_path, "plain", "base")["reused_from"] is None
    # A re-run of the same pull request does reuse it.
    replay(tmp_path, path, base, first, "again", "--tests-from", "patch")
    assert reuse_of(tmp_path, "again", "base")["reused_from"] == planted.report["run_id"]


def test_a_side_whose_screening_went_wrong_stores_nothing(tmp_path):
    path = init(tmp_path / "repo")
    files = {"conftest.py": "", "lib.py": LIB, "tests/test_lib.py": TESTS}
    base = commit(path, {**files, "tests/test_killer.py": KILLER}, "base kills its driver")
    patch = commit(path, {"README": "x\n"}, "patch")
    first = replay(tmp_path, path, base, patch, "first")
    assert first.code == 3, first.stderr  # the killed driver: no verdict
    for side in ("base", "patch"):
        entry = reuse_of(tmp_path, "first", side)
        assert entry["stored_in"] == []
        assert entry["not_stored"]
    assert not list((tmp_path / "cache").rglob("*.json.z"))
    replay(tmp_path, path, base, patch, "second")
    assert reuse_of(tmp_path, "second", "base")["reused_from"] is None
