"""Real pull requests as they come, end to end: a scratch repository whose commits add,
edit and remove tests the way pull requests do, replayed on the real engine and runner image.

History (``lib.head`` returns None for an empty list until BUG, FIX restores it and adds
its regression test above ``test_head``)::

    GOOD --- BUG --- FIX
      \\--- HELPER (a helper one test uses)   \\--- CONFTEST (a fixture)
      \\--- REMOVE (a test removed, a class renamed, a test module deleted)
      \\--- DOCS (no Python)
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
HINT = "new on patch: replay with --tests-from patch to ask whether it fails on base"

LIB = """\
def head(xs):
    return xs[0] if xs else None


def double(x):
    return 2 * x
"""
CONFTEST = """\
import pytest


@pytest.fixture
def numbers():
    return [1, 2, 3]
"""
TESTS = """\
import lib


def make_pair():
    return (1, 2)


def test_head(numbers):
    assert lib.head(numbers) == 1


def test_double():
    assert lib.double(2) == 4


def test_pair():
    assert make_pair() == (1, 2)


class TestOld:
    def test_x(self):
        assert lib.double(0) == 0
"""
REGRESSION = """\
def test_head_of_empty_is_none():
    assert lib.head([]) is None


"""
OTHER = "import lib\n\n\ndef test_other():\n    assert lib.double(1) == 2\n"

T = "tests/test_lib.py::"
NEW = T + "test_head_of_empty_is_none"
HEAD, DOUBLE, PAIR = T + "test_head", T + "test_double", T + "test_pair"
OLD_X, NEW_X = T + "TestOld::test_x", T + "TestNew::test_x"


@dataclass(frozen=True)
class History:
    path: Path
    good: str
    bug: str
    fix: str
    helper: str
    conftest: str
    remove: str
    docs: str


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> History:
    path = init(tmp_path_factory.mktemp("pull-requests") / "repo")
    files = {"lib.py": LIB, "tests/conftest.py": CONFTEST, "tests/test_lib.py": TESTS,
             "tests/test_other.py": OTHER, "README.md": "lib\n"}  # fmt: skip
    good = commit(path, files, "good")
    buggy = LIB.replace("return xs[0] if xs else None", "return xs[0]")
    bug = commit(path, {"lib.py": buggy}, "head: index directly (the bug)")
    with_test = TESTS.replace("def test_head(", REGRESSION + "def test_head(")
    fix = commit(path, {"lib.py": LIB, "tests/test_lib.py": with_test}, "fix head, with its test")
    git(path, "checkout", "-q", good)
    helper = commit(
        path, {"tests/test_lib.py": TESTS.replace("return (1, 2)", "return tuple([1, 2])")}, "h"
    )
    git(path, "checkout", "-q", good)
    conftest = commit(path, {"tests/conftest.py": CONFTEST.replace("[1, 2, 3]", "[1, 2]")}, "c")
    git(path, "checkout", "-q", good)
    removed = TESTS.replace("def test_pair():\n    assert make_pair() == (1, 2)\n\n\n", "").replace(
        "class TestOld:", "class TestNew:"
    )
    remove = commit(
        path, {"tests/test_lib.py": removed}, "remove, rename", remove=("tests/test_other.py",)
    )
    git(path, "checkout", "-q", good)
    docs = commit(path, {"README.md": "lib, documented\n"}, "docs")
    return History(path, good, bug, fix, helper, conftest, remove, docs)


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str
    scratch: Path

    @property
    def report(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def run_cli(tmp_path: Path, command: str, *args: str) -> Result:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    done = subprocess.run(
        [str(CLI), command, *args],
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1"},
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return Result(code=done.returncode, stdout=done.stdout, stderr=done.stderr, scratch=scratch)


def replay(tmp_path: Path, history: History, base: str, patch: str, *args: str) -> Result:
    return run_cli(
        tmp_path, "replay", "--repo", str(history.path), "--base", base, "--patch", patch,
        "--image", IMAGE, "--replays", "2", "--no-record", *args,
    )  # fmt: skip


def lanes(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {e["property_id"]: (e["lane"], e["code"]) for e in report["decisions"]}


def entry(report: dict[str, Any], property_id: str) -> dict[str, Any]:
    (found,) = [e for e in report["decisions"] if e["property_id"] == property_id]
    return found


def test_a_fixs_new_test_asks_for_tests_from_and_with_it_is_a_fix_candidate(tmp_path, history):
    props = ("--property", NEW, "--property", HEAD, "--property", DOUBLE)
    own = replay(tmp_path, history, history.bug, history.fix, *props, "--json")
    assert own.code == 1, own.stderr
    report = own.report
    assert lanes(report) == {
        NEW: ("reject_run", "oracle_changed"),
        HEAD: ("no_freeze", "not_reproduced"),  # the file changed, its oracle did not
        DOUBLE: ("no_freeze", "not_reproduced"),
    }
    assert entry(report, NEW)["reasons"] == [HINT]
    assert entry(report, NEW)["base_reasons"] == ["not_found"] * 2
    assert not entry(report, HEAD)["oracle_changed"]
    assert report["run_log"]["tests_from"] is None

    out = tmp_path / "judged"
    judged = replay(
        tmp_path, history, history.bug, history.fix, *props, "--tests-from", "patch",
        "--out", str(out), "--json",
    )  # fmt: skip
    assert judged.code == 0, judged.stderr
    report = judged.report
    assert lanes(report) == {
        NEW: ("fix_candidate", "fix_candidate"),
        HEAD: ("no_freeze", "not_reproduced"),
        DOUBLE: ("no_freeze", "not_reproduced"),
    }
    assert entry(report, NEW)["base_labels"] == ["assert_fail"] * 2
    # Where the oracle came from: the run log (pinned SHA, every file with its blob),
    # each evidence and each decision.
    log = json.loads((out / "run-log.json").read_text())
    assert (log["tests_from"], log["tests_from_ref"]) == (history.fix, "patch")
    overlaid = {item["path"]: item["blob"] for item in log["overlaid_files"]}
    assert overlaid == {
        path: git(history.path, "rev-parse", f"{history.fix}:{path}")
        for path in ("tests/conftest.py", "tests/test_lib.py", "tests/test_other.py")
    }
    assert log["overlay_removed"] == {"base": [], "patch": []}
    for record in stored_records(out):
        evidence, decision = record["evidence"], record["decision"]
        assert evidence["tests_from"] == decision["tests_from"] == history.fix
        assert evidence["base_oracle_digest"] == evidence["patch_oracle_digest"]
    assert entry(report, NEW)["tests_from"] == history.fix

    table = replay(tmp_path, history, history.bug, history.fix, "--property", NEW,
                   "--property", HEAD, "--replays", "1")  # fmt: skip
    assert table.code == 1, table.stderr
    assert f"oracle changed: {NEW}: {HINT}" in table.stdout.splitlines()

    table = replay(tmp_path, history, history.bug, history.fix, "--property", NEW,
                   "--tests-from", "patch", "--replays", "1")  # fmt: skip
    assert table.code == 0, table.stderr
    first = table.stdout.splitlines()[0]
    assert first.startswith(f"tests from patch ({history.fix[:12]}): the oracle on both sides")
    assert list(table.scratch.iterdir()) == []


def test_a_later_fixs_test_on_the_commit_that_introduced_the_bug_is_a_regression(tmp_path, history):
    result = replay(
        tmp_path, history, history.good, history.bug, "--property", NEW, "--property", HEAD,
        "--tests-from", history.fix[:10], "--json",
    )  # fmt: skip
    assert result.code == 1, result.stderr
    assert lanes(result.report) == {
        NEW: ("property_regression", "assertion_regression"),
        HEAD: ("no_freeze", "not_reproduced"),
    }
    assert result.report["run_log"]["tests_from"] == history.fix


def test_a_helper_one_test_uses_and_a_conftest_fixture(tmp_path, history):
    helper = replay(tmp_path, history, history.good, history.helper,
                    "--property", PAIR, "--property", HEAD, "--json")  # fmt: skip
    assert helper.code == 1, helper.stderr
    assert lanes(helper.report) == {
        PAIR: ("reject_run", "oracle_changed"),
        HEAD: ("no_freeze", "not_reproduced"),
    }
    assert entry(helper.report, PAIR)["reasons"] == ["helper make_pair"]

    fixture = replay(tmp_path, history, history.good, history.conftest,
                     "--property", HEAD, "--property", DOUBLE, "--json")  # fmt: skip
    assert fixture.code == 1, fixture.stderr
    for property_id in (HEAD, DOUBLE):
        assert entry(fixture.report, property_id)["reasons"] == ["conftest.py tests/conftest.py"]
    # Judged by the patch's conftest on both sides, both are compared again.
    judged = replay(tmp_path, history, history.good, history.conftest, "--property", HEAD,
                    "--tests-from", "patch", "--json")  # fmt: skip
    assert judged.code == 0, judged.stderr
    assert lanes(judged.report) == {HEAD: ("no_freeze", "not_reproduced")}


def test_a_removed_test_a_renamed_class_and_a_deleted_module(tmp_path, history):
    own = replay(tmp_path, history, history.good, history.remove, "--command",
                 "pytest -q tests/", "--json")  # fmt: skip
    assert own.code == 1, own.stderr
    found = lanes(own.report)
    assert found[PAIR] == found[OLD_X] == found[NEW_X] == ("reject_run", "oracle_changed")
    assert entry(own.report, PAIR)["reasons"] == ["gone on patch"]
    assert entry(own.report, NEW_X)["reasons"] == [HINT]
    assert found[HEAD] == ("no_freeze", "not_reproduced")

    # The base's tests on both sides: did the patch keep the old contract? The removed
    # test, the old class and the deleted module all come back on the patch's tree.
    out = tmp_path / "old-contract"
    back = replay(
        tmp_path, history, history.good, history.remove, "--command", "pytest -q tests/",
        "--tests-from", "base", "--out", str(out), "--json",
    )  # fmt: skip
    assert back.code == 0, back.stderr
    found = lanes(back.report)
    assert set(found) == {HEAD, DOUBLE, PAIR, OLD_X, "tests/test_other.py::test_other"}
    assert set(found.values()) == {("no_freeze", "not_reproduced")}
    removed = json.loads((out / "run-log.json").read_text())["overlay_removed"]
    assert removed == {"base": [], "patch": []}  # nothing the base lacks
    # The patch's tests on both: the deleted module is gone from the base's tree too.
    ahead = replay(tmp_path, history, history.good, history.remove, "--command",
                   "pytest -q tests/", "--tests-from", "patch", "--json")  # fmt: skip
    assert ahead.code == 0, ahead.stderr
    assert set(lanes(ahead.report)) == {HEAD, DOUBLE, NEW_X}
    gone = ahead.report["run_log"]["overlay_removed"]["base"]
    assert [item["path"] for item in gone] == ["tests/test_other.py"]


def test_changed_selects_what_the_patch_touched(tmp_path, history):
    helper = replay(tmp_path, history, history.good, history.helper, "--changed",
                    "--command", "pytest -q tests/")  # fmt: skip
    assert helper.code == 1, helper.stderr
    lines = helper.stdout.splitlines()
    assert lines[0] == (
        "changed: selected 1 of 5 tests found in 2 test modules"
        " (1 by their oracle, 0 by an import of a changed module)"
    )
    assert [line.split()[0] for line in lines[2:-2]] == [PAIR]
    assert lines[-2] == f"oracle changed: {PAIR}: helper make_pair"

    fix = replay(tmp_path, history, history.bug, history.fix, "--changed", "--json")
    assert fix.code == 1, fix.stderr
    selection = fix.report["run_log"]["selection"]
    assert selection["changed_modules"] == ["lib.py", "tests/test_lib.py"]
    assert selection["importing_changed"] == ["tests/test_lib.py", "tests/test_other.py"]
    assert (selection["candidates"], selection["test_modules"]) == (6, 2)
    assert len(selection["selected"]) == 6  # lib.py changed: both modules import it
    assert lanes(fix.report)[NEW] == ("reject_run", "oracle_changed")
    assert fix.report["run_log"]["targets"]["base"] == [
        "tests/test_lib.py", "tests/test_other.py"]  # fmt: skip

    docs = replay(tmp_path, history, history.good, history.docs, "--changed", "--json")
    assert docs.code == 0, docs.stderr
    assert docs.report["decisions"] == []
    assert docs.report["run_log"]["selection"]["selected"] == []
    quiet = replay(tmp_path, history, history.good, history.docs, "--changed")
    assert quiet.code == 0, quiet.stderr
    assert quiet.stdout.splitlines()[0].startswith("changed: selected 0 of 5 tests")


def test_bad_tests_from_input_is_one_line_before_anything_runs(tmp_path, history):
    for args, problem in (
        (("--tests-from", "no-such-rev", "--property", HEAD), "not a revision of"),
        (("--tests-from", "patch", "--test-path", "nowhere", "--property", HEAD), "nowhere"),
        (("--tests-from", history.good, "--property", NEW), f"has no test {NEW}"),
    ):
        result = replay(tmp_path, history, history.bug, history.fix, *args)
        assert result.code == 2, (args, result.stderr)
        (line,) = result.stderr.splitlines()
        assert line.startswith("orchestrator: error: ")
        assert problem in line
        assert result.stdout == ""
    # No run folder: the run log, written before any container starts, never was.
    assert not (tmp_path / ".replay").exists()
    assert list((tmp_path / "scratch").iterdir()) == []


def test_accept_a_pull_requests_new_test_with_the_base_as_its_mutant(tmp_path, history):
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    common = ("--repo", str(history.path), "--property", NEW, "--ledger", ledger,
              "--replays", "2", "--json")  # fmt: skip
    refused = run_cli(tmp_path, "accept", *common, "--rev", history.fix, "--mutant", history.bug)
    assert refused.code == 2
    assert "changes the property's own file tests/test_lib.py" in refused.stderr

    accepted = run_cli(tmp_path, "accept", *common, "--rev", history.fix, "--mutant",
                       history.bug, "--tests-from", history.fix)  # fmt: skip
    assert accepted.code == 0, accepted.stderr
    doc = json.loads(accepted.stdout)
    assert doc["outcome"] == "accepted"
    assert [r["label"] for r in doc["replays"]["unmutated"]] == ["assert_pass"] * 2
    assert [r["label"] for r in doc["replays"]["mutant"]] == ["assert_fail"] * 2
    assert doc["tests_from"] == history.fix
    assert {item["path"] for item in doc["overlay"]["overlaid_files"]} >= {"tests/test_lib.py"}

    # On a revision where the code already had the bug, the new test is no mutant killer:
    # it fails unmutated.
    failing = run_cli(tmp_path, "accept", *common, "--rev", history.bug, "--mutant",
                      history.good, "--tests-from", history.fix)  # fmt: skip
    assert failing.code == 1, failing.stderr
    assert json.loads(failing.stdout)["outcome"] == "fails_unmutated"


# A suite parametrized over the code's own registry (as pycodestyle's self-doctests are
# over its docstrings): the code under test, not the tests, makes the ids.
REGISTRY = """\
CODECS = {"upper": str.upper, "lower": str.lower}
"""
REGISTRY_TEST = """\
import pytest

import codecs_lib


@pytest.mark.parametrize("name", sorted(codecs_lib.CODECS))
def test_codec_is_idempotent(name):
    codec = codecs_lib.CODECS[name]
    assert codec(codec("aB")) == codec("aB")
"""


def test_a_test_the_code_makes_on_the_patch_only_is_judged_on_the_patch(tmp_path):
    """Row 2a: the patch registers a codec, so the same test file has one test more on
    the patch: it passes there and the pull request exits 0; a codec that breaks the
    property blocks."""
    path = init(tmp_path / "registry")
    base = commit(path, {"codecs_lib.py": REGISTRY, "tests/test_codecs.py": REGISTRY_TEST}, "b")
    good = commit(
        path,
        {"codecs_lib.py": REGISTRY.replace("}", ', "title": str.title}')},
        "register title",
    )
    git(path, "checkout", "-q", base)
    bad = commit(
        path,
        {"codecs_lib.py": REGISTRY.replace("}", ', "swap": str.swapcase}')},
        "register swapcase",
    )
    cases = (
        (good, 0, ("no_freeze", "only_on_patch")),
        (bad, 1, ("property_regression", "fails_only_on_patch")),
    )
    for patch, code, lane in cases:
        done = run_cli(
            tmp_path, "replay", "--repo", str(path), "--base", base, "--patch", patch,
            "--image", IMAGE, "--replays", "2", "--no-record", "--tests-from", "patch",
            "--json",
        )  # fmt: skip
        assert done.code == code, done.stderr[-3000:]
        decided = lanes(done.report)
        new = [p for p in decided if p.endswith(("[title]", "[swap]"))]
        assert len(new) == 1, decided
        assert decided[new[0]] == lane
        assert decided["tests/test_codecs.py::test_codec_is_idempotent[upper]"] == (
            "no_freeze",
            "not_reproduced",
        )
