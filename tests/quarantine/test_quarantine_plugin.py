"""The quarantine plugin in a real pytest session (pytester): `pytest -p orchestrator.quarantine
--quarantine SOURCE` on a small suite, in one process and under pytest-xdist, beside other
plugins, with the JUnit file read back as a test-results viewer reads it."""

from __future__ import annotations

import os

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped
from quarantine_docs import EARLIER, flake_entry, timing_entry, write_export

PLUGIN = ("-p", "orchestrator.quarantine")
# The plugin is imported by this process already: the inner session cannot rewrite it.
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-W",
         "ignore::pytest.PytestAssertRewriteWarning")  # fmt: skip

SUITE = """\
def test_flaky():
    assert 1 == 2, "fails on every second run"


def test_fine():
    pass


def test_slow_service():
    raise TimeoutError("the service did not answer within 400 ms")


def test_latency_contract():
    assert 3 == 4, "wrong answer"
"""
FLAKY = "test_suite.py::test_flaky"
FINE = "test_suite.py::test_fine"
SLOW = "test_suite.py::test_slow_service"
CONTRACT = "test_suite.py::test_latency_contract"


@pytest.fixture(autouse=True)
def no_source_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORCHESTRATOR_QUARANTINE", raising=False)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*PLUGIN, *QUIET, *args)


def summary(result: pytest.RunResult) -> list[str]:
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "quarantine summary" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("quarantine: "))
    return lines[start + 1 : end + 1]


def test_a_failure_a_live_freeze_covers_does_not_fail_the_session(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    source = write_export(pytester.path / "freezes.json", flake_entry(12, FLAKY))
    without = run(pytester, "-k", "flaky or fine")
    assert without.ret == pytest.ExitCode.TESTS_FAILED  # the flaky test fails as such
    result = run(pytester, "--quarantine", str(source), "-k", "flaky or fine")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert result.parseoutcomes() == {"passed": 1, "quarantined": 1, "deselected": 2}
    result.stdout.fnmatch_lines([
        "quarantine: 1 live freezes (1 flake, 0 timing), 0 expired, from *freezes.json"
        " (freeze-export/1) at *",
        "test_suite.py Q.*",
        "*= QUARANTINED FAILURES =*",
        "*_ test_suite.py::test_flaky _*",
        "E       AssertionError: fails on every second run",
    ])  # fmt: skip
    expires = flake_entry(12, FLAKY)["record"]["expires_at"][:19]
    lines = summary(result)
    assert lines[0].startswith(
        f"QUARANTINED {FLAKY} - quarantined by flake freeze 12 (owner team-a, expires"
        f" {expires}+00:00, 2d 23h"
    )
    assert lines[1:] == [
        "    frozen: flaky on both sides (base 5/10, patch 5/10 replays failed) at"
        f" {FLAKY}@test_suite.py:3:AssertionError",
        "    failed: test_suite.py:2: AssertionError: fails on every second run",
        "quarantine: 1 quarantined, 0 not covered, 0 expired, 0 thaw candidates",
    ]


def test_a_different_failure_under_a_flake_freeze_is_quarantined_and_flagged(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_other="def test_flaky():\n    {}['missing']\n")
    source = write_export(pytester.path / "f.json", flake_entry(12, "test_other.py::test_flaky"))
    result = run(pytester, "--quarantine", str(source))
    assert result.ret == pytest.ExitCode.OK
    assert summary(result)[0].endswith(
        "left); it raised KeyError, not the AssertionError it was frozen for"
    )


def test_a_pass_under_a_live_freeze_is_listed_as_a_thaw_candidate(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    source = write_export(pytester.path / "freezes.json", flake_entry(3, FINE, owner="team-b"))
    result = run(pytester, "--quarantine", str(source), "-k", "fine")
    assert result.ret == pytest.ExitCode.OK
    (line, counts) = summary(result)
    assert line.startswith(f"THAW CANDIDATE {FINE} - passed under flake freeze 3 (owner team-b")
    assert line.endswith("a thaw candidate")
    assert counts == "quarantine: 0 quarantined, 0 not covered, 0 expired, 1 thaw candidate"


def test_an_expired_freeze_does_not_apply_and_the_failure_says_so(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    source = write_export(pytester.path / "freezes.json", flake_entry(4, FLAKY, expires_at=EARLIER))
    result = run(pytester, "--quarantine", str(source), "-k", "flaky", "--junitxml=out.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes() == {"failed": 1, "deselected": 3}
    result.stdout.fnmatch_lines([
        "*- quarantine -*",
        "flake freeze 4 expired at * (owner team-a): it no longer quarantines this test",
    ])  # fmt: skip
    assert summary(result)[0].startswith(f"EXPIRED {FLAKY} - flake freeze 4 expired at")
    (case,) = [
        case for suite in JUnitXml.fromfile(str(pytester.path / "out.xml")) for case in suite
    ]
    (failure,) = case.result
    assert isinstance(failure, Failure)
    assert "flake freeze 4 expired at" in (failure.text or "")


def test_a_timing_freeze_covers_its_timing_check_never_an_assertion(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    source = write_export(
        pytester.path / "freezes.json", timing_entry(5, SLOW), timing_entry(6, CONTRACT)
    )
    result = run(pytester, "--quarantine", str(source), "-k", "slow or contract")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes() == {"failed": 1, "quarantined": 1, "deselected": 2}
    result.stdout.fnmatch_lines([
        f"FAILED {CONTRACT} - AssertionError: wrong answer",
    ])  # fmt: skip
    lines = summary(result)
    assert lines[0].startswith(f"QUARANTINED {SLOW} - quarantined by timing freeze 5")
    assert lines[1] == "    frozen: timing debt: 5 samples spread 300 ms over a budget of 400 ms"
    assert lines[2] == (
        "    failed: test_suite.py:10: TimeoutError: the service did not answer within 400 ms"
    )
    assert lines[3].startswith("    took ")
    assert lines[3].endswith(" ms (budget 400 ms)")
    assert lines[4] == (
        f"NOT COVERED {CONTRACT} - timing freeze 6 (owner perf-team) does not cover this"
        " failure: a timing freeze covers only the test's timing check (budget 400 ms), never"
        " its assertions"
    )


def test_a_timing_freeze_shows_the_time_its_test_took_against_the_budget(
    pytester: pytest.Pytester,
) -> None:
    """The quarantine never fails a test pytest passed: a slow pass is shown, not failed."""
    pytester.makepyfile(test_slow="import time\n\ndef test_slow():\n    time.sleep(0.02)\n")
    slow = "test_slow.py::test_slow"
    source = write_export(pytester.path / "f.json", timing_entry(5, slow, budget_ms=1))
    result = run(pytester, "--quarantine", str(source))
    assert result.ret == pytest.ExitCode.OK
    (line, took, _) = summary(result)
    assert line.startswith(f"THAW CANDIDATE {slow} - passed under timing freeze 5")
    assert took.startswith("    took ")
    assert took.endswith(" ms (budget 1 ms, over it)")


def test_a_set_up_error_is_never_quarantined(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_setup="""
        import pytest

        @pytest.fixture
        def service():
            raise ConnectionError("no database")

        def test_query(service):
            pass
        """
    )
    source = write_export(pytester.path / "f.json", flake_entry(7, "test_setup.py::test_query"))
    result = run(pytester, "--quarantine", str(source))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes() == {"errors": 1}
    assert "never a set-up or tear-down error" in summary(result)[0]


def test_the_junit_file_shows_a_quarantined_failure_apart_as_skipped(
    pytester: pytest.Pytester,
) -> None:
    """GitLab's test report and GitHub's JUnit reporters count a `<skipped>` case as neither
    passed nor failed and show its text: the freeze, its owner and expiry, the failure."""
    pytester.makepyfile(test_suite=SUITE)
    source = write_export(pytester.path / "freezes.json", flake_entry(12, FLAKY))
    result = run(pytester, "--quarantine", str(source), "--junitxml=out.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the others still fail
    suites = list(JUnitXml.fromfile(str(pytester.path / "out.xml")))
    cases = {case.name: case for suite in suites for case in suite}
    (suite,) = suites
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 2, 0, 1)
    (skipped,) = cases["test_flaky"].result
    assert isinstance(skipped, Skipped)
    assert skipped.message is not None
    assert skipped.message.startswith("quarantined by flake freeze 12 (owner team-a, expires ")
    assert skipped.message.endswith("): AssertionError: fails on every second run")
    assert skipped.text == f"test_suite.py:2: {skipped.message}"
    assert cases["test_fine"].is_passed
    assert not any(isinstance(r, Skipped | Error) for r in cases["test_slow_service"].result)


def test_under_xdist_the_controller_reads_the_source_once_and_the_workers_agree(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    source = write_export(
        pytester.path / "freezes.json", flake_entry(12, FLAKY), timing_entry(5, SLOW),
        flake_entry(3, FINE),
    )  # fmt: skip
    # The source is gone once the controller has read it: a worker that read it again
    # would stop the session with a usage error.
    pytester.makeconftest(
        f"""
        import os
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_configure(config):
            if not hasattr(config, "workerinput"):
                os.remove({str(source)!r})
        """
    )
    result = pytester.runpytest_subprocess(
        *PLUGIN, "-p", "no:cacheprovider", "--quarantine", str(source), "-n", "2",
        "--junitxml=out.xml",
    )  # fmt: skip
    assert not source.exists()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert result.parseoutcomes() == {"failed": 1, "passed": 1, "quarantined": 2}
    assert [line.split(" - ")[0] for line in summary(result) if not line.startswith(" ")] == [
        f"QUARANTINED {FLAKY}",
        f"QUARANTINED {SLOW}",
        f"THAW CANDIDATE {FINE}",
        "quarantine: 2 quarantined, 0 not covered, 0 expired, 1 thaw candidate",
    ]
    suite = next(iter(JUnitXml.fromfile(str(pytester.path / "out.xml"))))
    assert (suite.tests, suite.failures, suite.skipped) == (4, 1, 2)


def test_beside_the_projects_own_plugins(pytester: pytest.Pytester) -> None:
    """A conftest plugin that wraps the report too, and unittest and pytest subtests: a
    failed subtest of a frozen test is quarantined like its body."""
    pytester.makeconftest(
        """
        import pytest

        SEEN = []

        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(item, call):
            report = yield
            report.user_properties.append(("seen_by", "project"))
            return report

        def pytest_runtest_logreport(report):
            if report.when == "call":
                SEEN.append((report.nodeid, report.outcome))

        def pytest_terminal_summary(terminalreporter):
            terminalreporter.write_line(f"project plugin saw {sorted(SEEN)}")
        """
    )
    pytester.makepyfile(
        test_rows="""
        import unittest

        class Rows(unittest.TestCase):
            def test_each_row(self):
                for row in (1, 2):
                    with self.subTest(row=row):
                        self.assertEqual(row, 1)

        def test_with_subtests(subtests):
            with subtests.test(msg="second"):
                assert False, "the second part is flaky"
        """
    )
    unittest_id = "test_rows.py::Rows::test_each_row"
    pytest_id = "test_rows.py::test_with_subtests"
    without = run(pytester)
    assert without.ret == pytest.ExitCode.TESTS_FAILED
    source = write_export(
        pytester.path / "f.json", flake_entry(1, unittest_id), flake_entry(2, pytest_id)
    )
    result = run(pytester, "--quarantine", str(source))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert result.parseoutcomes()["quarantined"] == 2
    assert [line.split(" - ")[0] for line in summary(result)[:-1] if line[0] != " "] == [
        f"QUARANTINED {unittest_id}",
        f"QUARANTINED {pytest_id}",
    ]
    result.stdout.fnmatch_lines(
        ["project plugin saw *('test_rows.py::Rows::test_each_row', 'skipped')*"]
    )


def test_beside_the_replay_probe_it_stands_aside(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a replay the probe's labels are the evidence: the quarantine never touches them."""
    import json

    import orchestrator.probe.plugin  # noqa: F401 - imported once for the whole process

    pytester.makepyfile(test_suite=SUITE)
    source = write_export(pytester.path / "freezes.json", flake_entry(12, FLAKY))
    result_file = pytester.path / "probe.json"
    monkeypatch.setenv("REPLAY_RESULT", str(result_file))
    result = run(
        pytester, "-p", "orchestrator.probe.plugin", "--quarantine", str(source), "-k", "flaky"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["quarantine: off: a replay's labels are never quarantined"])
    (entry,) = json.loads(result_file.read_text())["tests"]
    assert (entry["nodeid"], entry["label"]) == (FLAKY, "assert_fail")


def test_the_environment_names_the_default_source(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    source = write_export(pytester.path / "freezes.json", flake_entry(12, FLAKY))
    monkeypatch.setenv("ORCHESTRATOR_QUARANTINE", str(source))
    assert run(pytester, "-k", "flaky").ret == pytest.ExitCode.OK
    monkeypatch.setenv("ORCHESTRATOR_QUARANTINE", "")  # e.g. a fork's job without the secret
    off = run(pytester, "-k", "flaky")
    assert off.ret == pytest.ExitCode.TESTS_FAILED
    off.stdout.fnmatch_lines(
        ["quarantine: off (no --quarantine SOURCE, $ORCHESTRATOR_QUARANTINE unset)"]
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "freezes.json: No such file or directory"),
        ("{", "freezes.json: not JSON (Expecting property name"),
        ('{"schema": "freeze-list/1"}', "expected a freeze-export/1 document, got 'freeze-list/1'"),
    ],
)
def test_a_source_that_cannot_be_read_stops_the_session_in_one_line(
    pytester: pytest.Pytester, content: str | None, message: str
) -> None:
    pytester.makepyfile(test_suite=SUITE)
    source = pytester.path / "freezes.json"
    if content is not None:
        source.write_text(content)
    result = run(pytester, "--quarantine", str(source))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [line for line in result.errlines if line.strip()]
    assert line.startswith(f"ERROR: --quarantine: {source}: ")
    assert message in line


def test_a_session_with_the_plugin_imports_nothing_heavy(pytester: pytest.Pytester) -> None:
    """A file or a SQLite ledger is read with the standard library: no Docker SDK, no
    SQLAlchemy in a team's test session."""
    from orchestrator.adapters.ledger import Ledger

    url = f"sqlite:///{pytester.path / 'ledger.db'}"
    with Ledger.open(url):
        pass
    source = write_export(pytester.path / "freezes.json", flake_entry(12, FLAKY))
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeconftest(
        """
        import json, sys

        def pytest_unconfigure(config):
            with open("modules.json", "w") as handle:
                json.dump(sorted(sys.modules), handle)
        """
    )
    heavy = {"docker", "sqlalchemy", "alembic", "psycopg", "rich", "structlog", "typer"}
    for given in (str(source), url):
        pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", "--quarantine", given)
        loaded = {name.split(".")[0] for name in __import__("json").loads(
            (pytester.path / "modules.json").read_text())}  # fmt: skip
        assert "orchestrator" in loaded
        assert loaded.isdisjoint(heavy), (given, sorted(loaded & heavy))
    assert os.path.exists(pytester.path / "ledger.db")
