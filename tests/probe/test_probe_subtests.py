"""Subtests (unittest's ``subTest``, pytest's ``subtests`` fixture): a test whose subtest
failed is a failure, as pytest counts it, located where its first failing subtest failed.

pytest 9 reports each subtest on its own while the test's body runs. A unittest test's
own report then still says "passed": labelling from that report alone called a real
regression inside a ``subTest`` a pass (the exit status of pytest was 1).
"""

from __future__ import annotations

import os

from tests.probe.test_probe_driver import load, run_driver, write
from tests.probe.test_probe_plugin import by_nodeid, line_of

UNITTEST = """
import unittest


class Rows(unittest.TestCase):
    def test_one_row_wrong(self):
        for row in range(3):
            with self.subTest(row=row):
                self.assertNotEqual(row, 1)  # the failing row

    def test_every_row_right(self):
        for row in range(3):
            with self.subTest(row=row):
                self.assertGreaterEqual(row, 0)

    def test_two_blocks_fail(self):
        with self.subTest("first"):
            self.assertEqual(1, 2)  # the first block
        with self.subTest("second"):
            raise KeyError("second")  # the second block

    def test_a_row_skips(self):
        for row in range(3):
            with self.subTest(row=row):
                if row == 1:
                    self.skipTest("row 1 is not ready")
                self.assertGreaterEqual(row, 0)

    def test_body_fails_after_subtests_pass(self):
        for row in range(2):
            with self.subTest(row=row):
                self.assertGreaterEqual(row, 0)
        self.assertEqual("body", "other")  # the body's own failure
"""


def _entries(pytester, probe_run) -> dict:
    pytester.makepyfile(test_rows=UNITTEST)
    return by_nodeid(probe_run())


def test_a_unittest_test_whose_subtest_fails_is_a_failure_at_that_line(pytester, probe_run):
    entries = _entries(pytester, probe_run)
    nodeid = "test_rows.py::Rows::test_one_row_wrong"
    entry = entries[nodeid]
    line = line_of(UNITTEST, "the failing row")
    assert entry["label"] == "assert_fail"
    assert entry["assertion_id"] == f"{nodeid}@test_rows.py:{line}:AssertionError"
    offset = line - line_of(UNITTEST, "def test_one_row_wrong")
    assert entry["assertion_key"] == f"{nodeid}@Rows.test_one_row_wrong+{offset}:AssertionError"
    assert "1 == 1" in entry["message"]
    assert entries["test_rows.py::Rows::test_every_row_right"]["label"] == "assert_pass"


def test_the_first_failing_subtest_names_the_failure(pytester, probe_run):
    entry = _entries(pytester, probe_run)["test_rows.py::Rows::test_two_blocks_fail"]
    assert entry["label"] == "assert_fail"
    assert entry["assertion_id"].endswith(
        f"@test_rows.py:{line_of(UNITTEST, 'the first block')}:AssertionError"
    )


def test_a_skipped_subtest_leaves_the_test_a_pass_not_a_skip(pytester, probe_run):
    pytester.makepyfile(test_rows=UNITTEST)
    document = probe_run()
    assert by_nodeid(document)["test_rows.py::Rows::test_a_row_skips"]["label"] == "assert_pass"
    assert document["skipped"] == []


def test_a_body_failing_after_passing_subtests_is_its_own_failure(pytester, probe_run):
    entry = _entries(pytester, probe_run)["test_rows.py::Rows::test_body_fails_after_subtests_pass"]
    assert entry["label"] == "assert_fail"
    assert entry["assertion_id"].endswith(
        f"@test_rows.py:{line_of(UNITTEST, 'the body')}:AssertionError"
    )


FIXTURE = """
import pytest


def test_values(subtests):
    for value in (1, 2, 3):
        with subtests.test(value=value):
            assert value != 2  # the failing value


def test_all_values(subtests):
    for value in (1, 2, 3):
        with subtests.test(value=value):
            assert value > 0


@pytest.mark.xfail(reason="value 2 is known to be wrong")
def test_known_wrong(subtests):
    for value in (1, 2):
        with subtests.test(value=value):
            assert value != 2
"""


def test_the_subtests_fixture_fails_where_its_subtest_failed(pytester, probe_run):
    pytester.makepyfile(test_values=FIXTURE)
    document = probe_run()
    entries = by_nodeid(document)
    entry = entries["test_values.py::test_values"]
    assert entry["label"] == "assert_fail"
    # The subtest's own line and type, not pytest's "contains 1 failed subtest".
    line = line_of(FIXTURE, "the failing value")
    nodeid = "test_values.py::test_values"
    assert entry["assertion_id"] == f"{nodeid}@test_values.py:{line}:AssertionError"
    assert entries["test_values.py::test_all_values"]["label"] == "assert_pass"
    # Under an xfail mark the failing subtest is expected: no verdict either way.
    assert "test_values.py::test_known_wrong" not in entries
    assert "test_values.py::test_known_wrong" in {item["nodeid"] for item in document["skipped"]}


def test_a_failing_subtest_shows_as_a_failure_on_the_progress_line(
    pytester, probe_run, monkeypatch
):
    read, write = os.pipe()
    pytester.makepyfile(test_rows=UNITTEST)
    monkeypatch.setenv("REPLAY_PROGRESS_FD", str(write))
    try:
        probe_run("-k", "one_row_wrong or every_row_right")
    finally:
        os.close(write)
    with os.fdopen(read) as lines:
        outcomes = [line.split()[-1] for line in lines.read().splitlines()]
    assert sorted(outcomes) == ["failed", "passed"]


def test_rendering_a_failed_subtest_is_not_a_call_of_the_test(tmp_path):
    """pytest reads the test's source to render a subtest's failure while the body still
    runs: that read is pytest's, so a failing side does not count one ``open`` more than
    a passing one (a call budget change the test never made). A fresh driver process:
    an in-process run may have the source cached already."""
    write(tmp_path, "test_rows.py", UNITTEST)
    out = tmp_path / "out"
    completed = run_driver(tmp_path, out, "test_rows.py")
    assert completed.returncode == 0, completed.stderr
    entries = by_nodeid(load(out / "replay-001.json")["result"])
    assert entries["test_rows.py::Rows::test_one_row_wrong"]["label"] == "assert_fail"
    # The first report pytest renders reads the file (later ones find it cached): none of
    # the tests, whichever runs first, opened anything itself.
    assert {nodeid: entry["calls"]["open"] for nodeid, entry in entries.items()} == dict.fromkeys(
        entries, 0
    )
