"""The pure rules behind what comes back from a container: node ids handed to pytest
(core/pytest_command.py, core/side_spec.py), the caps of tests per side and bytes per
run (core/run_limits.py), the driver's announcements of what it wrote and the reader's
count of stray processes (core/result_files.py), a full results folder (core/labels.py)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.adapters import results
from orchestrator.core import result_files, run_limits, side_spec
from orchestrator.core.labels import ContainerFacts, ReplayFile, label_replay
from orchestrator.core.pytest_command import NODE_ID_CHARS, node_id_problem, split_arguments
from orchestrator.core.run_limits import RunCaps, bytes_problem, run_caps, too_many_tests

ids = st.text(min_size=1, max_size=60)


@given(rest=st.text(max_size=40))
def test_an_id_that_starts_with_a_dash_is_never_a_node_id(rest):
    problem = node_id_problem("-" + rest)
    assert problem is not None


NODE_IDS = r"[a-z_/]{1,20}\.py(::[A-Za-z_]\w{0,10}){1,2}(\[[^\x00]{0,10}\])?"


@given(node=st.from_regex(NODE_IDS, fullmatch=True))
def test_ids_pytest_writes_are_taken(node):
    assert node_id_problem(node) is None


@pytest.mark.parametrize("node", ["", "   ", "a" * (NODE_ID_CHARS + 1), "t.py::x\0y"])
def test_empty_over_long_or_nul_ids_are_refused(node):
    assert node_id_problem(node) is not None


@given(pytest_args=st.lists(st.text(max_size=8), max_size=4), nodes=st.lists(ids, max_size=4))
@pytest.mark.parametrize("seed", [None, 7])
def test_node_ids_always_follow_a_double_dash(pytest_args, nodes, seed):
    """Node ids, or without them the command's own paths, come last, after one ``--``,
    and no option comes after a positional argument (pytest 7 refuses such a ``--``)."""
    arguments = side_spec.pytest_arguments(pytest_args, nodes, seed=seed)
    options, paths = split_arguments(pytest_args)
    targets = tuple(nodes) or paths
    if targets:
        assert arguments[-len(targets) - 1 :] == ("--", *targets)
        assert "--" not in arguments[: -len(targets) - 1]
    else:
        assert "--" not in arguments
    assert arguments[3 : 3 + len(options)] == options


def test_collected_ids_that_are_options_are_refused_and_named():
    docs = [
        {"items": ["--deselect", "t.py::test_a", "-p", "-pevil"], "errors": ["-x.py"]},
        {"items": ["t.py::test_a", "t.py::test_b"], "skipped": ["--co"]},
    ]
    assert side_spec.collected_selection(docs) == ("t.py::test_a", "t.py::test_b")
    refused = side_spec.refused_collected(docs)
    assert set(refused) == {"--deselect", "-p", "-pevil", "-x.py", "--co"}
    assert all("option" in reason for reason in refused.values())


@given(
    tests=st.integers(min_value=1, max_value=10**7),
    run_bytes=st.integers(min_value=1, max_value=2**50),
)
def test_caps_come_from_the_environment(tests, run_bytes):
    env = {run_limits.TESTS_VARIABLE: str(tests), run_limits.BYTES_VARIABLE: f" {run_bytes} "}
    assert run_caps(env) == RunCaps(max_tests=tests, max_run_bytes=run_bytes)
    assert run_caps({}) == RunCaps()


@pytest.mark.parametrize("value", ["0", "-1", "1e6", "lots", "²"])
def test_a_cap_that_is_not_a_positive_whole_number_names_its_variable(value):
    with pytest.raises(ValueError, match=run_limits.TESTS_VARIABLE):
        run_caps({run_limits.TESTS_VARIABLE: value})


def test_the_default_caps_let_a_suite_of_100000_tests_run():
    assert too_many_tests(100_000, RunCaps(), what="a suite") is None
    assert bytes_problem(0, 4 * run_limits.GIB, RunCaps()) is None


@given(
    count=st.integers(min_value=0, max_value=10**6), cap=st.integers(min_value=1, max_value=10**6)
)
def test_a_count_past_the_cap_is_refused_naming_it(count, cap):
    problem = too_many_tests(count, RunCaps(max_tests=cap), what="the result")
    assert (problem is None) == (count <= cap)
    if problem is not None:
        assert run_limits.TESTS_VARIABLE in problem
        assert str(cap) in problem


@given(
    used=st.integers(min_value=0, max_value=10**9), adding=st.integers(min_value=0, max_value=10**9)
)
def test_bytes_past_the_run_cap_are_refused_naming_it(used, adding):
    caps = RunCaps(max_run_bytes=10**9)
    problem = bytes_problem(used, adding, caps)
    assert (problem is None) == (used + adding <= 10**9)
    if problem is not None:
        assert run_limits.BYTES_VARIABLE in problem


DIGEST = "ab" * 32


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (f"result replay-001.json {DIGEST}", ("replay-001.json", DIGEST)),
        (f"result replay-001.json {DIGEST}\n", ("replay-001.json", DIGEST)),
        (f"result collected.json {DIGEST}", None),
        (f"result replay-001.json {DIGEST[:-1]}", None),
        (f"result ../replay-001.json {DIGEST}", None),
        ("replay 1/1 completed", None),
    ],
)
def test_only_a_driver_result_line_is_an_announcement(line, found):
    assert result_files.announcement(line) == found


def test_a_replay_file_is_taken_only_as_the_one_version_announced():
    data = b'{"x": 1}'
    digest = hashlib.sha256(data).hexdigest()
    name = "replay-001.json"
    assert result_files.announced_problem(name, digest, {name: {digest}}) is None
    assert "not the file the driver wrote" in result_files.announced_problem(name, digest, {})
    assert "not the file" in result_files.announced_problem(name, digest, {name: {DIGEST}})
    assert "2 different" in result_files.announced_problem(name, digest, {name: {digest, DIGEST}})
    read = results.ResultsRead(files={name: data, "collected.json": b"{}"})
    checked = results.checked_against(read, {})
    assert set(checked.files) == {"collected.json"}  # only the driver's files are announced
    assert name in checked.unsafe


@pytest.mark.parametrize(("alive", "refused"), [(0, False), (3, True), (-1, True), ("0", True)])
def test_stray_processes_when_the_reader_ran_refuse_the_folder(alive, refused):
    assert (result_files.stray_problem(alive) is not None) == refused


def test_a_result_the_driver_had_no_room_for_is_results_full_with_its_cause():
    read = results.ResultsRead(full=frozenset({"replay-001.json"}))
    replay_file = results.replay_file_from(read, 1)
    assert replay_file.state == "full"
    replay = label_replay(replay_file, ContainerFacts(exit_code=0), "t.py::test_a")
    assert (replay.label, replay.reason) == ("harness_error", "results_full")
    assert "(/replay-out, 64 MiB) is full: a test wrote into it" in (replay.message or "")
    assert result_files.full_announcement("results-full replay-001.json") == "replay-001.json"
    assert result_files.RESULTS_FOLDER == side_spec.OUT


def test_a_no_result_replay_in_a_full_folder_says_so():
    doc = {
        "schema": "replay-run/1",
        "status": "no_result",
        "exit_code": 1,
        "results_full": True,
    }
    replay = label_replay(ReplayFile(replay=1, state="ok", doc=doc), ContainerFacts(), "t::x")
    assert (replay.label, replay.reason) == ("harness_error", "results_full")


def test_a_result_over_the_cap_of_tests_is_corrupt_naming_the_cap():
    tests = [{"nodeid": f"t.py::test_{i}", "label": "assert_pass"} for i in range(5)]
    doc = {
        "schema": "replay-run/1",
        "status": "completed",
        "result": {"schema": "replay-probe/1", "tests": tests},
    }
    raw = json.dumps(doc).encode()
    assert results.parse_replay_bytes(raw, 1, max_tests=5).state == "ok"
    refused = results.parse_replay_bytes(raw, 1, max_tests=4)
    assert refused.state == "corrupt"
    assert run_limits.TESTS_VARIABLE in (refused.problem or "")


def test_ids_the_run_did_not_ask_for_are_counted():
    plan = side_spec_plan(("t.py::test_a",))
    tests = [
        {"nodeid": nodeid, "label": "assert_pass"}
        for nodeid in ("t.py::test_a", "t.py::test_forged", "t.py")
    ]
    doc = {"schema": "replay-run/1", "status": "completed", "result": {"tests": tests}}
    observed = {"base": [(ReplayFile(replay=1, state="ok", doc=doc), ContainerFacts())]}
    assert side_spec.unplanned_ids(plan, observed) == (1, "t.py::test_forged")
    whole_suite = side_spec_plan(())
    assert side_spec.unplanned_ids(whole_suite, observed) == (0, None)


def side_spec_plan(property_ids):
    return side_spec.ReplayPlan(
        image_id="sha256:" + "a" * 64,
        pytest_args=("-q",),
        property_ids=property_ids,
        fixture=None,
        replays=1,
        timeout_s=7.5,
        seed=0,
        runner_id="ci",
    )
