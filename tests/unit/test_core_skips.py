"""Skips are a state (lanes.md row 4a): the project's own skip is neither a verdict nor
infrastructure, and a side that skipped every replay is decided, never lost."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples
from unit_factories import ASSERTION, evidence, replay

from orchestrator.core import labels
from orchestrator.core.calls import budget_changes
from orchestrator.core.labels import ContainerFacts, ReplayFile
from orchestrator.core.lanes import decide
from orchestrator.core.screening import signal_reasons
from orchestrator.model import Evidence, Lane, Replay
from orchestrator.probe import RESULT_SCHEMA, RUN_SCHEMA

P, F, T, H, S = "assert_pass", "assert_fail", "timeout", "harness_error", "skipped"


def skip(reason: str | None = "needs BACKEND") -> Replay:
    return Replay(label=S, message=reason)


def sides(base: list[Replay], patch: list[Replay]) -> Evidence:
    return evidence(base=tuple(base), patch=tuple(patch), replays=len(base))


ran = st.sampled_from([P, F]).map(replay)
any_side = st.lists(st.one_of(ran, st.just(skip())), min_size=1, max_size=4)


def test_skipped_on_both_sides_is_no_freeze_with_its_reason() -> None:
    decision = decide(sides([skip(), skip()], [skip(), skip("other")]))
    assert (decision.lane, decision.code) == (Lane.NO_FREEZE, "skipped")
    assert decision.reasons == ("skipped on both sides: needs BACKEND; other",)
    assert not decision.blocking
    assert not decision.freeze_allowed


def test_a_skip_without_a_reason_says_so() -> None:
    (reason,) = decide(sides([skip(None)], [skip("")])).reasons
    assert reason == "skipped on both sides: no reason given"


@settings(max_examples=examples(60), deadline=None)
@given(base=st.lists(ran, min_size=1, max_size=4))
def test_skipped_on_the_patch_only_is_shown_never_blocking(base: list[Replay]) -> None:
    decision = decide(sides(base, [skip()] * len(base)))
    assert (decision.lane, decision.code) == (Lane.NO_FREEZE, "skipped_on_patch")
    assert decision.reasons[0] == "skipped on the patch: needs BACKEND"


@settings(max_examples=examples(60), deadline=None)
@given(patch=st.lists(ran, min_size=1, max_size=4))
def test_skipped_on_base_only_judges_the_patch_alone(patch: list[Replay]) -> None:
    decision = decide(sides([skip()] * len(patch), patch))
    if all(r.label == P for r in patch):
        assert (decision.lane, decision.code) == (Lane.NO_FREEZE, "skipped_on_base")
    else:  # the suite's own CI is red on the patch
        assert (decision.lane, decision.code) == (
            Lane.PROPERTY_REGRESSION,
            "fails_where_base_skips",
        )
        assert ASSERTION in decision.reasons[1]
    assert decision.reasons[0] == "skipped on base: needs BACKEND"


@settings(max_examples=examples(100), deadline=None)
@given(base=any_side, patch=any_side, data=st.data())
def test_skipped_replays_beside_ones_that_ran_are_left_out(
    base: list[Replay], patch: list[Replay], data: st.DataObject
) -> None:
    # The same evidence with the skipped replays swapped for copies of ones that ran on
    # that side decides the same, whenever both sides ran at least once.
    ran_base = [r for r in base if r.label != S]
    ran_patch = [r for r in patch if r.label != S]
    if not ran_base or not ran_patch:
        return
    n = max(len(base), len(patch))
    base = (base * n)[:n]
    patch = (patch * n)[:n]
    filled_base = [r if r.label != S else data.draw(st.sampled_from(ran_base)) for r in base]
    filled_patch = [r if r.label != S else data.draw(st.sampled_from(ran_patch)) for r in patch]
    assert decide(sides(base, patch)) == decide(sides(filled_base, filled_patch))


def test_skipped_replays_are_not_infrastructure_and_carry_no_call_counts() -> None:
    base = [replay(P, calls={"clock": 1})] * 2
    patch = [replay(P, calls={"clock": 1}), skip()]
    assert budget_changes(base, patch) == ()
    decision = decide(sides(base, patch))
    assert (decision.lane, decision.code) == (Lane.NO_FREEZE, "not_reproduced")
    # A real infrastructure failure still wins over a skip.
    broken = decide(sides([skip(), skip()], [skip(), replay(H, reason="oom")]))
    assert decision.lane is not Lane.INFRA_QUEUE
    assert broken.lane is Lane.INFRA_QUEUE


def test_an_oracle_change_still_comes_first() -> None:
    ev = dataclasses.replace(sides([skip()], [replay(P)]), oracle_changed=True)
    assert decide(ev).lane is Lane.REJECT_RUN


def test_a_skip_alone_is_no_screening_signal() -> None:
    assert signal_reasons([skip()], [skip()], None) == ()
    assert signal_reasons([replay(P)], [skip()], None) == ()
    assert signal_reasons([skip()], [replay(F)], None) != ()


# -- labelling: a skipped test is found in the probe's skip list, not called absent ---------


def replay_file(tests: list[dict[str, Any]], skipped: list[dict[str, Any]]) -> ReplayFile:
    result = {"schema": RESULT_SCHEMA, "tests": tests, "skipped": skipped}
    doc = {"schema": RUN_SCHEMA, "replay": 1, "status": "completed", "result": result}
    return ReplayFile(replay=1, state="ok", doc=doc)


def not_found(nodeid: str) -> dict[str, Any]:
    return {"nodeid": nodeid, "label": H, "reason": "not_found", "calls": {}}


def test_a_test_the_run_skipped_is_labelled_skipped_with_its_reason() -> None:
    run = replay_file([], [{"nodeid": "t.py::T::test_a", "reason": "needs BACKEND_URL"}])
    label = labels.label_replay(run, ContainerFacts(), "t.py::T::test_a")
    assert (label.label, label.message, label.reason) == (S, "needs BACKEND_URL", None)
    absent = labels.label_replay(run, ContainerFacts(), "t.py::T::test_b")
    assert (absent.label, absent.reason) == (H, "not_found")
    assert labels.nodeids_seen([run]) == ("t.py::T::test_a",)


def test_a_module_that_skips_itself_skips_every_test_in_it() -> None:
    # pytest.importorskip at module level: the module's collector is skipped; a node id
    # under it that was handed to pytest is reported not found, the skip is the cause.
    run = replay_file(
        [not_found("tests/test_np.py::test_a")],
        [{"nodeid": "tests/test_np.py", "reason": "could not import 'numpy'"}],
    )
    for property_id in ("tests/test_np.py", "tests/test_np.py::test_a", "tests/test_np.py::T::b"):
        label = labels.label_replay(run, ContainerFacts(), property_id)
        assert (label.label, label.message) == (S, "could not import 'numpy'"), property_id
    other = labels.label_replay(run, ContainerFacts(), "tests/test_np2.py::test_a")
    assert other.label == H


segments = st.sampled_from(["a", "b", "t.py", "T", "test_x", "test_x[1]"])


@st.composite
def node_ids(draw: st.DrawFn) -> str:
    parts = draw(st.lists(segments, min_size=1, max_size=4))
    seps = draw(st.lists(st.sampled_from(["/", "::"]), min_size=len(parts), max_size=len(parts)))
    return "".join(sep + part for sep, part in zip(seps, parts, strict=True))[1:]


@given(skipped=st.lists(node_ids(), max_size=4), property_id=node_ids())
def test_the_skip_of_a_node_is_its_own_or_the_nearest_skipped_node_above_it(
    skipped: list[str], property_id: str
) -> None:
    index = labels.EntryIndex([], {node: f"why {node}" for node in skipped})
    above = [
        node
        for node in skipped
        if node == property_id or property_id.startswith((node + "::", node + "/"))
    ]
    found, reason = index.skip_of(property_id)
    assert found is bool(above)
    if above:
        nearest = property_id if property_id in skipped else max(above, key=len)
        assert reason == f"why {nearest}"


def test_a_module_that_skips_itself_is_kept_in_a_collected_selection() -> None:
    from orchestrator.core.side_spec import collected_selection

    found = [
        {"items": ["tests/test_a.py::test_x"], "errors": [], "skipped": ["tests/test_np.py"]},
        {"items": ["tests/test_a.py::test_x"], "errors": [], "skipped": []},
    ]
    assert collected_selection(found) == ("tests/test_a.py::test_x", "tests/test_np.py")
