"""Skips are a state (lanes.md row 4a): the project's own skip is neither a verdict nor
infrastructure, and a side that skipped every replay is decided, never lost."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from unit_factories import ASSERTION, evidence, replay

from orchestrator.core.calls import budget_changes
from orchestrator.core.lanes import decide
from orchestrator.core.screening import signal_reasons
from orchestrator.model import Evidence, Lane, Replay

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


@settings(max_examples=60, deadline=None)
@given(base=st.lists(ran, min_size=1, max_size=4))
def test_skipped_on_the_patch_only_is_shown_never_blocking(base: list[Replay]) -> None:
    decision = decide(sides(base, [skip()] * len(base)))
    assert (decision.lane, decision.code) == (Lane.NO_FREEZE, "skipped_on_patch")
    assert decision.reasons[0] == "skipped on the patch: needs BACKEND"


@settings(max_examples=60, deadline=None)
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


@settings(max_examples=100, deadline=None)
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
