"""What a replay neutralises, through the real driver and the real plugins of this venv
(pytest-cov, pytest-xdist, Hypothesis): the project's configuration still parses, the
replay sees each test's raw outcome in its own process, nothing is measured or written
in the tree, and the result says which plugins the session had. Plugins absent here
(pytest-rerunfailures, flaky, pytest-randomly, pytest-random-order) are absent on
purpose: their options, ini keys and markers in a project's configuration still parse.

A session that dies on the read-only tree before the probe's session begins (a plugin or
an initial conftest at its start, another plugin's configure) still has a result that
says so.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.core.neutralise import neutraliser_args
from tests.probe.test_probe_driver import (
    SPAWN_MODES,
    driver_command,
    driver_env,
    load,
    run_driver,
    write,
)

SEED = 5


def _run(
    project: Path,
    *args: str,
    replays: int = 1,
    spawn: str = "fork",
    fresh_dir: Path | None = None,
):
    """The driver, as a replay starts it: the command's own arguments, then the
    neutralisers (orchestrator/core/side_spec.py::pytest_arguments)."""
    out = project / "out"
    command = driver_command(
        out,
        "-p",
        "no:cacheprovider",
        *args,
        *neutraliser_args(SEED),
        replays=replays,
        spawn=spawn,
        seed=SEED,
    )
    if fresh_dir is not None:
        command[command.index("--") : 0] = ["--fresh-dir", str(fresh_dir)]
    completed = subprocess.run(
        command,
        cwd=project,
        env=driver_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    last = completed.stdout.splitlines()[-1] if completed.stdout else ""
    assert last == f"replay {replays}/{replays} completed", (completed.stdout, completed.stderr)
    return [load(out / f"replay-{k:03d}.json") for k in range(1, replays + 1)]


def _labels(run: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {
        entry["nodeid"].split("::")[-1]: (entry["label"], entry["reason"])
        for entry in run["result"]["tests"]
    }


COVERED = """
    import os

    import coverage
    import pytest

    import pkg


    def test_add():
        assert pkg.add(2, 3) == 5


    def test_nothing_measures():
        assert coverage.Coverage.current() is None


    def test_cov_fixture_is_there(cov):
        assert cov is None


    @pytest.mark.no_cover
    def test_no_cover_marker():
        assert pkg.add(1, 1) == 2
"""


def test_coverage_is_switched_off_and_writes_nothing(tmp_path):
    write(tmp_path, "pkg.py", "def add(a, b):\n    return a + b\n")
    write(tmp_path, "test_cov.py", COVERED)
    write(
        tmp_path,
        "pyproject.toml",
        """
        [tool.pytest.ini_options]
        addopts = "--cov=pkg --cov-report=term --cov-report=xml --cov-fail-under=100"
        filterwarnings = ["error"]
        markers = []
        """,
    )
    (run,) = _run(tmp_path, "--strict-markers")
    assert set(_labels(run).values()) == {("assert_pass", None)}
    assert run["exit_code"] == 0
    assert "cov" in run["result"]["neutralised"]
    assert sorted(path.name for path in tmp_path.glob("*coverage*")) == []


XDIST = """
    import os


    def test_in_the_replays_own_process(worker_id):
        assert worker_id == "master"
        assert "PYTEST_XDIST_WORKER" not in os.environ


    def test_second():
        assert os.environ["REPLAY_SEED"] == "5"
"""


@SPAWN_MODES
def test_xdist_runs_the_tests_in_the_replays_process(tmp_path, spawn):
    write(tmp_path, "test_x.py", XDIST)
    write(tmp_path, "pytest.ini", "[pytest]\naddopts = -n 2 --dist loadfile --maxprocesses 2\n")
    # The command's own -n comes before the neutralisers, as a replay hands it.
    (run,) = _run(tmp_path, "-n", "3", spawn=spawn)
    assert set(_labels(run).values()) == {("assert_pass", None)}
    assert "xdist" in run["result"]["neutralised"]


ABSENT = """
    import pytest

    ATTEMPTS = []


    @pytest.mark.flaky(reruns=3)
    def test_fails_on_its_first_attempt():
        ATTEMPTS.append(1)
        assert len(ATTEMPTS) > 1


    @pytest.mark.random_order(disabled=True)
    def test_plain():
        assert True
"""


def test_absent_plugins_options_ini_keys_and_markers_still_parse(tmp_path):
    write(tmp_path, "test_absent.py", ABSENT)
    write(
        tmp_path,
        "tox.ini",
        """
        [pytest]
        addopts = --reruns 3 --reruns-delay 1 --only-rerun AssertionError -p no:randomly
            --randomly-seed=1 --random-order --max-runs 3 --lf --ff --sw
            --strict-markers --strict-config
        reruns = 2
        only_rerun = AssertionError
        cache_dir = .cache/pytest
        filterwarnings = error
        """,
    )
    (run,) = _run(tmp_path)
    labels = _labels(run)
    # The raw outcome: a failure no plugin ran again.
    assert labels["test_fails_on_its_first_attempt"] == ("assert_fail", None)
    assert labels["test_plain"] == ("assert_pass", None)
    assert not (tmp_path / ".cache").exists()


def test_a_projects_own_option_of_the_same_name_wins(tmp_path):
    write(
        tmp_path,
        "conftest.py",
        """
        def pytest_addoption(parser):
            parser.addoption("--reruns", type=int, default=0)
        """,
    )
    write(
        tmp_path,
        "test_own.py",
        """
        def test_own_option(pytestconfig):
            assert pytestconfig.getoption("reruns") == 4
        """,
    )
    write(tmp_path, "pytest.ini", "[pytest]\naddopts = --reruns 4\n")
    (run,) = _run(tmp_path)
    assert _labels(run) == {"test_own_option": ("assert_pass", None)}


def test_each_replay_finds_the_fresh_folder_empty(tmp_path):
    database = tmp_path / "hypothesis"
    write(
        tmp_path,
        "test_db.py",
        f"""
        import pathlib

        FOLDER = pathlib.Path({str(database)!r})


        def test_starts_empty():
            assert list(FOLDER.iterdir()) == []
            (FOLDER / "examples").write_text("what another replay found")
        """,
    )
    runs = _run(tmp_path, replays=2, fresh_dir=database)
    assert [_labels(run)["test_starts_empty"] for run in runs] == [("assert_pass", None)] * 2


# ------------------------------------------------------------------ read-only, any moment

REFUSE = """
import errno
import os


def refuse(root, name):
    raise OSError(errno.EROFS, "Read-only file system", os.path.join(str(root), name))
"""

TESTS = """
    def test_a():
        assert True
"""


def _session(run: dict[str, Any]) -> dict[str, Any]:
    (session,) = [e for e in run["result"]["tests"] if e["nodeid"] == "<session>"]
    return session


@SPAWN_MODES
def test_a_plugin_refused_at_the_sessions_start_is_read_only(tmp_path, spawn):
    """pytest-cov erases .coverage in pytest_load_initial_conftests, before any conftest."""
    write(tmp_path, "test_a.py", TESTS)
    write(
        tmp_path,
        "eraser.py",
        REFUSE
        + """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config):
    refuse(early_config.rootpath, ".coverage")
""",
    )
    (run,) = _run(tmp_path, "-p", "eraser", spawn=spawn)
    session = _session(run)
    assert (session["label"], session["reason"]) == ("harness_error", "session_error")
    assert session["read_only"] == {"path": str(tmp_path / ".coverage"), "in_rootdir": True}
    assert "Read-only file system" in session["message"]
    assert [e["nodeid"] for e in run["result"]["tests"]] == ["<session>"]


def test_an_initial_conftest_refused_as_it_is_imported_is_read_only(tmp_path):
    write(tmp_path, "test_a.py", TESTS)
    write(tmp_path, "conftest.py", REFUSE + "\nrefuse(os.path.dirname(__file__), 'log.txt')\n")
    (run,) = _run(tmp_path)
    assert _session(run)["read_only"] == {"path": str(tmp_path / "log.txt"), "in_rootdir": True}


def test_a_configure_refused_is_read_only(tmp_path):
    write(tmp_path, "test_a.py", TESTS)
    write(
        tmp_path,
        "conftest.py",
        REFUSE + "\n\ndef pytest_configure(config):\n    refuse(config.rootpath, 'report.db')\n",
    )
    (run,) = _run(tmp_path)
    session = _session(run)
    assert session["reason"] == "session_error"
    assert session["read_only"]["path"] == str(tmp_path / "report.db")


def test_a_start_that_fails_otherwise_still_writes_no_result(tmp_path):
    """A conftest that does not import is pytest's usage error, told by its output."""
    write(tmp_path, "test_a.py", TESTS)
    write(tmp_path, "conftest.py", "import not_installed_anywhere\n")
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "-p", "no:cacheprovider", *neutraliser_args(SEED))
    assert completed.stdout.splitlines()[-1] == "replay 1/1 no_result"
    run = json.loads((out / "replay-001.json").read_text())
    assert run["exit_code"] == 4
    assert "not_installed_anywhere" in run["output_tail"]


def test_the_result_names_the_plugins_the_session_had(tmp_path):
    write(tmp_path, "test_a.py", TESTS)
    (run,) = _run(tmp_path)
    # This venv has pytest-cov, pytest-xdist and Hypothesis installed.
    assert run["result"]["neutralised"] == ["cov", "xdist", "hypothesis"]
