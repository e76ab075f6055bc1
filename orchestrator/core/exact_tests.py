"""Exact tests of "the patch is worse than base" for replays of one property. Pure.

Both tests are conditional on what the two sides saw together (the pooled outcomes),
so they make no assumption about the failure rate or the distribution of call counts:
under the null hypothesis that a replay's outcome does not depend on the side it ran on
(the replays of both sides are exchangeable), every way of dealing the pooled outcomes
into a base side and a patch side of the observed sizes is equally likely, and the
p-value is the share of those deals at least as extreme as the one observed. That makes
each p-value valid at any level: P(p <= a) <= a under the null (docs/lanes.md,
"Evidence for a verdict on a mixed side").

- :func:`fisher_one_sided`: the patch failed more often than base (Fisher's exact test,
  one-sided): the hypergeometric tail of the patch's share of the pooled failures.
- :func:`split_test`: some outcome (a call count, or a failing assertion) was seen on one
  side only: a permutation test whose statistic is the number of replays whose outcome
  the other side never showed, summed exactly over the deals by dynamic programming
  over the distinct outcomes (never sampled).

Integers throughout; the one division is the last step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Mapping, Sequence
from math import comb


def fisher_one_sided(
    *, patch_failed: int, patch_runs: int, base_failed: int, base_runs: int
) -> float:
    """P(the patch gets at least ``patch_failed`` of the pooled failures) when the pooled
    failures fall on the replays at random: the one-sided Fisher exact p-value."""
    _check(patch_failed, patch_runs)
    _check(base_failed, base_runs)
    failed, runs = patch_failed + base_failed, patch_runs + base_runs
    top = min(failed, patch_runs)
    tail = sum(
        comb(patch_runs, x) * comb(base_runs, failed - x) for x in range(patch_failed, top + 1)
    )
    return tail / comb(runs, failed)


def fisher_floor(*, failed: int, patch_runs: int, base_runs: int) -> float:
    """The smallest p-value :func:`fisher_one_sided` can give with ``failed`` pooled
    failures (every failure that fits on the patch): 1 with none."""
    runs = patch_runs + base_runs
    if not 0 <= failed <= runs:
        raise ValueError(f"{failed} failures in {runs} runs")
    on_patch = min(failed, patch_runs)
    return comb(patch_runs, on_patch) * comb(base_runs, failed - on_patch) / comb(runs, failed)


def split_test(
    base: Sequence[Hashable],
    patch: Sequence[Hashable],
    *,
    counted: Collection[Hashable] | None = None,
) -> float:
    """The exact permutation p-value of "the sides showed different outcomes".

    The statistic is the number of replays whose outcome the other side never showed
    (only outcomes in ``counted`` count; all of them when None): 0 when both sides show
    the same set of outcomes. Its p-value is the share of the deals of the pooled
    outcomes into sides of the observed sizes whose statistic is at least the observed
    one. A one-sided test of either direction: a count the patch shows and base never
    did counts as much as one base shows and the patch never does (lanes.md row 5
    compares the sets of counts both ways)."""
    pooled = Counter([*base, *patch])
    on_base = Counter(base)
    on_patch = Counter(patch)

    def weight(outcome: Hashable) -> bool:
        return counted is None or outcome in counted

    observed = sum(
        count
        for outcome, count in pooled.items()
        if weight(outcome) and (on_base[outcome] == 0 or on_patch[outcome] == 0)
    )
    if observed == 0:
        return 1.0
    return _tail(
        [(count, weight(outcome)) for outcome, count in sorted(pooled.items(), key=repr)],
        base_size=len(base),
        observed=observed,
    )


def split_floor(
    outcomes: Mapping[Hashable, int],
    *,
    base_runs: int,
    counted: Collection[Hashable] | None = None,
) -> float:
    """The smallest p-value :func:`split_test` can give for these pooled outcome counts
    dealt into a base side of ``base_runs`` replays (1: no deal can be extreme)."""
    items = [
        (count, counted is None or outcome in counted)
        for outcome, count in sorted(outcomes.items(), key=repr)
    ]
    best = _best_statistic(items, base_size=base_runs)
    if best == 0:
        return 1.0
    return _tail(items, base_size=base_runs, observed=best)


def _tail(items: Sequence[tuple[int, bool]], *, base_size: int, observed: int) -> float:
    """Sum over the deals (how many of each outcome go to base, adding up to
    ``base_size``) with statistic >= ``observed``, of the ways each deal can happen;
    the statistic only grows, so it is tracked up to ``observed``."""
    total = sum(count for count, _ in items)
    # (replays dealt to base so far, statistic so far, capped at observed) -> ways
    states: dict[tuple[int, int], int] = {(0, 0): 1}
    for count, counted in items:
        step: dict[tuple[int, int], int] = {}
        for (dealt, statistic), ways in states.items():
            for to_base in range(0, min(count, base_size - dealt) + 1):
                whole_on_one_side = to_base in (0, count)
                gained = count if counted and whole_on_one_side else 0
                key = (dealt + to_base, min(observed, statistic + gained))
                step[key] = step.get(key, 0) + ways * comb(count, to_base)
        states = step
    extreme = sum(
        ways
        for (dealt, statistic), ways in states.items()
        if dealt == base_size and statistic >= observed
    )
    return extreme / comb(total, base_size)


def _best_statistic(items: Sequence[tuple[int, bool]], *, base_size: int) -> int:
    """The largest statistic any deal reaches (the most extreme deal possible)."""
    states: dict[int, int] = {0: 0}  # replays dealt to base -> best statistic so far
    for count, counted in items:
        step: dict[int, int] = {}
        for dealt, statistic in states.items():
            for to_base in range(0, min(count, base_size - dealt) + 1):
                gained = count if counted and to_base in (0, count) else 0
                key = dealt + to_base
                step[key] = max(step.get(key, -1), statistic + gained)
        states = step
    return states.get(base_size, 0)


def _check(failed: int, runs: int) -> None:
    if not 0 <= failed <= runs:
        raise ValueError(f"{failed} failures in {runs} runs")
