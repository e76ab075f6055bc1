"""Call budgets: a side's sets of call counts, what moved between two sides, and its text."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import calls
from orchestrator.core.calls import CallChange
from orchestrator.model import Replay


def side(*counts: dict[str, int]) -> tuple[Replay, ...]:
    return tuple(Replay(label="assert_pass", calls=c) for c in counts)


def test_a_side_is_reduced_to_the_set_of_counts_per_dependency() -> None:
    sets = calls.call_sets(side({"clock": 1, "open": 2}, {"clock": 2}, {"clock": 1}))
    assert sets == {"clock": frozenset({1, 2}), "open": frozenset({0, 2})}
    assert calls.sets_to_json(sets) == {"clock": [1, 2], "open": [0, 2]}
    assert calls.unstable(sets) == sets
    assert calls.unstable(calls.call_sets(side({"clock": 1}, {"clock": 1}))) == {}


def test_a_dependency_one_side_never_called_counts_zero_there() -> None:
    moved = calls.budget_changes(side({"clock": 1, "open": 2}), side({"clock": 1, "sleep": 1}))
    assert moved == (
        CallChange(dependency="open", base=frozenset({2}), patch=frozenset({0})),
        CallChange(dependency="sleep", base=frozenset({0}), patch=frozenset({1})),
    )
    assert calls.budget_changes(side({"clock": 0}), side({})) == ()


def test_the_one_text_of_a_moved_dependency() -> None:
    change = CallChange(dependency="clock", base=frozenset({2, 1}), patch=frozenset({3}))
    assert calls.describe_change(change) == "clock: base {1, 2} vs patch {3}"
    assert calls.format_counts([]) == "{}"


def test_a_count_that_is_not_an_integer_is_a_bug_not_a_budget() -> None:
    with pytest.raises(TypeError):
        calls.call_sets(side({"clock": "many"}))  # type: ignore[dict-item]


# --- properties -------------------------------------------------------------------------

_counts = st.dictionaries(st.sampled_from(["clock", "open", "sleep"]), st.integers(0, 3))
_sides = st.lists(_counts, min_size=1, max_size=5).map(lambda counts: side(*counts))


@given(_sides, _sides)
def test_compare_is_symmetric_in_what_it_reports(base: Any, patch: Any) -> None:
    forward = calls.budget_changes(base, patch)
    backward = calls.budget_changes(patch, base)
    assert [(c.dependency, c.base, c.patch) for c in forward] == [
        (c.dependency, c.patch, c.base) for c in backward
    ]
    assert all(change.base != change.patch for change in forward)


@given(_sides)
def test_a_side_compared_with_itself_never_moved(replays: Any) -> None:
    assert calls.budget_changes(replays, replays) == ()


@given(_sides, st.randoms(use_true_random=False))
def test_order_and_repetition_of_replays_do_not_matter(replays: Any, rng: Any) -> None:
    shuffled = list(replays) * 2
    rng.shuffle(shuffled)
    assert calls.call_sets(shuffled) == calls.call_sets(replays)
    assert calls.budget_changes(replays, shuffled) == ()


@given(_sides, _sides)
def test_nothing_moved_exactly_when_every_dependency_shows_the_same_counts(
    base: Any, patch: Any
) -> None:
    names = {name for replay in (*base, *patch) for name in replay.calls}
    same = all(
        {r.calls.get(name, 0) for r in base} == {r.calls.get(name, 0) for r in patch}
        for name in names
    )
    assert (calls.budget_changes(base, patch) == ()) is same
