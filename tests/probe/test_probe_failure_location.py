"""Where the probe places a failure: the deepest frame in the test's own file, with the
real exception type, for unittest TestCase methods, pytest functions and plain asserts."""

from __future__ import annotations

from typing import Any

from tests.probe.test_probe_plugin import by_nodeid, line_of

UNITTEST = """
import unittest

import helper


class LastTests(unittest.TestCase):
    def setUp(self):
        self.items = [1, 2]

    def test_equal(self):
        self.assertTrue(self.items)
        # a comment between the def and the failure
        self.assertEqual(helper.last(self.items), 3)  # the unittest assertion

    def test_raises_in_code_under_test(self):
        value = self.items[0]
        helper.parse("x" * value)  # the unittest call

    def test_plain_assert(self):
        assert self.items == []  # the unittest plain assert

    def test_passes(self):
        self.assertEqual(helper.last(self.items), 2)
"""

HELPER = """
def last(items):
    return items[-1]


def parse(text):
    return int(text)
"""


def _entry(document: dict[str, Any], name: str) -> dict[str, Any]:
    return by_nodeid(document)[f"test_unit.py::LastTests::{name}"]


def test_a_unittest_failure_is_located_at_the_failing_line_with_its_exception_type(
    pytester, probe_run
):
    pytester.makepyfile(helper=HELPER, test_unit=UNITTEST)
    document = probe_run()
    nodeid = "test_unit.py::LastTests::test_equal"
    entry = _entry(document, "test_equal")
    line = line_of(UNITTEST, "the unittest assertion")
    assert entry["label"] == "assert_fail"
    assert entry["assertion_id"] == f"{nodeid}@test_unit.py:{line}:AssertionError"
    offset = line - line_of(UNITTEST, "def test_equal")
    assert entry["assertion_key"] == f"{nodeid}@LastTests.test_equal+{offset}:AssertionError"
    assert "2 != 3" in entry["message"]
    assert _entry(document, "test_passes")["label"] == "assert_pass"


def test_a_unittest_exception_from_code_under_test_is_placed_at_the_calling_line(
    pytester, probe_run
):
    pytester.makepyfile(helper=HELPER, test_unit=UNITTEST)
    document = probe_run()
    raised = _entry(document, "test_raises_in_code_under_test")
    line = line_of(UNITTEST, "the unittest call")
    assert raised["assertion_id"].endswith(f"@test_unit.py:{line}:ValueError")
    offset = line - line_of(UNITTEST, "def test_raises_in_code_under_test")
    assert raised["assertion_key"].endswith(
        f"@LastTests.test_raises_in_code_under_test+{offset}:ValueError"
    )
    plain = _entry(document, "test_plain_assert")
    line = line_of(UNITTEST, "the unittest plain assert")
    assert plain["assertion_id"].endswith(f"@test_unit.py:{line}:AssertionError")


TWO_WAYS = """
import unittest

import helper


class ModeTests(unittest.TestCase):
    def test_mode(self):
        mode = helper.MODE
        self.assertNotEqual(mode, "first")  # the first way to fail
        self.assertNotEqual(mode, "second")  # the second way to fail
"""


def test_two_different_failures_of_one_unittest_test_get_different_keys(pytester, probe_run):
    pytester.makepyfile(helper='MODE = "first"\n', test_modes=TWO_WAYS)
    first = by_nodeid(probe_run())["test_modes.py::ModeTests::test_mode"]
    pytester.makepyfile(helper='MODE = "second"\n')
    second = by_nodeid(probe_run())["test_modes.py::ModeTests::test_mode"]
    assert first["label"] == second["label"] == "assert_fail"
    assert first["assertion_key"] != second["assertion_key"]
    assert first["assertion_id"].endswith(f":{line_of(TWO_WAYS, 'first way')}:AssertionError")
    assert second["assertion_id"].endswith(f":{line_of(TWO_WAYS, 'second way')}:AssertionError")
    # The same failure twice is the same key.
    again = by_nodeid(probe_run())["test_modes.py::ModeTests::test_mode"]
    assert again["assertion_key"] == second["assertion_key"]


def test_a_pytest_fail_inside_a_unittest_method_keeps_its_line(pytester, probe_run):
    source = """
    import unittest

    import pytest


    class FailTests(unittest.TestCase):
        def test_fail(self):
            x = 1
            pytest.fail(f"x is {x}")  # the explicit fail
    """
    pytester.makepyfile(test_explicit=source)
    entry = by_nodeid(probe_run())["test_explicit.py::FailTests::test_fail"]
    line = line_of(source, "the explicit fail")
    assert entry["assertion_id"] == (
        f"test_explicit.py::FailTests::test_fail@test_explicit.py:{line}:Failed"
    )
    assert entry["message"] == "x is 1"


SKIPS = """
import os
import unittest

import pytest


@unittest.skipUnless(os.environ.get("BACKEND_URL"), "needs BACKEND_URL")
class BackendTests(unittest.TestCase):
    def test_backend(self):
        pass


class BodyTests(unittest.TestCase):
    @unittest.skip("not today")
    def test_decorated(self):
        pass

    def test_skip_test(self):
        self.skipTest("no fast path")


@pytest.mark.skipif(True, reason="legacy mode is gone")
def test_skipif():
    pass


def test_pytest_skip():
    pytest.skip("not here")


def test_runs():
    pass
"""


def test_every_kind_of_skip_is_listed_with_the_reason_people_wrote(
    pytester, probe_run, monkeypatch
):
    monkeypatch.delenv("BACKEND_URL", raising=False)
    pytester.makepyfile(test_skips=SKIPS)
    document = probe_run()
    assert [entry["nodeid"] for entry in document["tests"]] == ["test_skips.py::test_runs"]
    assert {item["nodeid"]: item["reason"] for item in document["skipped"]} == {
        "test_skips.py::BackendTests::test_backend": "needs BACKEND_URL",
        "test_skips.py::BodyTests::test_decorated": "not today",
        "test_skips.py::BodyTests::test_skip_test": "no fast path",
        "test_skips.py::test_skipif": "legacy mode is gone",
        "test_skips.py::test_pytest_skip": "not here",
    }
    # With the variable set, the gated test runs.
    monkeypatch.setenv("BACKEND_URL", "http://localhost")
    ran = by_nodeid(probe_run())
    assert ran["test_skips.py::BackendTests::test_backend"]["label"] == "assert_pass"


def test_a_module_that_skips_itself_on_import_is_listed_as_skipped(pytester, probe_run):
    pytester.makepyfile(
        test_optional='import pytest\n\nnp = pytest.importorskip("no_such_backend_module")\n\n'
        "def test_uses_it():\n    assert np\n",
        test_plain="def test_runs():\n    pass\n",
    )
    document = probe_run()
    assert [entry["nodeid"] for entry in document["tests"]] == ["test_plain.py::test_runs"]
    (skipped,) = document["skipped"]
    assert skipped["nodeid"] == "test_optional.py"
    assert "no_such_backend_module" in skipped["reason"]
    assert not skipped["reason"].startswith("Skipped:")


MIXIN = """
import lib


class LimitMixin:
    def test_inherited(self):
        value = lib.limit()
        self.assertEqual(value, 3)  # the mixin's assertion
"""


def test_a_test_inherited_from_a_mixin_in_another_module_is_located_in_the_mixin(
    pytester, probe_run
):
    pytester.makepyfile(
        lib="def limit():\n    return 2\n",
        mixins=MIXIN,
        test_child=(
            "import unittest\n\nfrom mixins import LimitMixin\n\n\n"
            "class ChildTests(LimitMixin, unittest.TestCase):\n    pass\n"
        ),
    )
    entry = by_nodeid(probe_run())["test_child.py::ChildTests::test_inherited"]
    line = line_of(MIXIN, "the mixin's assertion")
    offset = line - line_of(MIXIN, "def test_inherited")
    nodeid = "test_child.py::ChildTests::test_inherited"
    assert entry["assertion_id"] == f"{nodeid}@mixins.py:{line}:AssertionError"
    assert entry["assertion_key"] == (
        f"{nodeid}@mixins.py::LimitMixin.test_inherited+{offset}:AssertionError"
    )


def test_naming_a_test_of_a_module_that_skips_itself_does_not_stop_the_others(pytester, probe_run):
    # pytest calls such a node id "not found" and stops the whole session; the probe
    # collects the other arguments again, so they run.
    pytester.makepyfile(
        test_optional='import pytest\n\npytest.skip("no backend", allow_module_level=True)\n\n'
        "def test_uses_it():\n    pass\n",
        test_plain="def test_runs():\n    pass\n\ndef test_other():\n    assert False\n",
    )
    document = probe_run(
        "test_optional.py::test_uses_it", "test_plain.py::test_runs", "test_plain.py::test_other"
    )
    entries = by_nodeid(document)
    assert set(entries) == {"test_plain.py::test_runs", "test_plain.py::test_other"}
    assert entries["test_plain.py::test_runs"]["label"] == "assert_pass"
    assert entries["test_plain.py::test_other"]["label"] == "assert_fail"
    assert document["skipped"] == [{"nodeid": "test_optional.py", "reason": "no backend"}]


def test_a_node_id_that_names_nothing_still_stops_the_session_as_not_found(pytester, probe_run):
    pytester.makepyfile(test_plain="def test_runs():\n    pass\n")
    document = probe_run("test_plain.py::test_missing", "test_plain.py::test_runs")
    assert [(e["nodeid"], e["reason"]) for e in document["tests"]] == [
        ("test_plain.py::test_missing", "not_found")
    ]
