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
from replay_gitrepo import commit, init

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
