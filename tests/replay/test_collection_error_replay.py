"""A fix whose tests import what only the fix adds: under ``--tests-from patch`` that test
module does not import on base. pytest alone would stop base's whole session there; the
replay keeps running base's other modules (``--continue-on-collection-errors``), so
their tests are compared as usual; the module itself fails on base (the same test files
on both sides: base's code is why) and passes on the fix.

History: BASE (``lib.half``) --- FIX (adds ``lib.third`` and ``tests/test_third.py``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.scratch_git import commit, init

pytestmark = pytest.mark.docker

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
HALF = "def half(x):\n    return x / 2\n"
THIRD = "\n\ndef third(x):\n    return x / 3\n"
TEST_HALF = "import lib\n\n\ndef test_half():\n    assert lib.half(4) == 2\n"
TEST_THIRD = "from lib import third\n\n\ndef test_third():\n    assert third(9) == 3\n"


def replay(
    repo: Path, base: str, patch: str, *, tests_from: str, out: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), "replay", "--repo", str(repo), "--base", base, "--patch", patch,
         "--image", "orchestrator-runner:latest", "--tests-from", tests_from, "--replays", "2",
         "--no-record", "--json", "--out", str(out)],
        env={**os.environ, "CI": "1"}, cwd=out.parent, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip


def test_a_module_that_does_not_import_on_base_leaves_the_other_modules_compared(tmp_path):
    repo = init(tmp_path / "repo")
    base = commit(repo, {"lib.py": HALF, "tests/test_half.py": TEST_HALF}, "half")
    fix = commit(repo, {"lib.py": HALF + THIRD, "tests/test_third.py": TEST_THIRD}, "third")
    done = replay(repo, base, fix, tests_from="patch", out=tmp_path / "run")
    assert done.stdout, done.stderr
    decided = {d["property_id"]: d for d in json.loads(done.stdout)["decisions"]}
    half = decided["tests/test_half.py::test_half"]
    # Ran on base too, although another module of base's suite does not import.
    assert half["base_labels"], half
    assert set(half["base_labels"]) == {"assert_pass"}, half
    assert (half["lane"], half["code"]) == ("no_freeze", "not_reproduced")
    # The same test files on both sides: the module fails on base because of base's code,
    # as the test fails there (SWE-bench's reading), and passes on the fix.
    third = decided["tests/test_third.py::test_third"]
    assert set(third["base_labels"]) == {"assert_fail"}, third
    assert set(third["patch_labels"]) == {"assert_pass"}, third
    assert (third["lane"], third["code"]) == ("fix_candidate", "fix_candidate"), third
    module = decided["tests/test_third.py"]
    assert (module["lane"], module["code"]) == ("fix_candidate", "fix_candidate"), module
    assert done.returncode == 0, done.stderr


def test_a_patch_that_removes_what_a_test_imports_is_a_regression(tmp_path):
    repo = init(tmp_path / "repo")
    base = commit(
        repo,
        {
            "lib.py": HALF + THIRD,
            "tests/test_half.py": TEST_HALF,
            "tests/test_third.py": TEST_THIRD,
        },
        "half and third",
    )
    patch = commit(repo, {"lib.py": HALF}, "drops third")
    done = replay(repo, base, patch, tests_from="base", out=tmp_path / "run")
    assert done.stdout, done.stderr
    decided = {d["property_id"]: d for d in json.loads(done.stdout)["decisions"]}
    third = decided["tests/test_third.py::test_third"]
    assert set(third["base_labels"]) == {"assert_pass"}, third
    assert set(third["patch_labels"]) == {"assert_fail"}, third
    assert third["lane"] == "property_regression", third
    assert decided["tests/test_third.py"]["lane"] == "property_regression"
    assert decided["tests/test_half.py::test_half"]["lane"] == "no_freeze"
    assert done.returncode == 1, done.stderr
