"""A pytest session that fails around its tests (a plugin's INTERNALERROR, a session-end
hook that raises) is no verdict: the result says so with a ``<session>`` harness entry
(``session_error``), beside the tests' own labels, instead of hiding it behind them.

Plain pytest prints the traceback and exits non-zero (3, or the crash's status); before,
the replay kept only the tests' labels and the run ended green.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.probe.test_probe_driver import SPAWN_MODES, load, run_driver, write

TESTS = """
def test_ok():
    assert True

def test_bad():
    assert 1 == 2
"""


def _entries(project: Path) -> dict[str, dict[str, Any]]:
    out = project / "out"
    completed = run_driver(project, out, "test_it.py")
    assert completed.stdout.splitlines()[-1] == "replay 1/1 completed", completed.stderr
    return {entry["nodeid"]: entry for entry in load(out / "replay-001.json")["result"]["tests"]}


@SPAWN_MODES
def test_a_session_end_hook_that_raises_is_a_session_error_beside_the_labels(tmp_path, spawn):
    write(tmp_path, "test_it.py", TESTS)
    write(
        tmp_path,
        "conftest.py",
        """
        def pytest_sessionfinish(session):
            raise RuntimeError("the report server is gone")
        """,
    )
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "test_it.py", spawn=spawn)
    assert completed.stdout.splitlines()[-1] == "replay 1/1 completed", completed.stderr
    run = load(out / "replay-001.json")
    assert run["exit_code"] != 0  # the session crashed, as plain pytest's does
    entries = {entry["nodeid"]: entry for entry in run["result"]["tests"]}
    assert entries["test_it.py::test_ok"]["label"] == "assert_pass"
    assert entries["test_it.py::test_bad"]["label"] == "assert_fail"
    session = entries["<session>"]
    assert (session["label"], session["reason"]) == ("harness_error", "session_error")
    assert session["message"] == (
        "the pytest session failed: RuntimeError: the report server is gone"
    )
    assert "read_only" not in session


def test_an_internal_error_after_the_tests_is_a_session_error(tmp_path):
    write(tmp_path, "test_it.py", TESTS)
    write(
        tmp_path,
        "conftest.py",
        """
        import pytest

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtestloop(session):
            yield
            raise RuntimeError("coverage data could not be saved")
        """,
    )
    entries = _entries(tmp_path)
    assert entries["test_it.py::test_bad"]["label"] == "assert_fail"
    assert entries["<session>"]["reason"] == "session_error"
    assert "coverage data could not be saved" in entries["<session>"]["message"]


def test_a_session_end_refused_by_a_read_only_tree_carries_the_fact(tmp_path):
    write(tmp_path, "test_it.py", TESTS)
    write(
        tmp_path,
        "conftest.py",
        """
        import errno
        import os

        def pytest_sessionfinish(session):
            path = os.path.join(str(session.config.rootpath), ".coverage")
            raise OSError(errno.EROFS, "Read-only file system", path)
        """,
    )
    session = _entries(tmp_path)["<session>"]
    assert session["reason"] == "session_error"
    assert session["read_only"] == {"path": str(tmp_path / ".coverage"), "in_rootdir": True}


@pytest.mark.parametrize("returncode", [None, 0, 3])
def test_pytest_exit_at_the_session_end_is_the_projects_own_choice(tmp_path, returncode):
    write(tmp_path, "test_it.py", TESTS)
    write(
        tmp_path,
        "conftest.py",
        f"""
        import pytest

        def pytest_sessionfinish(session):
            pytest.exit("done here", returncode={returncode!r})
        """,
    )
    entries = _entries(tmp_path)
    assert "<session>" not in entries
    assert entries["test_it.py::test_bad"]["label"] == "assert_fail"
