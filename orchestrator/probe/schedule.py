"""Splitting tests across workers by recorded durations. Pure; standard library only.

The probe's workers (``orchestrator/probe/share.py``) split a replay's collected tests with
:func:`split_by_module`, each worker computing the same split from the same inputs, and the
host (``orchestrator/core/schedule.py``, which re-exports these) uses the same functions to
order and shard work. A test is named by its pytest node id; its module is the part before
the first ``::`` (a file path relative to the rootdir).

Rules:

- A test's cost is its recorded duration in milliseconds; a test without one counts as the
  average of the known tests among those being split (all tests equal when none is known).
- Tests of one module always go to the same bin, in the order they were given, so
  module-level state behaves as in one process.
- Modules are placed longest first, each into the bin with the least cost so far (on
  ties the one holding fewer modules, then the lowest index): longest-processing-time (LPT)
  scheduling, whose longest bin is within
  4/3 of the best possible one, and never more than the average bin plus the longest module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

# The cost of every test when nothing at all is known: then bins balance by count.
UNKNOWN_COST_MS: Final = 1.0


def module_of(test_id: str) -> str:
    """``tests/test_a.py::TestX::test_y[1]`` -> ``tests/test_a.py``."""
    return test_id.split("::", 1)[0]


def estimated_costs(test_ids: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Each test's cost: its recorded duration (ms), or the average of the known ones.

    Negative or non-finite records are ignored (treated as unknown).
    """
    known = {
        test_id: float(durations[test_id])
        for test_id in test_ids
        if test_id in durations and _usable(durations[test_id])
    }
    average = sum(known.values()) / len(known) if known else UNKNOWN_COST_MS
    return {test_id: known.get(test_id, average) for test_id in test_ids}


def _usable(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return 0.0 <= float(value) < float("inf")


def longest_first(costs: Mapping[str, float]) -> tuple[str, ...]:
    """Keys by decreasing cost; equal costs keep the mapping's order (a stable sort)."""
    order = {key: index for index, key in enumerate(costs)}
    return tuple(sorted(costs, key=lambda key: (-costs[key], order[key])))


def assign_longest_first(costs: Mapping[str, float], bins: int) -> dict[str, int]:
    """LPT: key -> bin index (0-based), the longest key first into the least-loaded bin."""
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    loads = [0.0] * bins
    sizes = [0] * bins
    placed: dict[str, int] = {}
    for key in longest_first(costs):
        # Equal loads (free keys) go to the bin holding fewer keys, then the lowest index.
        target = min(range(bins), key=lambda index: (loads[index], sizes[index], index))
        placed[key] = target
        loads[target] += costs[key]
        sizes[target] += 1
    return placed


def module_costs(test_ids: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Module -> the summed cost of its tests, modules in the order they first appear."""
    costs = estimated_costs(test_ids, durations)
    modules: dict[str, float] = {}
    for test_id in test_ids:
        module = module_of(test_id)
        modules[module] = modules.get(module, 0.0) + costs[test_id]
    return modules


def split_by_module(
    test_ids: Sequence[str], durations: Mapping[str, float], bins: int
) -> tuple[tuple[str, ...], ...]:
    """``bins`` lists of tests: whole modules, placed longest first (LPT), each list in
    the given order. Some lists are empty when there are fewer modules than bins."""
    placed = assign_longest_first(module_costs(test_ids, durations), bins)
    split: list[list[str]] = [[] for _ in range(bins)]
    for test_id in test_ids:
        split[placed[module_of(test_id)]].append(test_id)
    return tuple(tuple(part) for part in split)


def bin_costs(
    split: Sequence[Sequence[str]], test_ids: Sequence[str], durations: Mapping[str, float]
) -> tuple[float, ...]:
    """The estimated cost of each bin of a split (unknown tests at the average)."""
    costs = estimated_costs(test_ids, durations)
    return tuple(sum(costs[test_id] for test_id in part) for part in split)
