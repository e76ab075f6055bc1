"""A fix to one function of a module whose other functions carry doctests
(``--doctest-modules``): each doctest's oracle is the docstring it runs, so the fix does not
reject them as changed oracles; a docstring the patch edits still does.

History: BASE (``half`` rounds down wrongly) --- FIX (``half`` fixed; ``double``'s doctest
untouched) --- EDIT (``double``'s example edited)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.scratch_git import commit, init

pytestmark = pytest.mark.docker

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
TOX = "[pytest]\naddopts = --doctest-modules\ntestpaths = pkg tests\n"
MOD = '''def double(x):
    """
    >>> double(2)
    4
    """
    return 2 * x


def half(x):
    return {body}
'''
TEST = "from pkg.mod import half\n\n\ndef test_half():\n    assert half(5) == 2.5\n"
DOCTEST = "pkg/mod.py::pkg.mod.double"


def replay(repo: Path, base: str, patch: str, out: Path) -> dict[str, dict]:
    done = subprocess.run(
        [str(CLI), "replay", "--repo", str(repo), "--base", base, "--patch", patch,
         "--image", "orchestrator-runner:latest", "--tests-from", "patch", "--replays", "2",
         "--no-record", "--json", "--out", str(out)],
        env={**os.environ, "CI": "1"}, cwd=out.parent, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.stdout, done.stderr
    return {d["property_id"]: d for d in json.loads(done.stdout)["decisions"]}


def test_a_doctest_is_judged_by_its_docstring_not_by_the_module_around_it(tmp_path):
    repo = init(tmp_path / "repo")
    files = {"tox.ini": TOX, "pkg/__init__.py": "", "tests/test_mod.py": TEST}
    base = commit(repo, {**files, "pkg/mod.py": MOD.format(body="x // 2")}, "base")
    fix = commit(repo, {"pkg/mod.py": MOD.format(body="x / 2")}, "fix")
    edited = MOD.format(body="x / 2").replace("double(2)\n    4", "double(3)\n    6")
    edit = commit(repo, {"pkg/mod.py": edited}, "edit")

    decided = replay(repo, base, fix, tmp_path / "fix")
    assert decided[DOCTEST]["lane"] == "no_freeze", decided[DOCTEST]
    assert decided["tests/test_mod.py::test_half"]["lane"] == "fix_candidate"

    decided = replay(repo, fix, edit, tmp_path / "edit")
    assert decided[DOCTEST]["lane"] == "reject_run", decided[DOCTEST]
    # The module is code under test, never laid over: the reason says so.
    assert decided[DOCTEST]["oracle_reasons"] == [
        "doctest pkg.mod.double: pkg/mod.py is code under test, which --tests-from never lays over"
    ]


# A text file's doctest that passes on both sides, after a test that fails on base only.
# Its expected exception is raised in helpers.py: formatting it reads helpers.py through
# linecache, unless the failing test's traceback had already put it there (on base); pdb's
# rc files and doctest.py are read too. None of those is the doctest's own call.
HELPERS = """def check(x):
    if x < 0:
        raise ValueError("negative")
    return x


def half(x):
    {body}
"""
USAGE = """Checking a value:

>>> from pkg.helpers import check
>>> check(1)
1
>>> check(-1)
Traceback (most recent call last):
...
ValueError: negative
"""
HALF_TEST = "from pkg.helpers import half\n\n\ndef test_half():\n    assert half(5) == 2.5\n"
USAGE_DOCTEST = "docs/usage.txt::usage.txt"


def test_a_doctest_after_a_test_failing_on_base_only_keeps_its_call_budget(tmp_path):
    repo = init(tmp_path / "repo")
    files = {
        "tox.ini": "[pytest]\naddopts = --doctest-glob=*.txt\ntestpaths = tests docs\n",
        "pkg/__init__.py": "",
        "docs/usage.txt": USAGE,
        "tests/test_half.py": HALF_TEST,
    }
    odd_fails = 'if x % 2:\n        raise ValueError("odd")\n    return x // 2'
    base = commit(repo, {**files, "pkg/helpers.py": HELPERS.format(body=odd_fails)}, "base")
    fix = commit(repo, {"pkg/helpers.py": HELPERS.format(body="return x / 2")}, "fix")

    decided = replay(repo, base, fix, tmp_path / "fix")
    assert decided["tests/test_half.py::test_half"]["lane"] == "fix_candidate"
    doctest = decided[USAGE_DOCTEST]
    assert {*doctest["base_labels"], *doctest["patch_labels"]} == {"assert_pass"}, doctest
    # Before, base {3} vs patch {4}: property_regression / call_budget for a clean fix.
    assert doctest["calls_base"]["open"] == doctest["calls_patch"]["open"] == [0], doctest
    assert (doctest["lane"], doctest["code"]) == ("no_freeze", "not_reproduced"), doctest
