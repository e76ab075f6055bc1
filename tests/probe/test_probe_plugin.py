"""The probe plugin, exercised with pytester: labels, assertion ids, call counts, fixtures."""

from __future__ import annotations

import json
import platform
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest

from orchestrator.probe import PROBE_VERSION
from orchestrator.probe.atomic import write_json_atomic

STABLE = ("open", "sleep", "socket", "subprocess", "sqlite", "http")


def by_nodeid(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    entries = {entry["nodeid"]: entry for entry in document["tests"]}
    assert len(entries) == len(document["tests"]), "a node id was reported twice"
    return entries


def helper_label(entries: dict[str, dict[str, Any]]) -> str:
    return entries["test_zz_helper_import.py::test_imports_a_rewritten_module"]["label"]


def line_of(source: str, marker: str) -> int:
    """1-based line number of the only line of `source` containing `marker`."""
    lines = [
        i
        for i, text in enumerate(textwrap.dedent(source).strip().splitlines(), 1)
        if marker in text
    ]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


# -- labels -----------------------------------------------------------------------------


def test_passing_test_is_assert_pass_with_stable_zero_counts(pytester, probe_run):
    pytester.makepyfile(test_ok="def test_ok():\n    assert 1 + 1 == 2\n")
    document = probe_run(seed=7)
    assert document["schema"] == "replay-probe/1"
    assert document["probe_version"] == PROBE_VERSION
    assert document["python"] == platform.python_version()
    assert document["seed"] == 7
    (entry,) = document["tests"]
    assert entry["nodeid"] == "test_ok.py::test_ok"
    assert entry["label"] == "assert_pass"
    assert entry["assertion_id"] is None
    assert entry["reason"] is None
    assert entry["calls"] == dict.fromkeys(STABLE, 0)
    assert entry["duration_ms"] >= 0


FAILING = """
    import helper

    def test_budget():
        value = helper.compute(2)
        assert value == 5  # the failing line
"""


def test_failing_assertion_is_assert_fail_with_location(pytester, probe_run):
    pytester.makepyfile(helper="def compute(x):\n    return x * 2\n", test_fail=FAILING)
    (entry,) = probe_run()["tests"]
    line = line_of(FAILING, "the failing line")
    assert entry["label"] == "assert_fail"
    assert entry["assertion_id"] == (
        f"test_fail.py::test_budget@test_fail.py:{line}:AssertionError"
    )
    assert "assert 4 == 5" in entry["message"]


RAISING = """
    import helper

    def test_parse():
        helper.parse("not a number")  # the calling line
"""


def test_exception_from_code_under_test_is_assert_fail_at_the_test_line(pytester, probe_run):
    pytester.makepyfile(helper="def parse(text):\n    return int(text)\n", test_raise=RAISING)
    (entry,) = probe_run()["tests"]
    line = line_of(RAISING, "the calling line")
    assert entry["label"] == "assert_fail"
    assert entry["assertion_id"] == f"test_raise.py::test_parse@test_raise.py:{line}:ValueError"
    assert "invalid literal" in entry["message"]


def test_same_failure_in_two_runs_has_the_same_assertion_id(pytester, probe_run):
    pytester.makepyfile(helper="def compute(x):\n    return x * 2\n", test_fail=FAILING)
    first = probe_run()["tests"][0]["assertion_id"]
    second = probe_run()["tests"][0]["assertion_id"]
    assert first == second
    assert first is not None


def test_changing_the_code_under_test_does_not_move_the_assertion_id(pytester, probe_run):
    pytester.makepyfile(helper="def parse(text):\n    return int(text)\n", test_raise=RAISING)
    before = probe_run()["tests"][0]
    # The patch moves the raising statement deeper and several lines down.
    pytester.makepyfile(
        helper=textwrap.dedent(
            """
            import re


            def _strict(text):
                text = text.strip()
                if not re.fullmatch(r"-?[0-9]+", text):
                    raise ValueError(f"not a number: {text!r}")
                return int(text)


            def parse(text):
                return _strict(text)
            """
        )
    )
    after = probe_run()["tests"][0]
    assert before["message"] != after["message"]  # the code under test really changed
    assert after["assertion_id"] == before["assertion_id"]


KEYED = """\
import helper


class TestLast:
    def test_x(self):
        items = [1, 2]
        assert items
        # a comment inside the test
        assert helper.last(items) is None  # the failing line


@helper.passthrough
def test_decorated():
    helper.parse("x")  # the raising line
"""
KEYED_HELPER = """
import functools


def last(items):
    return items[-1]


def parse(text):
    return int(text)


def passthrough(test):
    @functools.wraps(test)
    def run(*args, **kwargs):
        return test(*args, **kwargs)
    return run
"""


def test_the_assertion_key_is_the_function_and_the_line_offset_in_the_test_module(
    pytester, probe_run
):
    pytester.makepyfile(helper=KEYED_HELPER, test_more=KEYED)
    entries = by_nodeid(probe_run())
    method = entries["test_more.py::TestLast::test_x"]
    line = line_of(KEYED, "the failing line")
    assert method["assertion_id"] == (
        f"test_more.py::TestLast::test_x@test_more.py:{line}:AssertionError"
    )
    offset = line - line_of(KEYED, "def test_x")
    assert method["assertion_key"] == (
        f"test_more.py::TestLast::test_x@TestLast.test_x+{offset}:AssertionError"
    )
    # Raised in the code under test (and through a wrapper in another file): the key is
    # the test module's innermost frame, counted from the decorator that starts the def.
    decorated = entries["test_more.py::test_decorated"]
    offset = line_of(KEYED, "the raising line") - line_of(KEYED, "@helper.passthrough")
    assert decorated["assertion_key"] == (
        f"test_more.py::test_decorated@test_decorated+{offset}:ValueError"
    )


def test_the_assertion_key_survives_lines_inserted_above_the_test(pytester, probe_run):
    pytester.makepyfile(helper=KEYED_HELPER, test_more=KEYED)
    before = by_nodeid(probe_run())
    shifted = "import os\n\n\ndef test_added_above():\n    assert os.sep\n\n\n" + KEYED
    pytester.makepyfile(test_more=shifted)
    after = by_nodeid(probe_run())
    assert after["test_more.py::test_added_above"]["label"] == "assert_pass"
    for nodeid in ("test_more.py::TestLast::test_x", "test_more.py::test_decorated"):
        assert after[nodeid]["label"] == before[nodeid]["label"] == "assert_fail"
        assert after[nodeid]["assertion_id"] != before[nodeid]["assertion_id"]
        assert after[nodeid]["assertion_key"] == before[nodeid]["assertion_key"]
    # A change inside the test moves its key.
    pytester.makepyfile(test_more=KEYED.replace("items = [1, 2]", "items = [1, 2]\n        x = 0"))
    moved = by_nodeid(probe_run())["test_more.py::TestLast::test_x"]
    assert moved["assertion_key"] != before["test_more.py::TestLast::test_x"]["assertion_key"]


def test_a_passing_test_and_a_harness_error_have_no_assertion_key(pytester, probe_run):
    pytester.makepyfile(test_ok="def test_ok():\n    assert True\n", test_bad="def test_(:\n")
    for entry in probe_run()["tests"]:
        assert entry["assertion_key"] is None, entry


def test_setup_and_teardown_errors_are_harness_errors(pytester, probe_run):
    pytester.makepyfile(
        test_fixtures="""
        import pytest

        @pytest.fixture
        def broken_setup():
            raise RuntimeError("cannot set up")

        @pytest.fixture
        def broken_teardown():
            yield
            raise RuntimeError("cannot tear down")

        def test_setup(broken_setup):
            pass

        def test_teardown(broken_teardown):
            pass

        def test_fails_then_teardown(broken_teardown):
            assert 1 + 1 == 3
        """
    )
    entries = by_nodeid(probe_run())
    setup = entries["test_fixtures.py::test_setup"]
    teardown = entries["test_fixtures.py::test_teardown"]
    # The body's failure is the verdict, as plain pytest says "failed": the teardown's
    # error after it does not make it no verdict.
    both = entries["test_fixtures.py::test_fails_then_teardown"]
    assert (both["label"], both["reason"]) == ("assert_fail", None)
    assert both["assertion_id"] is not None
    assert (setup["label"], setup["reason"]) == ("harness_error", "setup_error")
    assert "cannot set up" in setup["message"]
    assert setup["assertion_id"] is None
    assert (teardown["label"], teardown["reason"]) == ("harness_error", "teardown_error")
    assert "cannot tear down" in teardown["message"]


def test_collection_error_is_reported_against_the_module(pytester, probe_run):
    pytester.makepyfile(
        test_good="def test_fine():\n    pass\n",
        test_broken="import no_such_module_anywhere\n\ndef test_never():\n    pass\n",
    )
    entries = by_nodeid(probe_run())
    broken = entries["test_broken.py"]
    assert (broken["label"], broken["reason"]) == ("harness_error", "collection_error")
    assert "no_such_module_anywhere" in broken["message"]
    assert broken["calls"] == dict.fromkeys(STABLE, 0)


def test_unknown_node_id_still_writes_a_result_saying_not_found(pytester, probe_run):
    pytester.makepyfile(test_some="def test_real():\n    pass\n")
    document = probe_run("test_some.py::test_missing")
    entries = by_nodeid(document)
    missing = entries["test_some.py::test_missing"]
    assert (missing["label"], missing["reason"]) == ("harness_error", "not_found")
    assert document["exit_status"] == pytest.ExitCode.USAGE_ERROR


def test_missing_file_argument_is_not_found(pytester, probe_run):
    document = probe_run("tests/test_nowhere.py::test_x")
    (entry,) = document["tests"]
    assert entry["reason"] == "not_found"
    assert "test_nowhere.py" in entry["nodeid"]


NETWORK = """
    import http.client
    import socket
    import urllib.request

    def test_remote_connect():
        socket.create_connection(("192.0.2.10", 80), timeout=1)

    def test_remote_name_swallowed():
        try:
            socket.getaddrinfo("example.com", 443)
        except OSError:
            pass  # the code under test hides the failure; the attempt still counts

    def test_remote_http():
        urllib.request.urlopen("http://example.com/", timeout=1)

    def test_loopback_is_allowed():
        server = socket.create_server(("127.0.0.1", 0))
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            pass
        server.close()

    def test_own_name_is_local():
        # socket.getfqdn() looks up this machine's own name: no network
        assert socket.getfqdn()

    def test_loopback_http_counts():
        server = socket.create_server(("localhost", 0))
        connection = http.client.HTTPConnection("localhost", server.getsockname()[1])
        connection.connect()
        connection.close()
        server.close()
"""


def test_network_attempts_are_impure_network_harness_errors(pytester, probe_run):
    pytester.makepyfile(test_net=NETWORK)
    entries = by_nodeid(probe_run())
    for name in ("test_remote_connect", "test_remote_name_swallowed", "test_remote_http"):
        entry = entries[f"test_net.py::{name}"]
        assert (entry["label"], entry["reason"]) == ("harness_error", "impure_network"), name
        assert entry["calls"]["socket"] >= 1, name
    assert entries["test_net.py::test_remote_http"]["calls"]["http"] >= 1
    loopback = entries["test_net.py::test_loopback_is_allowed"]
    assert loopback["label"] == "assert_pass"
    assert loopback["calls"]["socket"] >= 1
    own_name = entries["test_net.py::test_own_name_is_local"]
    assert own_name["label"] == "assert_pass"
    assert own_name["calls"]["socket"] >= 1
    local_http = entries["test_net.py::test_loopback_http_counts"]
    assert local_http["label"] == "assert_pass"
    assert local_http["calls"]["http"] == 1


def test_skipped_and_xfailed_tests_are_listed_apart(pytester, probe_run):
    pytester.makepyfile(
        test_skips="""
        import pytest

        def test_skip_in_body():
            pytest.skip("not here")

        @pytest.mark.skip(reason="marked")
        def test_skip_marked():
            pass

        @pytest.mark.xfail(reason="known")
        def test_xfail():
            assert False

        def test_runs():
            pass
        """
    )
    document = probe_run()
    assert [entry["nodeid"] for entry in document["tests"]] == ["test_skips.py::test_runs"]
    skipped = {item["nodeid"]: item["reason"] for item in document["skipped"]}
    assert set(skipped) == {
        "test_skips.py::test_skip_in_body",
        "test_skips.py::test_skip_marked",
        "test_skips.py::test_xfail",
    }
    assert "known" in skipped["test_skips.py::test_xfail"]


# -- call counts ------------------------------------------------------------------------------


def test_clock_read_twice_versus_once(pytester, probe_run):
    pytester.makepyfile(
        test_clock="""
        import pytest

        def normalize_event(payload, now):
            return {**payload, "seen": now()}

        def normalize_event_with_retry(payload, now):
            now()  # the patch's extra read
            return {**payload, "seen": now()}

        @pytest.fixture
        def clock(deps):
            clock = deps.clock()
            clock()  # a read during setup is not part of the budget
            return clock

        def test_once(clock):
            normalize_event({"id": "evt-1"}, now=clock)

        def test_twice(clock):
            normalize_event_with_retry({"id": "evt-1"}, now=clock)

        def test_without_clock():
            pass
        """
    )
    entries = by_nodeid(probe_run())
    assert entries["test_clock.py::test_once"]["calls"] == {**dict.fromkeys(STABLE, 0), "clock": 1}
    assert entries["test_clock.py::test_twice"]["calls"]["clock"] == 2
    assert "clock" not in entries["test_clock.py::test_without_clock"]["calls"]


def test_fake_clock_is_fixed_until_advanced(pytester, probe_run):
    pytester.makepyfile(
        test_fake="""
        from datetime import datetime, timezone

        def test_epoch(deps):
            clock = deps.clock()
            assert clock() == datetime(1970, 1, 1, tzinfo=timezone.utc)
            assert clock() == clock.peek()
            clock.advance(90)
            assert clock().minute == 1
            assert clock.calls == 3

        def test_numeric_start(deps):
            clock = deps.clock(start=100.0)
            clock.advance(0.5)
            assert clock.now() == 100.5
        """
    )
    entries = by_nodeid(probe_run())
    assert entries["test_fake.py::test_epoch"]["label"] == "assert_pass"
    assert entries["test_fake.py::test_epoch"]["calls"]["clock"] == 3
    assert entries["test_fake.py::test_numeric_start"]["calls"]["clock"] == 1


def test_spies_count_under_their_own_names(pytester, probe_run):
    pytester.makepyfile(
        test_spy="""
        import pytest

        def test_spied(deps):
            fetch = deps.spy("fetch", lambda key: key.upper())
            unused = deps.spy("unused", print)
            assert [fetch("a"), fetch("b"), fetch("c")] == ["A", "B", "C"]
            assert fetch.calls == 3

        def test_reserved_name(deps):
            with pytest.raises(ValueError, match="reserved"):
                deps.spy("open", open)
        """
    )
    entries = by_nodeid(probe_run())
    calls = entries["test_spy.py::test_spied"]["calls"]
    assert (calls["fetch"], calls["unused"]) == (3, 0)
    assert entries["test_spy.py::test_reserved_name"]["label"] == "assert_pass"


EFFECTS = """
    import sqlite3
    import subprocess
    import sys
    import time
    from time import sleep

    import pytest

    @pytest.fixture
    def data_files(tmp_path):
        paths = []
        for name in ("a.txt", "b.txt"):
            path = tmp_path / name
            path.write_text(name)  # setup opens are not counted
            paths.append(path)
        time.sleep(0)  # nor setup sleeps
        return paths

    def test_effects(data_files):
        for path in data_files:
            with open(path) as handle:
                handle.read()
        sleep(0)
        time.sleep(0)
        sleep(0.001)
        subprocess.run([sys.executable, "-c", "pass"], check=True, capture_output=True)
        sqlite3.connect(":memory:").close()
"""


def test_sleep_open_subprocess_and_sqlite_counts(pytester, probe_run):
    pytester.makepyfile(test_effects=EFFECTS)
    (entry,) = probe_run()["tests"]
    assert entry["label"] == "assert_pass"
    assert entry["calls"] == {
        "open": 2,
        "sleep": 3,
        "socket": 0,
        "subprocess": 1,
        "sqlite": 1,
        "http": 0,
    }


def test_counts_are_stable_between_runs(pytester, probe_run):
    pytester.makepyfile(test_effects=EFFECTS)
    first = probe_run()["tests"][0]["calls"]
    second = probe_run()["tests"][0]["calls"]
    assert first == second


def test_imports_in_the_test_body_are_not_counted(pytester, probe_run):
    pytester.makepyfile(
        local_module="VALUE = 41\n",
        other_local_module="import json\nVALUE = json.loads('1')\n",
        test_imports="""
        import importlib

        def test_import_statement():
            import local_module
            assert local_module.VALUE == 41

        def test_import_module_and_stdlib():
            module = importlib.import_module("other_local_module")
            import wave, colorsys  # stdlib modules nothing has imported yet
            assert module.VALUE == 1

        def test_one_real_open(tmp_path):
            path = tmp_path / "x"
            path.write_text("x")
            import this_module_does_not_exist_either  # noqa: F401
        """,
    )
    # A module registered for assertion rewriting is read by pytest's own loader.
    pytester.makeconftest('import pytest\n\npytest.register_assert_rewrite("rewritten_helper")\n')
    pytester.makepyfile(
        rewritten_helper="VALUE = 3\n",
        test_zz_helper_import="""
        def test_imports_a_rewritten_module():
            import sys
            import rewritten_helper
            assert rewritten_helper.VALUE == 3
            assert type(sys.modules["rewritten_helper"].__loader__).__name__ == (
                "AssertionRewritingHook"
            )
        """,
    )
    entries = by_nodeid(probe_run())
    assert entries["test_imports.py::test_import_statement"]["calls"]["open"] == 0
    assert entries["test_imports.py::test_import_module_and_stdlib"]["calls"]["open"] == 0
    # A failed import after one real open: only the real open counts.
    one_open = entries["test_imports.py::test_one_real_open"]
    assert one_open["label"] == "assert_fail"
    assert one_open["calls"]["open"] == 1
    assert helper_label(entries) == "assert_pass"
    helper = entries["test_zz_helper_import.py::test_imports_a_rewritten_module"]
    assert helper["calls"]["open"] == 0


# -- fixtures and seeding ----------------------------------------------------------------------


def test_replay_fixture_and_seed(pytester, probe_run):
    fixture = pytester.path / "minimal.json"
    fixture.write_text(json.dumps({"id": "evt-1", "ts": "1970-01-01T00:00:00Z"}))
    pytester.makepyfile(
        test_fixture="""
        def test_payload(replay_fixture, replay_seed):
            assert replay_fixture == {"id": "evt-1", "ts": "1970-01-01T00:00:00Z"}
            replay_fixture["id"] = "mutated"  # must not leak into the next test
            assert replay_seed == 1234

        def test_fresh_copy(replay_fixture):
            assert replay_fixture["id"] == "evt-1"
        """
    )
    document = probe_run(seed=1234, fixture=fixture)
    assert document["fixture"] == str(fixture)
    labels = {entry["nodeid"]: entry["label"] for entry in document["tests"]}
    assert set(labels.values()) == {"assert_pass"}, labels


def test_random_is_reseeded_for_every_test(pytester, probe_run, monkeypatch):
    pytester.makepyfile(
        test_draws="""
        import json, os, random

        def draw(name):
            with open(os.environ["DRAWS_OUT"] + name, "w") as handle:
                json.dump(random.random(), handle)

        def test_a():
            random.random()  # a test that consumes state
            draw("a")

        def test_b():
            draw("b")
        """
    )
    out = pytester.path / "draw-"
    monkeypatch.setenv("DRAWS_OUT", str(out))
    probe_run(seed=99)
    expected = random.Random(99)
    first = expected.random()
    second = expected.random()
    assert json.loads(Path(f"{out}a").read_text()) == second  # test_a drew once before
    assert json.loads(Path(f"{out}b").read_text()) == first


def test_missing_replay_fixture_is_a_setup_error(pytester, probe_run):
    pytester.makepyfile(test_nofix="def test_needs(replay_fixture):\n    pass\n")
    (entry,) = probe_run()["tests"]
    assert (entry["label"], entry["reason"]) == ("harness_error", "setup_error")
    assert "REPLAY_FIXTURE" in entry["message"]


# -- writing -------------------------------------------------------------------------------------


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    write_json_atomic(target, {"schema": "x", "n": 1})
    assert json.loads(target.read_text()) == {"schema": "x", "n": 1}

    def failing_fsync(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr("orchestrator.probe.atomic.os.fsync", failing_fsync)
    with pytest.raises(OSError, match="disk gone"):
        write_json_atomic(target, {"schema": "x", "n": 2})
    assert json.loads(target.read_text()) == {"schema": "x", "n": 1}  # the old file intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]  # no temp left


def test_no_result_path_means_no_file(pytester, monkeypatch):
    monkeypatch.delenv("REPLAY_RESULT", raising=False)
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    before = set(pytester.path.iterdir())
    result = pytester.runpytest_inprocess(
        "-p", "orchestrator.probe.plugin", "-p", "no:hypothesispytest", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    # Python's own bytecode cache aside (written unless PYTHONDONTWRITEBYTECODE is set).
    assert {path.name for path in set(pytester.path.iterdir()) - before} <= {"__pycache__"}


LEAKS_OS_NAME = """
import os


def test_before():
    pass


def test_leaks_os_name():
    os.name = "nt"  # a suite's helper without try/finally, failing before it restores
    assert False


def test_after():
    pass
"""


def test_a_test_leaving_os_name_nt_behind_loses_no_finished_result(pytester, monkeypatch):
    # From then on pathlib makes WindowsPath, which Python refuses on POSIX: pytest itself
    # stops with an internal error, and the probe must still write what finished.
    # A child process: the leak would break this one.
    pytester.makepyfile(test_leak=LEAKS_OS_NAME)
    result_path = pytester.path / "result.json"
    monkeypatch.setenv("REPLAY_RESULT", str(result_path))
    monkeypatch.delenv("REPLAY_FIXTURE", raising=False)
    pytester.runpytest_subprocess("-p", "orchestrator.probe.plugin", "-p", "no:cacheprovider")
    document = json.loads(result_path.read_text(encoding="utf-8"))
    entries = by_nodeid(document)
    assert document["exit_status"] == pytest.ExitCode.INTERNAL_ERROR
    assert entries["test_leak.py::test_before"]["label"] == "assert_pass"
    # pytest broke while reporting it: no verdict on that test, nor on what came after.
    assert entries["test_leak.py::test_leaks_os_name"]["label"] == "harness_error"
    assert "test_leak.py::test_after" not in entries
