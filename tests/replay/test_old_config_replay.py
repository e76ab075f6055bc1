"""Strangers' configurations end to end, on the real engine and runner image.

- An old ``setup.cfg`` (``[tool:pytest]``) whose ``addopts`` name a plugin's options the
  image lacks (``--cov``): pytest stops with a usage error before any test. Both sides are
  ``harness_error`` (no verdict, exit 3), and the run says why in pytest's own words, with
  what to do, instead of a bare "no result".
- A unittest suite whose ``subTest`` loop finds the patch's regression: the patch blocks.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.cli import stored_evidence
from support.scratch_git import commit, init

pytestmark = pytest.mark.docker

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
IMAGE = "orchestrator-runner:latest"

# An option of a plugin the runner image lacks and the tool does not neutralise
# (pytest-benchmark): `--cov` would not do, a replay stands in for pytest-cov's options
# (lanes.md section 12).
SETUP_CFG = """\
[tool:pytest]
addopts = --benchmark-disable --benchmark-columns=min
testpaths = tests
"""
ROWS = """\
import unittest

import pkg


class Rows(unittest.TestCase):
    def test_doubles(self):
        for value in range(4):
            with self.subTest(value=value):
                self.assertEqual(pkg.double(value), value * 2)  # each row
"""


def _replay(
    cwd: Path, repo: Path, base: str, patch: str, *args: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CLI), "replay", "--repo", str(repo), "--base", base, "--patch", patch,
         "--image", IMAGE, "--replays", "2", "--no-record", *args],
        env={**os.environ, "CI": "1"}, cwd=cwd, capture_output=True, text=True, check=False,
        timeout=600,
    )  # fmt: skip


def _one(tmp_path: Path, extra: dict[str, str], base_one: int, patch_one: int) -> tuple:
    """A package whose ``one()`` returns ``base_one`` then ``patch_one``, its test asking
    for 1, and ``extra`` files: the repository and both revisions."""
    repo = init(tmp_path / "repo")
    test = "import pkg\n\n\ndef test_one():\n    assert pkg.one() == 1\n"
    base = commit(
        repo,
        {**extra, "pkg/__init__.py": f"def one():\n    return {base_one}\n",
         "tests/test_one.py": test},
        "one, and its test",
    )  # fmt: skip
    patch = commit(repo, {"pkg/__init__.py": f"def one():\n    return {patch_one}\n"}, "one")
    return repo, base, patch


def test_a_plugin_option_the_image_lacks_is_no_verdict_in_pytests_own_words(tmp_path):
    repo, base, patch = _one(tmp_path, {"setup.cfg": SETUP_CFG}, 1, 2)
    out = tmp_path / "run"
    done = _replay(tmp_path, repo, base, patch, "--out", str(out), "--json")
    assert done.returncode == 3, done.stderr
    warnings = [
        json.loads(line)
        for line in done.stderr.splitlines()
        if line.startswith("{") and json.loads(line)["event"] == "replay.no_result"
    ]
    assert sorted(line["side"] for line in warnings) == ["base", "patch"]
    for line in warnings:
        assert "pytest exited 4 (usage error)" in line["message"]
        assert "unrecognized arguments: --benchmark-disable" in line["message"]
        assert "orchestrator image build" in line["hint"]
    (decision,) = json.loads(done.stdout)["decisions"]
    assert (decision["lane"], decision["code"]) == ("infra_queue", "harness_error")
    evidence = stored_evidence(out, decision["property_id"])
    for side in ("base", "patch"):
        (replay,) = evidence[side]
        assert (replay["label"], replay["reason"]) == ("harness_error", "no_result")
        assert "unrecognized arguments: --benchmark-disable" in replay["message"]


def test_a_regression_one_subtest_finds_blocks_the_patch(tmp_path):
    repo = init(tmp_path / "repo")
    base = commit(
        repo,
        {"pkg/__init__.py": "def double(x):\n    return x * 2\n", "tests/test_rows.py": ROWS},
        "double, tested row by row",
    )
    patch = commit(
        repo,
        {"pkg/__init__.py": "def double(x):\n    return x * 2 if x != 2 else 5\n"},
        "double: a special case",
    )
    done = _replay(tmp_path, repo, base, patch, "--json")
    assert done.returncode == 1, done.stderr
    (decision,) = json.loads(done.stdout)["decisions"]
    assert decision["property_id"] == "tests/test_rows.py::Rows::test_doubles"
    assert (decision["lane"], decision["code"]) == ("property_regression", "assertion_regression")
    assert decision["patch_labels"] == ["assert_fail", "assert_fail"]
    assert decision["base_labels"] == ["assert_pass", "assert_pass"]


def test_a_session_end_that_writes_into_the_tree_is_the_runners_fault_with_the_way_out(
    tmp_path,
):
    """A conftest's session end writes a report into the working folder, as on a CI
    machine; here the tree is read-only, so the session crashes after its tests (as
    pytest-cov's data file does). The tests' verdicts stand; the session is no verdict,
    with the --writable-tree hint, and with --writable-tree the run is clean."""
    report = 'def pytest_sessionfinish(session):\n    open("report.txt", "w").write("done")\n'
    repo, base, patch = _one(tmp_path, {"conftest.py": report}, 2, 1)
    done = _replay(tmp_path, repo, base, patch, "--json")
    assert done.returncode == 3, done.stderr
    found = {e["property_id"]: e for e in json.loads(done.stdout)["decisions"]}
    assert found["tests/test_one.py::test_one"]["lane"] == "fix_candidate"
    session = found["<session>"]
    assert (session["lane"], session["code"]) == ("infra_queue", "harness_error")
    assert session["base_reasons"] == session["patch_reasons"] == ["read_only_tree"]
    assert "--writable-tree" in done.stderr
    writable = _replay(tmp_path, repo, base, patch, "--json", "--writable-tree")
    assert writable.returncode == 0, writable.stderr
    decisions = json.loads(writable.stdout)["decisions"]
    assert [e["property_id"] for e in decisions] == ["tests/test_one.py::test_one"]


def test_a_session_start_that_writes_into_the_tree_is_read_only_tree_with_the_way_out(
    tmp_path,
):
    """The root conftest writes a log as it is imported (as pytest-cov erases .coverage
    at the session's start): the session dies before any test, pytest says "ImportError
    while loading conftest" (its usage error's exit status), and no usage error is what
    it is: every replay is read_only_tree, the run's warning names --writable-tree, and
    with it the run decides."""
    repo = init(tmp_path / "repo")
    started = 'open("started.log", "w").write("session started")\n'
    base = commit(
        repo,
        {"conftest.py": started, "pkg/__init__.py": "def one():\n    return 2\n",
         "tests/test_one.py": "import pkg\n\n\ndef test_one():\n    assert pkg.one() == 1\n"},
        "one, with a start log",
    )  # fmt: skip
    patch = commit(repo, {"pkg/__init__.py": "def one():\n    return 1\n"}, "one is one")
    done = _replay(tmp_path, repo, base, patch, "--json")
    assert done.returncode == 3, done.stderr
    (decision,) = json.loads(done.stdout)["decisions"]
    assert (decision["lane"], decision["code"]) == ("infra_queue", "harness_error")
    assert decision["base_reasons"] == decision["patch_reasons"] == ["read_only_tree"]
    assert "--writable-tree" in done.stderr
    assert "replay.no_result" not in done.stderr  # not pytest's usage error
    writable = _replay(tmp_path, repo, base, patch, "--json", "--writable-tree")
    assert writable.returncode == 0, writable.stderr
    (fixed,) = json.loads(writable.stdout)["decisions"]
    assert (fixed["property_id"], fixed["lane"]) == ("tests/test_one.py::test_one", "fix_candidate")
