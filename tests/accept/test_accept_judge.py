"""The dynamic verdict: accepted only when the unmutated revision passes and the mutant dies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.acceptance import Outcome, judge_replays
from orchestrator.model import Label, Replay


def replays(*labels: str) -> tuple[Replay, ...]:
    return tuple(Replay(label=label) for label in labels)


PASS, FAIL = Label.ASSERT_PASS.value, Label.ASSERT_FAIL.value
TIMEOUT, HARNESS = Label.TIMEOUT.value, Label.HARNESS_ERROR.value
SKIPPED = Label.SKIPPED.value


@pytest.mark.parametrize(
    ("unmutated", "mutant", "outcome"),
    [
        ((PASS, PASS), (FAIL, FAIL), Outcome.ACCEPTED),
        ((PASS, FAIL), (FAIL, FAIL), Outcome.FAILS_UNMUTATED),
        ((FAIL, FAIL), (FAIL, FAIL), Outcome.FAILS_UNMUTATED),
        ((PASS, PASS), (PASS, PASS), Outcome.MUTANT_SURVIVED),
        ((PASS, PASS), (FAIL, PASS), Outcome.MUTANT_SURVIVED),
        ((PASS, TIMEOUT), (FAIL, FAIL), Outcome.INFRA),
        ((PASS, PASS), (FAIL, HARNESS), Outcome.INFRA),
        ((FAIL,), (HARNESS,), Outcome.INFRA),  # infra wins over a refusal
        ((PASS,), ("garbled",), Outcome.INFRA),
        ((), (FAIL,), Outcome.INFRA),
        ((PASS,), (), Outcome.INFRA),
        # The project's skip is no infrastructure: no pass on the revision, no kill.
        ((SKIPPED, SKIPPED), (FAIL, FAIL), Outcome.FAILS_UNMUTATED),
        ((PASS, PASS), (SKIPPED, SKIPPED), Outcome.MUTANT_SURVIVED),
        ((SKIPPED,), (HARNESS,), Outcome.INFRA),
    ],
)
def test_judge_replays(
    unmutated: tuple[str, ...], mutant: tuple[str, ...], outcome: Outcome
) -> None:
    assert judge_replays(replays(*unmutated), replays(*mutant)) is outcome


labels = st.sampled_from([PASS, FAIL, TIMEOUT, HARNESS, SKIPPED])


@given(st.lists(labels, min_size=1, max_size=6), st.lists(labels, min_size=1, max_size=6))
def test_accepted_exactly_when_all_pass_then_all_fail(
    unmutated: list[str], mutant: list[str]
) -> None:
    outcome = judge_replays(replays(*unmutated), replays(*mutant))
    accepted = all(label == PASS for label in unmutated) and all(label == FAIL for label in mutant)
    assert (outcome is Outcome.ACCEPTED) == accepted
    infra = any(label in (TIMEOUT, HARNESS) for label in unmutated + mutant)
    assert (outcome is Outcome.INFRA) == infra


def test_exit_statuses() -> None:
    assert Outcome.ACCEPTED.exit_status == 0
    assert Outcome.INFRA.exit_status == 3
    refusals = set(Outcome) - {Outcome.ACCEPTED, Outcome.INFRA}
    assert {outcome.exit_status for outcome in refusals} == {1}
