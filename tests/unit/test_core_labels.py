"""Labelling one replay from its result file's state and the container's facts (pure).

Reading the files from disk is tests/replay/test_results.py; here the files are values.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import labels
from orchestrator.core.labels import ContainerFacts, ReplayFile
from orchestrator.model import KNOWN_LABELS, Label, Replay
from orchestrator.probe import RESULT_SCHEMA, RUN_SCHEMA

PROP = "tests/test_x.py::test_y"
OTHER = "tests/test_x.py::test_z"
IMAGE = "sha256:" + "c" * 64
MISSING = ReplayFile(replay=1, state="missing")


@pytest.mark.parametrize(
    ("facts", "label", "reason"),
    [
        (ContainerFacts(engine_error="engine_gone"), "harness_error", "engine_gone"),
        (ContainerFacts(engine_error="docker_api"), "harness_error", "docker_api"),
        (ContainerFacts(engine_error="image_not_found"), "harness_error", "image_not_found"),
        (ContainerFacts(exit_code=137, oom_killed=True), "harness_error", "oom"),
        (ContainerFacts(exit_code=137, killed_at_deadline=True), "timeout", "deadline"),
        (ContainerFacts(exit_code=137), "harness_error", "signal"),
        (ContainerFacts(exit_code=1), "harness_error", "no_result"),
        (ContainerFacts(exit_code=137, cancelled=True), "harness_error", "interrupted"),
    ],
)
def test_an_unfinished_replay_is_labelled_from_the_containers_facts(
    facts: ContainerFacts, label: str, reason: str
) -> None:
    replay = labels.label_replay(MISSING, facts, PROP)
    assert (replay.label, replay.reason) == (label, reason)


def test_a_replay_without_result_says_why_as_pytest_printed_it() -> None:
    doc = {
        "schema": RUN_SCHEMA,
        "status": "no_result",
        "exit_code": 4,
        "output_tail": "ERROR: usage: pytest [options]\n\n"
        "pytest: error: unrecognized arguments: --cov=pkg\n  inifile: /src/setup.cfg",
    }
    replay = labels.label_replay(ReplayFile(replay=1, state="ok", doc=doc), ContainerFacts(), PROP)
    assert (replay.label, replay.reason) == ("harness_error", "no_result")
    assert replay.message == (
        "pytest exited 4 (usage error) and wrote no result: ERROR: usage: pytest [options]"
        " | pytest: error: unrecognized arguments: --cov=pkg | inifile: /src/setup.cfg"
    )


@pytest.mark.parametrize(
    ("status", "exit_code", "tail", "message"),
    [
        ("no_result", 3, None, "pytest exited 3 (internal error) and wrote no result"),
        ("no_result", 1, "", "pytest exited 1 and wrote no result"),
        ("corrupt_result", 0, "x", "pytest exited 0 and reported corrupt_result: x"),
        ("no_result", None, "boom", "the driver wrote no result: boom"),
        ("no_result", True, None, "the driver wrote no result"),
        ("no_result", 4, 17, "pytest exited 4 (usage error) and wrote no result"),
    ],
)
def test_the_no_result_message_is_one_line_of_facts(
    status: str, exit_code: Any, tail: Any, message: str
) -> None:
    assert labels.no_result_message(status, exit_code, tail) == message


def test_only_a_replay_without_result_is_explained_and_a_usage_error_says_what_to_do() -> None:
    for status in ("completed", "timeout"):
        assert labels.without_result({"status": status, "exit_code": 1}) is None
    crashed = labels.without_result({"status": "no_result", "exit_code": 3})
    assert crashed == ("pytest exited 3 (internal error) and wrote no result", None)
    refused = labels.without_result({"status": "no_result", "exit_code": 4, "output_tail": "x"})
    assert refused is not None
    assert refused[0] == "pytest exited 4 (usage error) and wrote no result: x"
    assert refused[1] is not None
    assert "orchestrator image build" in refused[1]


@given(st.text(), st.none() | st.integers())
def test_the_no_result_message_is_one_bounded_line(tail: str, exit_code: int | None) -> None:
    message = labels.no_result_message("no_result", exit_code, tail)
    assert len(message.splitlines()) == 1
    assert len(message) <= 1100


def test_image_mismatch_turns_every_replay_into_harness_error() -> None:
    labelled = {PROP: (Replay(label="assert_pass", assertion_id=None),) * 2}
    marked = labels.mark_image_mismatch(labelled, IMAGE, ["sha256:other", IMAGE])
    assert [(r.label, r.reason) for r in marked[PROP]] == [("harness_error", "image_mismatch")] * 2
    assert "sha256:other" in (marked[PROP][0].message or "")


def test_the_documents_schema_ids_are_the_probes_own() -> None:
    assert labels.run_doc_problem({"schema": "replay-run/0", "status": "timeout"}) == (
        f"schema is 'replay-run/0', expected {RUN_SCHEMA!r}"
    )
    result = {"schema": "replay-probe/0", "tests": []}
    assert labels.probe_doc_problem(result) == (
        f"result schema is 'replay-probe/0', expected {RESULT_SCHEMA!r}"
    )


# --- properties over every state a result file can be in ---------------------------------

_node_ids = st.sampled_from([PROP, OTHER, "tests/test_x.py", "tests", "<session>", ""])
_entries = st.fixed_dictionaries(
    {"nodeid": _node_ids, "label": st.sampled_from(sorted(KNOWN_LABELS))},
    optional={
        "reason": st.none() | st.sampled_from(["not_found", "collection_error", "usage_error"]),
        "assertion_id": st.none() | st.just(f"{PROP}@tests/test_x.py:3:AssertionError"),
        "message": st.none() | st.text(max_size=5),
        "calls": st.dictionaries(st.sampled_from(["clock", "open"]), st.integers(0, 5)),
        "duration_ms": st.none() | st.floats(0, 1e4) | st.integers(0, 10_000),
    },
)
_completed_docs = st.builds(
    lambda tests, code: {
        "schema": RUN_SCHEMA,
        "status": "completed",
        "exit_code": code,
        "result": {"schema": RESULT_SCHEMA, "tests": tests},
    },
    st.lists(_entries, max_size=4),
    st.sampled_from([0, 1]),
)
_unfinished_docs = st.builds(
    lambda status, code, tail: {
        "schema": RUN_SCHEMA,
        "status": status,
        "exit_code": code,
        **({} if tail is None else {"output_tail": tail}),
    },
    st.sampled_from(["timeout", "no_result", "corrupt_result"]),
    st.none() | st.integers(-15, 255),
    st.none() | st.text(max_size=40) | st.integers(),
)
_files = st.one_of(
    (_completed_docs | _unfinished_docs).map(lambda doc: ReplayFile(replay=1, state="ok", doc=doc)),
    st.just(MISSING),
    st.builds(
        ReplayFile, replay=st.just(1), state=st.just("corrupt"), problem=st.none() | st.text()
    ),
)
_facts = st.builds(
    ContainerFacts,
    image_id=st.none() | st.just(IMAGE),
    exit_code=st.none() | st.integers(0, 255),
    oom_killed=st.booleans(),
    killed_at_deadline=st.booleans(),
    cancelled=st.booleans(),
    engine_error=st.none() | st.sampled_from(["docker_api", "engine_gone", "image_not_found"]),
    message=st.none() | st.text(max_size=5),
)


def _completed_result(replay_file: ReplayFile) -> bool:
    return replay_file.doc is not None and replay_file.doc["status"] == "completed"


@given(_files, _facts, _node_ids)
def test_label_replay_is_total_over_every_file_state(
    replay_file: ReplayFile, facts: ContainerFacts, property_id: str
) -> None:
    if replay_file.doc is not None:
        assert labels.run_doc_problem(replay_file.doc) is None  # the strategy makes good files
    replay = labels.label_replay(replay_file, facts, property_id)
    assert replay.label in KNOWN_LABELS
    assert labels.label_replay(replay_file, facts, property_id) == replay


@given(_files, _facts, _node_ids)
def test_only_a_completed_result_can_give_a_verdict(
    replay_file: ReplayFile, facts: ContainerFacts, property_id: str
) -> None:
    replay = labels.label_replay(replay_file, facts, property_id)
    if not _completed_result(replay_file):
        assert not Label.is_completed(replay.label)
        assert replay.reason  # a replay without a verdict always says why
        assert replay.assertion_id is None


@given(_files, _facts, _node_ids)
def test_a_missing_or_corrupt_file_never_trusts_the_exit_status(
    replay_file: ReplayFile, facts: ContainerFacts, property_id: str
) -> None:
    replay = labels.label_replay(replay_file, facts, property_id)
    if replay_file.state == "corrupt":
        assert replay.reason == ("oom" if facts.oom_killed else "corrupt_result")
    if replay_file.state == "missing" and facts.engine_error is not None:
        assert replay.reason == facts.engine_error


@given(st.lists(st.tuples(_files, _facts), max_size=4), st.lists(_node_ids, max_size=3))
def test_label_replays_labels_every_property_in_every_replay_and_stamps_it(
    observed: list[tuple[ReplayFile, ContainerFacts]], property_ids: list[str]
) -> None:
    labelled = labels.label_replays(observed, property_ids, runner_id="ci-7")
    assert set(labelled) == set(property_ids)
    for property_id, replays in labelled.items():
        assert len(replays) == len(observed)
        for replay, (replay_file, facts) in zip(replays, observed, strict=True):
            assert (replay.image_digest, replay.runner_id) == (facts.image_id, "ci-7")
            unstamped = labels.label_replay(replay_file, facts, property_id)
            assert (replay.label, replay.reason) == (unstamped.label, unstamped.reason)


@given(st.lists(st.tuples(_files, _facts), max_size=3))
def test_an_image_mismatch_leaves_no_verdict_standing(
    observed: list[tuple[ReplayFile, ContainerFacts]],
) -> None:
    labelled = labels.label_replays(observed, [PROP, OTHER], runner_id="r")
    marked = labels.mark_image_mismatch(labelled, IMAGE, [facts.image_id for _, facts in observed])
    assert {key: len(value) for key, value in marked.items()} == {
        key: len(value) for key, value in labelled.items()
    }
    replays: list[Any] = [replay for side in marked.values() for replay in side]
    assert all(
        (r.label, r.reason, r.assertion_id) == ("harness_error", "image_mismatch", None)
        for r in replays
    )


# ---------------------------------------------------------------- the entry index

NODE_PARTS = st.sampled_from(["", "/", "tests", "tests/", "tests/a.py", "tests/a.py::T", "b.py"])


def naive_entry_for(tests, property_id):
    """The linear scan the index replaces (labels.py before EntryIndex)."""
    exact = [entry for entry in tests if entry["nodeid"] == property_id]
    above = [
        entry
        for entry in tests
        if entry["label"] == "harness_error"
        and entry["nodeid"] != property_id
        and labels._encloses(entry["nodeid"], property_id)
    ]
    if exact and not (exact[-1].get("reason") == "not_found" and above):
        return exact[-1]
    if above:
        return above[0]
    return None


@st.composite
def node_ids(draw):
    parent = draw(NODE_PARTS)
    child = draw(st.sampled_from(["", "::t", "::T::t", "/c.py::t", "::t[a::b]", "<session>"]))
    return parent + child


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "nodeid": node_ids(),
                "label": st.sampled_from(["assert_pass", "harness_error"]),
                "reason": st.sampled_from([None, "not_found", "collection_error"]),
            }
        ),
        max_size=12,
    ),
    node_ids(),
)
def test_the_entry_index_finds_what_a_scan_of_every_entry_finds(tests, property_id):
    index = labels.EntryIndex(tests)
    assert labels._entry_for(property_id, index) is naive_entry_for(tests, property_id)


def _run_doc(result: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {"schema": RUN_SCHEMA, "replay": 1, "status": status, "result": result}


def test_skipped_in_reads_the_probe_skip_list() -> None:
    result = {
        "schema": RESULT_SCHEMA,
        "tests": [],
        "skipped": [{"nodeid": "t.py::test_a", "reason": "no user record"}],
    }
    ok = ReplayFile(replay=1, state="ok", doc=_run_doc(result))
    assert labels.skipped_in(ok, "t.py::test_a")
    assert not labels.skipped_in(ok, "t.py::test_b")
    assert not labels.skipped_in(ReplayFile(replay=1, state="missing"), "t.py::test_a")
    timed_out = ReplayFile(replay=1, state="ok", doc=_run_doc(None, "timeout"))
    assert not labels.skipped_in(timed_out, "t.py::test_a")
    no_list = ReplayFile(replay=1, state="ok", doc=_run_doc({"schema": RESULT_SCHEMA, "tests": []}))
    assert not labels.skipped_in(no_list, "t.py::test_a")
