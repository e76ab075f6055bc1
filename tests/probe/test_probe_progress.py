"""The probe's per-test progress lines: written below pytest's capture, one per finished
test, counted against the whole replay's selection; and the driver's stream of them."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import INNER_OPTIONS
from test_probe_driver import driver_command, driver_env

from orchestrator.core.progress import parse_replay_line, parse_test_line
from orchestrator.probe import plugin
from orchestrator.probe.plugin import PROGRESS_FD_ENV, progress_fd

SUITE = """
import pytest


def test_passes():
    print("test 99/99 failed")  # pytest captures it: no progress line


def test_fails():
    assert False


@pytest.fixture
def broken():
    raise RuntimeError("setup")


def test_errors(broken):
    pass


def test_skips():
    pytest.skip("not here")


@pytest.mark.xfail(reason="known")
def test_xfails():
    assert False
"""


def _run_with_progress(pytester: pytest.Pytester, monkeypatch, *args: str) -> list[str]:
    """Run the probe in-process with $REPLAY_PROGRESS_FD on a file; the lines written there."""
    target = pytester.path / "progress.txt"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        monkeypatch.setenv(PROGRESS_FD_ENV, str(fd))
        monkeypatch.delenv("REPLAY_RESULT", raising=False)
        pytester.runpytest_inprocess(*INNER_OPTIONS, *args)
    finally:
        os.close(fd)
    return target.read_text(encoding="ascii").splitlines()


def test_with_no_interval_each_finished_test_writes_one_line_with_its_outcome(
    pytester, monkeypatch
):
    monkeypatch.setattr(plugin, "PROGRESS_EVERY_S", 0.0)
    pytester.makepyfile(test_suite=SUITE)
    lines = _run_with_progress(pytester, monkeypatch, "-s")  # even with capture off
    assert lines == [
        "test 1/5 passed",
        "test 2/5 failed",
        "test 3/5 error",
        "test 4/5 skipped",
        "test 5/5 skipped",
    ]
    assert all(parse_test_line(line) is not None for line in lines)


def test_lines_wait_for_the_interval_but_for_the_first_a_failing_and_the_last_test(
    pytester, monkeypatch
):
    """A line per test was a write through the engine's log stream per test: the tests
    between two lines are counted on the next one (``+n``)."""
    monkeypatch.setattr(plugin, "PROGRESS_EVERY_S", 3600.0)
    pytester.makepyfile(
        test_suite=SUITE,
        test_more="def test_1():\n    pass\n\ndef test_2():\n    pass\n",
    )
    lines = _run_with_progress(pytester, monkeypatch)
    assert lines == [
        "test 1/7 passed",  # the first at once
        "test 4/7 failed +3",  # a failing test at once, with the passes before it
        "test 5/7 error",
        "test 7/7 skipped +2",  # the selection's last
    ]
    parsed = [parse_test_line(line) for line in lines]
    assert None not in parsed
    assert sum(test.count for test in parsed) == 7
    assert [test.outcome for test in parsed if test.failing] == ["failed", "error"]


def test_a_worker_flushes_the_tests_since_its_last_line_when_its_session_ends(
    pytester, monkeypatch
):
    monkeypatch.setattr(plugin, "PROGRESS_EVERY_S", 3600.0)
    pytester.makepyfile(test_one="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    monkeypatch.setenv("REPLAY_WORKER", "1/2")
    monkeypatch.delenv("REPLAY_SPLIT", raising=False)
    monkeypatch.delenv("REPLAY_DURATIONS", raising=False)
    pytester.makepyfile(test_two="def test_c():\n    pass\n\ndef test_d():\n    pass\n")
    lines = _run_with_progress(pytester, monkeypatch)
    parsed = [parse_test_line(line) for line in lines]
    assert None not in parsed
    assert sum(test.count for test in parsed) == 2  # its share: one module of the four tests
    assert parsed[-1].done == 2
    assert parsed[-1].total == 4


def test_the_total_is_the_selection_after_deselection(pytester, monkeypatch):
    pytester.makepyfile(test_suite=SUITE)
    lines = _run_with_progress(pytester, monkeypatch, "-k", "passes or (fails and not xfails)")
    assert lines == ["test 1/2 passed", "test 2/2 failed"]


def test_a_worker_counts_against_the_whole_replays_selection(pytester, monkeypatch):
    pytester.makepyfile(
        test_one="def test_a():\n    pass\n\ndef test_b():\n    pass\n",
        test_two="def test_c():\n    pass\n",
    )
    monkeypatch.setenv("REPLAY_WORKER", "1/2")
    monkeypatch.delenv("REPLAY_SPLIT", raising=False)
    monkeypatch.delenv("REPLAY_DURATIONS", raising=False)
    monkeypatch.setattr(plugin, "PROGRESS_EVERY_S", 0.0)
    lines = _run_with_progress(pytester, monkeypatch)
    # Its share is one module; every worker announces the replay's three tests.
    assert lines in (["test 1/3 passed", "test 2/3 passed"], ["test 1/3 passed"])


def test_without_the_variable_or_with_a_closed_descriptor_nothing_breaks(
    pytester, monkeypatch, probe_run
):
    pytester.makepyfile(test_suite=SUITE)
    monkeypatch.delenv(PROGRESS_FD_ENV, raising=False)
    assert len(probe_run()["tests"]) == 3  # skips are listed apart
    fd = os.open(os.devnull, os.O_WRONLY)
    os.close(fd)  # a number that names nothing now
    monkeypatch.setenv(PROGRESS_FD_ENV, str(fd))
    assert len(probe_run()["tests"]) == 3


@pytest.mark.parametrize(
    ("raw", "expected"), [("7", 7), ("", None), ("1", None), ("2", None), ("x", None), ("-4", None)]
)
def test_only_a_descriptor_above_the_standard_three_is_used(raw, expected):
    assert progress_fd({PROGRESS_FD_ENV: raw}) == expected


# ---------------------------------------------------------------- through the driver

MODULE = """
def test_a():
    pass


def test_b():
    assert False
"""


@pytest.mark.parametrize(("spawn", "workers"), [("fork", 1), ("exec", 1), ("fork", 2)])
def test_the_driver_streams_each_replays_tests_before_its_replay_line(
    tmp_path: Path, spawn: str, workers: int
):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("test_m1.py", "test_m2.py"):
        (project / name).write_text(textwrap.dedent(MODULE))
    command = driver_command(tmp_path / "out", "-q", replays=2, spawn=spawn)
    split = command.index("--")
    command[split:split] = ["--workers", str(workers)]
    done = subprocess.run(
        command,
        cwd=project,
        env=driver_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("result ")]
    replays = [index for index, line in enumerate(lines) if parse_replay_line(line)]
    assert len(replays) == 2
    for start, end in ((0, replays[0]), (replays[0] + 1, replays[1])):
        tests = [parse_test_line(line) for line in lines[start:end]]
        assert None not in tests, lines
        assert sum(test.count for test in tests if test) == 4, lines
        assert {test.total for test in tests if test} == {4}
        assert [test.outcome for test in tests if test and test.failing] == ["failed"] * 2
