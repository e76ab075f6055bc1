"""A unittest-style suite end to end: failures located at their line, skips as a state.

Scratch repositories, the real engine, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from replay_gitrepo import commit, init

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
    summary = json.loads((run_dir / "summary.json").read_text())
    (entry,) = [d for d in summary["decisions"] if d["property_id"] == property_id]
    evidence: dict[str, Any] = json.loads((run_dir / entry["evidence_file"]).read_text())
    return evidence


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
