"""Is a drafted property worth trusting? The acceptance rules (seed 001, step 2).

A property is accepted only when a hand-written mutant of the code under test kills
it. Two pure steps decide: the static lint of the test function
(``orchestrator.core.property_lint``) refuses what cannot be a property before any
container starts; then ``judge_replays(unmutated, mutant)`` turns the replay labels
of the unmutated and the mutated revision into an :class:`Outcome`.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from orchestrator.model import Label, Replay

ACCEPTANCE_SCHEMA = "acceptance/1"


class Outcome(StrEnum):
    """Every way an acceptance can end; the value is the ACCEPT event's code."""

    ACCEPTED = "accepted"
    CONSTANT_ASSERTION = "constant_assertion"
    SELF_COMPARISON = "self_comparison"
    NO_ASSERTION = "no_assertion"
    NO_CALL_UNDER_TEST = "no_call_under_test"
    FAILS_UNMUTATED = "fails_unmutated"
    MUTANT_SURVIVED = "mutant_survived"
    INFRA = "infra"

    @property
    def exit_status(self) -> int:
        """0 accepted, 3 infrastructure (undecided), 1 every refusal."""
        if self is Outcome.ACCEPTED:
            return 0
        if self is Outcome.INFRA:
            return 3
        return 1


def judge_replays(unmutated: Sequence[Replay], mutant: Sequence[Replay]) -> Outcome:
    """The dynamic verdict: passes on the revision, fails on the mutant, no infra noise.

    Infrastructure labels anywhere win (never an acceptance). Then the unmutated
    side must pass every replay, and the mutant must fail every replay: a mutant
    that only sometimes fails has not reliably died.
    """
    if not unmutated or not mutant:
        return Outcome.INFRA
    labels = [replay.label for replay in (*unmutated, *mutant)]
    # A skip is the project's own choice, no infrastructure: a skipped replay is no pass
    # on the revision and no kill on the mutant (the refusals below say so).
    if any(label != Label.SKIPPED and not Label.is_completed(label) for label in labels):
        return Outcome.INFRA
    if any(replay.label != Label.ASSERT_PASS for replay in unmutated):
        return Outcome.FAILS_UNMUTATED
    if any(replay.label != Label.ASSERT_FAIL for replay in mutant):
        return Outcome.MUTANT_SURVIVED
    return Outcome.ACCEPTED


def patch_paths(patch_text: str) -> tuple[str, ...]:
    """The files a unified diff touches (``--- a/x`` / ``+++ b/x`` headers), sorted."""
    paths: set[str] = set()
    for line in patch_text.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t", 1)[0].strip()
            if name == "/dev/null":
                continue
            if name.startswith(("a/", "b/")):
                name = name[2:]
            paths.add(name)
    return tuple(sorted(paths))
