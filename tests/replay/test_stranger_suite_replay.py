"""A unittest-style suite as strangers write it, end to end on the real engine and runner
image: tests inherited from a mixin in ``tests/__init__.py``, a test package with helper
data, and an import added to a module whose other tests it does not touch.

History (``lib.size`` falls over on an object without a length until FIX, which also adds
``test_missing_size`` to the mixin, with a data file the test reads)::

    BUG --- FIX --- REVERT (the fix undone, its test too)
              \\--- IMPORT (``import unittest.mock`` added to tests/test_m.py)
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.scratch_git import commit, git, init

pytestmark = pytest.mark.docker

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
IMAGE = "orchestrator-runner:latest"
HINT = "new on patch: replay with --tests-from patch to ask whether it fails on base"

BUGGY = "def size(x, default=None):\n    return len(x)\n"
FIXED = """\
def size(x, default=None):
    try:
        return len(x)
    except TypeError:
        return default
"""
MIXIN = """\
import lib


class SizeMixin:
    def test_size(self):
        self.assertEqual(lib.size([1, 2]), 2)
"""
ADDED = """
    def test_missing_size(self):
        import json
        import os

        here = os.path.dirname(__file__)
        with open(os.path.join(here, "data", "sizes.json")) as data:
            expected = json.load(data)["missing"]
        self.assertEqual(lib.size(object(), expected), expected)
"""
TEST_A = """\
import unittest

from tests import SizeMixin


class TestA(SizeMixin, unittest.TestCase):
    def test_own(self):
        self.assertEqual(1, 1)
"""
TEST_B = """\
import unittest

from . import SizeMixin


class TestB(SizeMixin, unittest.TestCase):
    pass
"""
# A base the source cannot follow: pytest's collection still says where the test exists.
TEST_DYN = """\
import importlib
import unittest

SizeMixin = getattr(importlib.import_module("tests"), "SizeMixin")


class TestDyn(SizeMixin, unittest.TestCase):
    pass
"""
TEST_M = """\
import unittest

import lib


class TestM(unittest.TestCase):
    def test_one(self):
        self.assertEqual(lib.size("a"), 1)

    def test_two(self):
        self.assertEqual(lib.size("ab"), 2)


def test_plain():
    assert unittest.TestCase
"""
NEW = ("tests/test_a.py::TestA::test_missing_size", "tests/test_b.py::TestB::test_missing_size",
       "tests/test_dyn.py::TestDyn::test_missing_size")  # fmt: skip
M_TESTS = ("tests/test_m.py::TestM::test_one", "tests/test_m.py::TestM::test_two",
           "tests/test_m.py::test_plain")  # fmt: skip


@dataclass(frozen=True)
class History:
    path: Path
    bug: str
    fix: str
    revert: str
    imports: str


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> History:
    path = init(tmp_path_factory.mktemp("stranger") / "repo")
    files = {"lib.py": BUGGY, "tests/__init__.py": MIXIN, "tests/test_a.py": TEST_A,
             "tests/test_b.py": TEST_B, "tests/test_dyn.py": TEST_DYN,
             "tests/test_m.py": TEST_M}  # fmt: skip
    bug = commit(path, files, "size: a list's length")
    fix = commit(
        path,
        {"lib.py": FIXED, "tests/__init__.py": MIXIN + ADDED,
         "tests/data/sizes.json": '{"missing": 7}\n'},
        "size: the default for an object without a length, with its test",
    )  # fmt: skip
    git(path, "revert", "--no-edit", fix)
    revert = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", fix)
    imports = commit(
        path,
        {"tests/test_m.py": TEST_M.replace("import lib\n", "import unittest.mock\n\nimport lib\n"),
         "lib.py": FIXED + "\n\n# sizes of things\n"},
        "test_m: mock at hand",
    )  # fmt: skip
    return History(path, bug, fix, revert, imports)


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def run_cli(cwd: Path, *args: str) -> Result:
    done = subprocess.run(
        [str(CLI), *args],
        env={**os.environ, "CI": "1"},
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Result(code=done.returncode, stdout=done.stdout, stderr=done.stderr)


def replay(tmp_path: Path, history: History, base: str, patch: str, *args: str) -> Result:
    return run_cli(
        tmp_path, "replay", "--repo", str(history.path), "--base", base, "--patch", patch,
        "--image", IMAGE, "--replays", "2", *args,
    )  # fmt: skip


def lanes(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {e["property_id"]: (e["lane"], e["code"]) for e in report["decisions"]}


def test_tests_a_mixin_in_another_module_adds_are_an_oracle_change_never_infra(tmp_path, history):
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    result = replay(tmp_path, history, history.bug, history.fix, "--ledger", ledger, "--json")
    assert result.code == 1, result.stderr
    found = lanes(result.report)
    for node_id in NEW:
        assert found[node_id] == ("reject_run", "oracle_changed"), node_id
        (entry,) = [e for e in result.report["decisions"] if e["property_id"] == node_id]
        assert entry["reasons"] == [HINT]
    assert "infra_queue" not in {lane for lane, _ in found.values()}
    # The mixin's own test did not change: compared as before, on each side's own tests.
    assert found["tests/test_a.py::TestA::test_size"] == ("no_freeze", "not_reproduced")
    infra = run_cli(tmp_path, "infra", "list", "--ledger", ledger, "--json")
    assert infra.code == 0, infra.stderr
    assert json.loads(infra.stdout)["cases"] == []


def test_tests_from_with_the_default_command_takes_the_whole_test_package(tmp_path, history):
    out = tmp_path / "fix"
    judged = replay(tmp_path, history, history.bug, history.fix, "--tests-from", "patch",
                    "--no-record", "--out", str(out))  # fmt: skip
    assert judged.code == 0, judged.stderr
    first = judged.stdout.splitlines()[0]
    assert first == (
        f"tests from patch ({history.fix[:12]}): the oracle on both sides, "
        "6 files from tests/ laid over each tree"
    )
    assert "tests_from.overlay" in judged.stderr
    log = json.loads((out / "run-log.json").read_text())
    overlaid = {item["path"] for item in log["overlaid_files"]}
    assert {"tests/__init__.py", "tests/data/sizes.json"} <= overlaid
    assert log["rule_for_tests"]["folders"] == ["tests"]
    assert log["overlay_summary"] == "6 files from tests/ laid over each tree"
    summary = json.loads((out / "summary.json").read_text())
    for node_id in NEW:
        assert lanes(summary)[node_id] == ("fix_candidate", "fix_candidate"), node_id

    # The fix undone: its tests judge both sides and the regression blocks (exit 1).
    undone = replay(tmp_path, history, history.fix, history.revert, "--tests-from", "base",
                    "--no-record", "--json")  # fmt: skip
    assert undone.code == 1, undone.stderr
    found = lanes(undone.report)
    for node_id in NEW:
        assert found[node_id] == ("property_regression", "assertion_regression"), node_id
    assert "infra_queue" not in {lane for lane, _ in found.values()}


def test_an_added_submodule_import_leaves_the_modules_other_tests_compared(tmp_path, history):
    result = replay(tmp_path, history, history.fix, history.imports, "--no-record", "--json")
    assert result.code == 0, result.stderr
    found = lanes(result.report)
    for node_id in M_TESTS:
        assert found[node_id] == ("no_freeze", "not_reproduced"), node_id
    assert {lane for lane, _ in found.values()} == {"no_freeze"}


def test_changed_counts_inherited_tests_and_says_what_it_considered(tmp_path, history):
    result = replay(tmp_path, history, history.bug, history.fix, "--changed", "--no-record")
    assert result.code == 1, result.stderr
    # test_a and test_b inherit test_size (and, on the patch, test_missing_size) from the
    # mixin; test_dyn's base is computed at run time, so its source shows no test and the
    # line says what was considered: the tests the sources show.
    assert result.stdout.splitlines()[0] == (
        "changed: selected 8 of 8 tests found in 3 test modules"
        " (2 by their oracle, 6 by an import of a changed module)"
    )
