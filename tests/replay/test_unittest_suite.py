"""A unittest-style suite end to end: failures located at their line, skips as a state.

Scratch repositories, the real engine, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from support.cli import stored_evidence, stored_records
from support.scratch_git import commit, init

pytestmark = pytest.mark.docker

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
IMAGE = "orchestrator-runner:latest"

LIB = 'MODE = "{mode}"\n\n\ndef value():\n    return MODE\n'
UNIT_TEST = """\
import unittest

import lib


class ModeTests(unittest.TestCase):
    def test_mode(self):
        mode = lib.value()
        self.assertNotEqual(mode, "first")  # line 9
        self.assertNotEqual(mode, "second")  # line 10

    def test_fine(self):
        self.assertTrue(lib.value())
"""
MODE_TEST = "tests/test_modes.py::ModeTests::test_mode"


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    return subprocess.run(
        [str(CLI), *args],
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1"},
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def evidence_of(run_dir: Path, property_id: str) -> dict[str, Any]:
    return stored_evidence(run_dir, property_id)


def test_two_failures_of_one_unittest_test_are_told_apart_at_their_lines(tmp_path):
    repo = init(tmp_path / "repo")
    base = commit(repo, {"lib.py": LIB.format(mode="first"), "tests/test_modes.py": UNIT_TEST}, "b")
    patch = commit(repo, {"lib.py": LIB.format(mode="second")}, "p")
    run_dir = tmp_path / "run"
    done = run_cli(
        tmp_path, "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", IMAGE, "--property", MODE_TEST, "--replays", "2", "--no-record",
        "--out", str(run_dir), "--json",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    (decision,) = json.loads(done.stdout)["decisions"]
    # The same test fails on both sides, at two different assertions: row 10.
    assert (decision["lane"], decision["code"]) == ("different_bug", "different_assertion")
    evidence = evidence_of(run_dir, MODE_TEST)
    located = f"{MODE_TEST}@tests/test_modes.py"
    assert {r["assertion_id"] for r in evidence["base"]} == {f"{located}:9:AssertionError"}
    assert {r["assertion_id"] for r in evidence["patch"]} == {f"{located}:10:AssertionError"}
    assert {r["assertion_key"] for r in evidence["patch"]} == {
        f"{MODE_TEST}@ModeTests.test_mode+3:AssertionError"
    }
    # Annotations point at the failing line, not at the def.
    shown = run_cli(tmp_path, "report", str(run_dir), "--annotations")
    assert shown.returncode == 0, shown.stderr
    assert "::error file=tests/test_modes.py,line=10," in shown.stdout


def test_the_table_says_why_a_patch_is_blocked_when_base_fails_too(tmp_path):
    repo = init(tmp_path / "repo")
    base = commit(repo, {"lib.py": LIB.format(mode="first"), "tests/test_modes.py": UNIT_TEST}, "b")
    patch = commit(repo, {"lib.py": LIB.format(mode="first") + "# untouched behaviour\n"}, "p")
    done = run_cli(
        tmp_path, "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", IMAGE, "--property", MODE_TEST, "--replays", "2", "--no-record",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert header.split()[-3:] == ["lane", "code", "reasons"]
    words = row.split()
    assert words[words.index("block_patch") + 1 : words.index("block_patch") + 3] == [
        "uniform_failure",
        "fails_on_base_too;",
    ]
    assert row.endswith(
        f"every patch replay fails ({MODE_TEST}@tests/test_modes.py:9:AssertionError)"
    )


SKIP_LIB = "FAST = {fast}\nLEGACY = {legacy}\n\n\ndef double(x):\n    return x * 2\n"
SKIP_TESTS = """\
import os
import unittest

import pytest

import lib


@unittest.skipUnless(os.environ.get("BACKEND_URL"), "needs BACKEND_URL")
class BackendTests(unittest.TestCase):
    def test_backend(self):
        self.assertEqual(lib.double(2), 4)


class FastTests(unittest.TestCase):
    def test_fast_path(self):
        if not lib.FAST:
            self.skipTest("no fast path")
        self.assertEqual(lib.double(3), 6)

    def test_fast_limit(self):
        if not lib.FAST:
            self.skipTest("no fast path")
        self.assertEqual(lib.double(10**6), 0)


@pytest.mark.skipif(not lib.LEGACY, reason="legacy mode is gone")
def test_legacy():
    assert lib.double(1) == 2


def test_plain():
    assert lib.double(0) == 0
"""
OPTIONAL_TESTS = """\
import pytest

import lib

backend = pytest.importorskip("no_such_backend_module")


def test_backend_double():
    assert backend.double(lib.double(1)) == 4
"""
SKIPS = "tests/test_skips.py"
BACKEND = f"{SKIPS}::BackendTests::test_backend"
OPTIONAL = "tests/test_optional.py"


@pytest.fixture(scope="module")
def skipping(tmp_path_factory) -> tuple[Path, str, str]:
    repo = init(tmp_path_factory.mktemp("skips") / "repo")
    base = commit(
        repo,
        {
            "lib.py": SKIP_LIB.format(fast=False, legacy=True),
            SKIPS: SKIP_TESTS,
            OPTIONAL: OPTIONAL_TESTS,
        },
        "base",
    )
    patch = commit(repo, {"lib.py": SKIP_LIB.format(fast=True, legacy=False)}, "patch")
    return repo, base, patch


def test_skipped_tests_are_decided_shown_and_counted(tmp_path, skipping):
    repo, base, patch = skipping
    run_dir = tmp_path / "run"
    done = run_cli(
        tmp_path, "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", IMAGE, "--replays", "2", "--no-record", "--out", str(run_dir),
        "--junit", str(tmp_path / "junit.xml"), "--summary", str(tmp_path / "summary.md"),
        "--all",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # the fast path fails where base skipped it
    summary = json.loads((run_dir / "summary.json").read_text())
    decided = {
        record["property_id"]: (record["entry"]["lane"], record["entry"]["code"])
        for record in stored_records(run_dir)
    }
    assert decided == {
        BACKEND: ("no_freeze", "skipped"),
        f"{SKIPS}::FastTests::test_fast_path": ("no_freeze", "skipped_on_base"),
        f"{SKIPS}::FastTests::test_fast_limit": ("property_regression", "fails_where_base_skips"),
        f"{SKIPS}::test_legacy": ("no_freeze", "skipped_on_patch"),
        f"{SKIPS}::test_plain": ("no_freeze", "not_reproduced"),
        OPTIONAL: ("no_freeze", "skipped"),  # skips itself on import: a property of its own
    }
    assert summary["skipped"] == 3  # not run on the patch: backend, legacy, the module
    backend = evidence_of(run_dir, BACKEND)
    assert [r["label"] for r in backend["patch"]] == ["skipped"]  # screened once: no signal
    assert backend["patch"][0]["message"] == "needs BACKEND_URL"
    # The terminal table (--all): every test has its row, the reasons are there, the skips
    # counted.
    lines = done.stdout.splitlines()
    (row,) = [line for line in lines if line.startswith(BACKEND + " ")]
    assert row.split()[1:3] == ["skipped", "x1"]
    assert row.endswith("skipped on both sides: needs BACKEND_URL")
    assert "skipped 3 of 6: the project skips them on the patch" in lines
    # JUnit: a <skipped> element with its message, and the count.
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("skipped"), suite.get("failures")) == ("6", "3", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    skipped = cases["test_backend"].find("skipped")
    assert skipped is not None
    assert skipped.get("message") == (
        "no_freeze / skipped: skipped on both sides: needs BACKEND_URL"
    )
    assert cases["test_legacy"].find("skipped") is not None
    assert cases["test_fast_path"].find("skipped") is None  # it ran on the patch
    # Markdown: the skipped tests have a table of their own.
    markdown = (tmp_path / "summary.md").read_text()
    assert "3 properties skipped by the project on the patch" in markdown
    assert "| skipped | 3 (the project skips them on the patch) |" in markdown
    # HTML: a cell of its own for a skipped replay.
    shown = run_cli(tmp_path, "report", str(run_dir), "--html", str(tmp_path / "page.html"))
    assert shown.returncode == 0, shown.stderr
    page = (tmp_path / "page.html").read_text()
    assert 'class="c skip"' in page
    assert "skipped 3" in page


def test_changed_deciding_a_test_the_project_skips_is_no_usage_error(tmp_path, skipping):
    repo, base, _ = skipping
    # The patch changes what the env-gated test imports: --changed selects it.
    patch = commit(repo, {"lib.py": SKIP_LIB.format(fast=False, legacy=True) + "# edited\n"}, "p2")
    done = run_cli(
        tmp_path, "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", IMAGE, "--changed", "--replays", "2", "--no-record",
        "--out", str(tmp_path / "run"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    decided = {d["property_id"]: d["code"] for d in json.loads(done.stdout)["decisions"]}
    assert decided[BACKEND] == "skipped"
    # The module that skips itself on import is selected whole; its test is skipped too.
    assert decided[f"{OPTIONAL}::test_backend_double"] == "skipped"


def test_a_named_test_of_a_module_that_skips_itself_leaves_the_other_tests_running(
    tmp_path, skipping
):
    repo, base, patch = skipping
    done = run_cli(
        tmp_path, "replay", "--repo", str(repo), "--base", base, "--patch", patch,
        "--image", IMAGE, "--property", f"{OPTIONAL}::test_backend_double",
        "--property", f"{SKIPS}::test_plain", "--replays", "1", "--no-record",
        "--out", str(tmp_path / "run"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    decided = {d["property_id"]: d["code"] for d in json.loads(done.stdout)["decisions"]}
    assert decided == {
        f"{OPTIONAL}::test_backend_double": "skipped",
        f"{SKIPS}::test_plain": "not_reproduced",
    }
