"""``--tests-from`` lays over the test tree pytest sees, end to end on the real engine and
runner image: a project whose ``tox.ini`` searches ``tests`` and ``docs`` and runs the
``.rst`` files there as doctests, a root ``conftest.py`` that turns ``cases/*.case`` data
files into tests, and a whole suite replayed under a deadline from its recorded durations.

History (``lib.double`` drops the sign until FIX, which updates the doctest in
``docs/usage.rst`` and adds ``test_fix``)::

    BUG --- FIX --- REGRESS (the code back, the tests and docs kept)
      |        \\--- REVERT (the code, the doctest and test_fix all undone)
      \\--- CASES (a data file's expected value changed)
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli import stored_records
from support.scratch_git import commit, git, init

pytestmark = pytest.mark.docker

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
IMAGE = "orchestrator-runner:latest"

TOX = "[pytest]\ntestpaths = tests docs cases\naddopts = --doctest-glob=*.rst\n"
BUGGY = "def double(x):\n    return abs(x) * 2\n"
FIXED = "def double(x):\n    return x * 2\n"
USAGE = "Usage\n=====\n\nDoubling::\n\n    >>> from lib import double\n    >>> double(2)\n    4\n"
USAGE_FIXED = USAGE + "\nThe sign is kept::\n\n    >>> double(-2)\n    -4\n"
TESTS = "import lib\n\n\ndef test_double():\n    assert lib.double(2) == 4\n"
TEST_FIX = "\n\ndef test_fix():\n    assert lib.double(-1) == -2\n"
# A data file per test: "<input> -> <expected>" (not Python: its oracle is the whole file).
CONFTEST = """\
import pytest

import lib


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".case":
        return CaseFile.from_parent(parent, path=file_path)


class CaseFile(pytest.File):
    def collect(self):
        yield CaseItem.from_parent(self, name=self.path.stem)


class CaseItem(pytest.Item):
    def runtest(self):
        given, expected = self.path.read_text().split("->")
        assert lib.double(int(given)) == int(expected)
"""
DOCTEST = "docs/usage.rst::usage.rst"
FIX_TEST = "tests/test_lib.py::test_fix"
CASE = "cases/a.case::a"


@dataclass(frozen=True)
class History:
    path: Path
    bug: str
    fix: str
    regress: str
    revert: str
    cases: str


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> History:
    path = init(tmp_path_factory.mktemp("config") / "repo")
    files = {"tox.ini": TOX, "lib.py": BUGGY, "conftest.py": CONFTEST,
             "tests/test_lib.py": TESTS, "docs/usage.rst": USAGE, "docs/conf.py": "x = 1\n",
             "cases/a.case": "2 -> 4\n"}  # fmt: skip
    bug = commit(path, files, "double")
    fixed = {"lib.py": FIXED, "docs/usage.rst": USAGE_FIXED, "tests/test_lib.py": TESTS + TEST_FIX}
    fix = commit(path, fixed, "double keeps the sign")
    regress = commit(path, {"lib.py": BUGGY}, "double: abs again")
    git(path, "checkout", "-q", fix)
    git(path, "revert", "--no-edit", fix)
    revert = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", bug)
    cases = commit(path, {"cases/a.case": "3 -> 6\n"}, "another case")
    return History(path, bug, fix, regress, revert, cases)


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str
    out: Path

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text())

    @property
    def run_log(self) -> dict[str, Any]:
        return json.loads((self.out / "run-log.json").read_text())

    def lanes(self) -> dict[str, tuple[str, str]]:
        return {e["property_id"]: (e["lane"], e["code"]) for e in self.entries()}

    def entry(self, property_id: str) -> dict[str, Any]:
        (found,) = [e for e in self.entries() if e["property_id"] == property_id]
        return found

    def entries(self) -> list[dict[str, Any]]:
        """Every property's entry (the run's store; summary.json lists those needing a look)."""
        return [record["entry"] for record in stored_records(self.out)]


def replay(cwd: Path, history: History, base: str, patch: str, name: str, *args: str) -> Result:
    cwd.mkdir(exist_ok=True)
    out = cwd / name
    done = subprocess.run(
        [str(CLI), "replay", "--repo", str(history.path), "--base", base, "--patch", patch,
         "--image", IMAGE, "--replays", "2", "--no-record", "--tests-from", "patch",
         "--out", str(out), *args],
        env={**os.environ, "CI": "1"}, cwd=cwd, capture_output=True, text=True, timeout=900,
        check=False,
    )  # fmt: skip
    return Result(done.returncode, done.stdout, done.stderr, out)


def test_a_fix_that_updates_its_rst_doctest_is_a_fix_and_undoing_the_code_blocks(tmp_path, history):
    fix = replay(tmp_path, history, history.bug, history.fix, "fix")
    assert fix.code == 0, fix.stdout + fix.stderr
    lanes = fix.lanes()
    assert lanes[DOCTEST] == ("fix_candidate", "fix_candidate"), fix.entry(DOCTEST)
    assert lanes[FIX_TEST] == ("fix_candidate", "fix_candidate")
    assert lanes["tests/test_lib.py::test_double"] == ("no_freeze", "not_reproduced")
    log = fix.run_log
    assert log["rule_for_tests"]["collected"] == {"--doctest-glob *.rst": ["docs/usage.rst"]}
    assert log["rule_for_tests"]["pytest_config"]["read_from"] == [
        "tox.ini at base", "tox.ini at patch"]  # fmt: skip
    assert "docs/usage.rst" in {item["path"] for item in log["overlaid_files"]}
    assert "docs/conf.py" not in {item["path"] for item in log["overlaid_files"]}
    assert "1 file by --doctest-glob *.rst" in fix.stdout.splitlines()[0]
    # No --timeout, no record of the suite: the whole suite's generous default.
    assert (log["timeout_s"], log["timeout_rule"]) == (
        1800.0,
        "the whole-suite default (no record)",
    )
    assert fix.summary["removed_tests"] == []

    # The code undone, the fix's doctest and test kept: the patch breaks what they state.
    regress = replay(tmp_path, history, history.fix, history.regress, "regress")
    assert regress.code == 1, regress.stdout + regress.stderr
    lanes = regress.lanes()
    assert lanes[DOCTEST] == ("property_regression", "assertion_regression"), lanes
    assert lanes[FIX_TEST] == ("property_regression", "assertion_regression")


def test_a_revert_that_deletes_the_fixs_test_says_so(tmp_path, history):
    revert = replay(tmp_path, history, history.fix, history.revert, "revert")
    line = (
        "the patch removes 1 test the base has (tests/test_lib.py::test_fix):"
        " they judge neither side"
    )
    assert line in revert.stdout.splitlines(), revert.stdout + revert.stderr
    assert revert.summary["removed_tests"] == [FIX_TEST]
    assert revert.run_log["removed_tests"] == [FIX_TEST]
    assert FIX_TEST not in revert.lanes()
    assert revert.code == 0, revert.stderr  # no lane, no exit status: one line says it


def test_a_data_file_outside_the_overlay_names_the_option_and_a_recorded_suite_its_deadline(
    tmp_path, history
):
    changed = replay(tmp_path, history, history.bug, history.cases, "cases")
    assert changed.code == 1, changed.stdout + changed.stderr
    assert changed.lanes()[CASE] == ("reject_run", "oracle_changed")
    (reason,) = changed.entry(CASE)["reasons"]
    assert reason.endswith("cases/a.case is not laid over (--test-path cases/a.case lays it over)")
    assert f"oracle changed: {CASE}: {reason}" in changed.stdout.splitlines()

    # The repository's recorded durations (the record a recorded run keeps) time the suite.
    root = git(history.path, "rev-list", "--max-parents=0", history.bug)
    record = tmp_path / ".replay" / "durations" / f"{root}.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({
        "schema": "replay-durations/1", "repository": root, "updated_at": "2026-01-01T00:00:00Z",
        "durations_ms": {"tests/test_lib.py::test_double": 300000, DOCTEST: 100000},
    }))  # fmt: skip
    laid = replay(tmp_path, history, history.bug, history.cases, "laid", "--test-path", "cases")
    assert laid.code == 0, laid.stdout + laid.stderr
    assert laid.lanes()[CASE] == ("no_freeze", "not_reproduced")
    log = laid.run_log
    assert log["timeout_s"] == 3 * 400 + 60
    assert log["timeout_rule"] == (
        "recorded durations: 3 x 400.0 s (2 tests) + 60 s, at least 600 s"
    )
