"""A project whose configuration turns on what changes what a replay observes, replayed
through the real CLI in its own project image: ``addopts = "--cov=plugproj
--cov-report=term -n 2 --reruns 3 -p randomly"`` with pytest-cov, pytest-xdist,
pytest-rerunfailures, pytest-randomly and Hypothesis installed. The replay decides (0
for a patch that changes nothing, 1 for a regression, never 3), says once what it
neutralised and records it, writes no ``.coverage`` (a read-only tree would refuse it:
exit 3), gives every replay its own example database, and sees the raw outcome of a
test that only passes when rerun."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from image_project import (
    build_args,
    by_property,
    commit,
    init,
    orchestrator,
    pip_env,
    remove_images,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PLUGGED = ("cov", "xdist", "rerunfailures", "randomly", "hypothesis")

PYPROJECT = """\
[project]
name = "plugproj"
version = "1.0.0"
dependencies = []

[dependency-groups]
test = [
    "pytest>=9", "pytest-cov", "pytest-xdist", "pytest-rerunfailures", "pytest-randomly",
    "hypothesis",
]

[tool.pytest.ini_options]
addopts = "--cov=plugproj --cov-report=term -n 2 --reruns 3 -p randomly --strict-markers"
filterwarnings = ["error"]
"""

SOURCE = "def add(a, b):\n    return a + b\n"

TESTS = """\
import os
import pathlib

import coverage
import pytest
from hypothesis import given
from hypothesis import strategies as st

import plugproj


def test_add():
    assert plugproj.add(2, 3) == 5


@given(st.integers(), st.integers())
def test_add_commutes(a, b):
    assert plugproj.add(a, b) == plugproj.add(b, a)


def test_nothing_measures_nothing_is_written():
    assert coverage.Coverage.current() is None
    assert not list(pathlib.Path(".").glob(".coverage*"))


def test_in_the_replays_own_process(worker_id):
    assert worker_id == "master"
    assert "PYTEST_XDIST_WORKER" not in os.environ


def test_randomly_is_pinned_to_the_runs_seed(pytestconfig):
    assert pytestconfig.getoption("randomly_seed") == int(os.environ["REPLAY_SEED"])


def test_the_example_database_is_this_replays_own():
    folder = pathlib.Path(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])
    mark = folder / "left-by-another-replay"
    assert not mark.exists()
    folder.mkdir(parents=True, exist_ok=True)
    mark.write_text("x")


ATTEMPTS = []


@pytest.mark.flaky(reruns=3)
def test_passes_when_rerun():
    ATTEMPTS.append(1)
    if os.environ.get("FIRST_ATTEMPT_FAILS"):
        assert len(ATTEMPTS) > 1
"""


@dataclass(frozen=True, kw_only=True)
class Plugged:
    repo: Path
    base: str
    noop: str  # changes nothing the tests see
    regression: str  # add() off by one
    image_id: str


@pytest.fixture(scope="module")
def plugged(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory, wheelhouse_cache: Path
) -> Iterator[Plugged]:
    repo = init(tmp_path_factory.mktemp("plugged") / "repo")
    base = commit(
        repo,
        {
            "pyproject.toml": PYPROJECT,
            "src/plugproj/__init__.py": SOURCE,
            "tests/test_plug.py": TESTS,
        },
        "a project with coverage, xdist, reruns, randomly and Hypothesis",
    )
    noop = commit(repo, {"README.md": "plugproj\n"}, "a readme")
    regression = commit(
        repo, {"src/plugproj/__init__.py": SOURCE.replace("a + b", "a + b + 1")}, "off by one"
    )
    if not any(wheelhouse_cache.glob("pytest_rerunfailures-*.whl")):
        pytest.fail(f"{wheelhouse_cache} lacks the plugins' wheels: run `make wheelhouse`")
    built = orchestrator(*build_args(repo, "--rev", base, "--group", "test"), env=pip_env())
    report = built.json()
    try:
        yield Plugged(
            repo=repo, base=base, noop=noop, regression=regression, image_id=report["image_id"]
        )
    finally:
        remove_images(docker_client, [report["image_id"]])


def _replay(plugged: Plugged, tmp_path: Path, patch: str, *extra: str):
    out = tmp_path / "run"
    done = orchestrator(
        "replay", "--repo", str(plugged.repo), "--base", plugged.base, "--patch", patch,
        "--image", plugged.image_id, "--no-record", "--out", str(out), "--json",
        "--timeout", "120", *extra,
    )  # fmt: skip
    return done, out


def _neutralised_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "replay.neutralised" in line]


def test_a_patch_that_changes_nothing_passes_and_says_what_was_neutralised(plugged, tmp_path):
    done, out = _replay(plugged, tmp_path, plugged.noop, "--replays", "2", "--replays-all")
    report = done.json()
    assert done.exit_code == 0, done.stderr[-3000:]
    for name, decision in by_property(report).items():
        assert decision["base_labels"] == ["assert_pass", "assert_pass"], (name, decision)
        assert decision["patch_labels"] == ["assert_pass", "assert_pass"], (name, decision)
    (line,) = _neutralised_lines(done.stderr)
    assert f"plugins={','.join(PLUGGED)}" in line
    assert "--cov=plugproj" in line  # where the configuration asked for it
    assert report["neutralised"] == list(PLUGGED)
    run_log = json.loads((out / "run-log.json").read_text())
    neutralise = run_log["neutralise"]
    assert neutralise["installed"] == list(PLUGGED)
    assert neutralise["config"]["base"]["ini_file"] == "pyproject.toml"
    assert neutralise["config"]["base"]["found"]["addopts"] == {
        "cov": ["--cov=plugproj", "--cov-report=term"],
        "xdist": ["-n", "2"],
        "rerunfailures": ["--reruns", "3"],
        "randomly": ["-p", "randomly"],
    }
    assert "--randomly-seed=0" in neutralise["args"]
    raw = json.loads((out / "raw" / "base" / "replay-002.json").read_text())
    assert raw["result"]["neutralised"] == list(PLUGGED)


def test_a_regression_blocks(plugged, tmp_path):
    done, _ = _replay(plugged, tmp_path, plugged.regression, "--replays", "2")
    assert done.exit_code == 1, done.stderr[-3000:]
    decisions = by_property(done.json())
    assert (decisions["test_add"]["lane"], decisions["test_add"]["code"]) == (
        "property_regression",
        "assertion_regression",
    )
    for name in ("test_nothing_measures_nothing_is_written", "test_in_the_replays_own_process"):
        assert decisions[name]["code"] == "not_reproduced"
    assert len(_neutralised_lines(done.stderr)) == 1


def test_a_test_that_passes_only_when_rerun_shows_its_raw_outcome(plugged, tmp_path):
    done, _ = _replay(
        plugged, tmp_path, plugged.noop, "--replays", "2", "--env", "FIRST_ATTEMPT_FAILS=1",
        "--property", "tests/test_plug.py::test_passes_when_rerun",
    )  # fmt: skip
    (decision,) = done.json()["decisions"]
    assert decision["base_labels"] == decision["patch_labels"] == ["assert_fail", "assert_fail"]
    assert (decision["lane"], decision["code"]) == ("block_patch", "uniform_failure")
    assert done.exit_code == 1
