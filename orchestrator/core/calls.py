"""Call budgets: which call counts a side's replays showed, and what moved between sides.

The probe counts each dependency call (clock reads, sleeps, file opens, sockets,
subprocesses) per replay. A side's budget is, per dependency, the *set* of counts its
replays showed (a replay that never called it counts 0): order and multiplicity do
not matter, so a count that varies the same way on both sides is not a change
(lanes.md row 5). Everything that speaks of call budgets uses this module: the
decision (row 5), the replay report and the flake thaw verdict; :func:`describe_change`
and :func:`format_counts` are the one way they are written as text.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from orchestrator.model import Label, Replay

CallSets = Mapping[str, frozenset[int]]
NEVER_CALLED = frozenset({0})


@dataclass(frozen=True, kw_only=True)
class CallChange:
    """One dependency whose set of call counts differs between base and patch."""

    dependency: str
    base: frozenset[int]
    patch: frozenset[int]


def call_sets(replays: Iterable[Replay]) -> dict[str, frozenset[int]]:
    """Dependency -> the distinct counts the replays showed (0 for a replay that never
    called it), for every dependency any of them called. A count that is not an integer
    is a programming error (``parse_evidence`` never builds one) and raises TypeError.
    A skipped replay is left out: its body did not run (or not to the end)."""
    replays = tuple(replay for replay in replays if replay.label != Label.SKIPPED)
    if replays and all(replay.calls is replays[0].calls for replay in replays):
        # One set of counts shared by every replay (labels.SharedValues): most of a suite.
        return dict(_single(tuple(replays[0].calls.items())))
    names = {name for replay in replays for name in replay.calls}
    return {
        name: frozenset(operator.index(replay.calls.get(name, 0)) for replay in replays)
        for name in sorted(names)
    }


@lru_cache(maxsize=256)
def _single(counts: tuple[tuple[str, int], ...]) -> dict[str, frozenset[int]]:
    """:func:`call_sets` of replays that all showed ``counts`` (never changed: copied)."""
    return {name: frozenset({operator.index(count)}) for name, count in sorted(counts)}


def compare(base: CallSets, patch: CallSets) -> tuple[CallChange, ...]:
    """Every dependency whose set of counts moved, by name; one side's absent dependency
    was never called there (``{0}``)."""
    changes = []
    for dependency in sorted({*base, *patch}):
        before = base.get(dependency, NEVER_CALLED)
        after = patch.get(dependency, NEVER_CALLED)
        if before != after:
            changes.append(CallChange(dependency=dependency, base=before, patch=after))
    return tuple(changes)


def budget_changes(base: Iterable[Replay], patch: Iterable[Replay]) -> tuple[CallChange, ...]:
    """The moved dependencies between two sides' replays (lanes.md row 5); none when a
    side has no replay that ran (every one skipped): there is nothing to compare."""
    base, patch = tuple(base), tuple(patch)
    if not any(r.label != Label.SKIPPED for r in base) or not any(
        r.label != Label.SKIPPED for r in patch
    ):
        return ()
    return compare(call_sets(base), call_sets(patch))


def unstable(sets: CallSets) -> dict[str, frozenset[int]]:
    """The dependencies whose count was not the same in every replay of one side."""
    return {dependency: counts for dependency, counts in sets.items() if len(counts) > 1}


def sets_to_json(sets: CallSets) -> dict[str, list[int]]:
    """``{"clock": [1, 2]}``: the sets as sorted lists, by dependency name."""
    return {dependency: sorted(sets[dependency]) for dependency in sorted(sets)}


def format_counts(counts: Iterable[int]) -> str:
    """``{1, 2}``."""
    return "{" + ", ".join(str(count) for count in sorted(counts)) + "}"


def describe_change(change: CallChange) -> str:
    """``clock: base {1} vs patch {2}``: a moved dependency as a reason, a report's delta
    or a table cell (records.md shows it in a decision's reasons)."""
    return (
        f"{change.dependency}: base {format_counts(change.base)}"
        f" vs patch {format_counts(change.patch)}"
    )
