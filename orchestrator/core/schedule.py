"""Scheduling from recorded durations: what runs where, and in which order. Pure.

Durations are milliseconds per pytest node id, measured by earlier replays of the same
repository (``orchestrator.services.durations`` keeps them). A test without a record costs
the average of the known tests among those being scheduled (every test the same when none
is known).

- :func:`order_longest_first`: node ids by decreasing recorded duration (LPT order), so
  that the end of a run is not one long test on one core;
- :func:`split_by_module`: J lists of whole modules, placed longest first into the
  least-loaded list (LPT); the probe's workers split a replay with this very function
  (it lives in ``orchestrator/probe/schedule.py``, standard library only, and is
  re-exported here);
- :func:`shard`: list ``index`` of ``count`` of that split (``--shard I/N``);
- :func:`measured_durations` / :func:`merge_durations`: what a run measured, folded into
  what was recorded before;
- :func:`default_jobs`, :func:`screening_jobs` and :func:`container_limits`: how many
  pytest workers a side runs and the container limits that go with them.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from orchestrator.errors import SchemaError
from orchestrator.model import Label, Replay
from orchestrator.probe.schedule import (
    UNKNOWN_COST_MS,
    assign_longest_first,
    bin_costs,
    estimated_costs,
    longest_first,
    module_costs,
    module_of,
    split_by_module,
)

__all__ = [
    "DURATIONS_SCHEMA",
    "UNKNOWN_COST_MS",
    "ContainerLimits",
    "assign_longest_first",
    "bin_costs",
    "container_limits",
    "default_jobs",
    "durations_document",
    "estimated_costs",
    "longest_first",
    "measured_durations",
    "merge_durations",
    "module_costs",
    "module_of",
    "order_longest_first",
    "parse_durations_document",
    "screening_jobs",
    "shard",
    "split_by_module",
]

DURATIONS_SCHEMA = "replay-durations/1"
# One worker's share of the container (the replay defaults before --jobs existed).
MEMORY_PER_JOB_MB = 512
# pytest itself holds every collected test (and its report) for the session: about 5 KB
# a small test (533 MB at 100,000, plain pytest). Past this many recorded tests each
# worker gets MEMORY_PER_TEST_KB more per test.
TESTS_IN_BASE_MEMORY = 50_000
MEMORY_PER_TEST_KB = 6
# --memory: what a container may be given, as a size (docker's units).
MIN_MEMORY_MB = 64
MAX_MEMORY_MB = 1024 * 1024
_MEMORY = re.compile(r"\s*([0-9]{1,9})\s*([kmg]?)b?\s*", re.IGNORECASE)
_UNIT_KB = {"": 1 / 1024, "k": 1, "m": 1024, "g": 1024 * 1024}
PIDS_PER_JOB = 256
CPUS_PER_JOB = 1.0
# A whole suite whose recorded tests take this long (the longer side's, summed) is split
# across every CPU of the engine when its screening may be reused (screening_jobs): a
# worker's own collection and start-up, paid once per worker, is then small beside it.
SPLIT_FROM_MS = 60_000.0


def order_longest_first(test_ids: Sequence[str], durations: Mapping[str, float]) -> tuple[str, ...]:
    """``test_ids`` by decreasing recorded duration; unknown ones at the average, ties in
    the given order."""
    return longest_first(estimated_costs(test_ids, durations))


def shard(
    test_ids: Sequence[str], durations: Mapping[str, float], index: int, count: int
) -> tuple[str, ...]:
    """Shard ``index`` (1-based) of ``count``: the tests :func:`split_by_module` puts in
    that list, in the given order. The shards of one input are disjoint and cover it."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index} is not in 1..{count}")
    return split_by_module(test_ids, durations, count)[index - 1]


def default_jobs(engine_cpus: int | None, sides: int = 2) -> int:
    """The engine's CPUs divided between the sides that run at once, at least 1."""
    if not engine_cpus or engine_cpus < 1:
        return 1
    return max(1, engine_cpus // max(1, sides))


def screening_jobs(
    engine_cpus: int | None, *, sides: int, recorded_ms: float, reusable: bool
) -> int:
    """The default workers per side (``--jobs`` not given; docs/lanes.md section 10,
    "Workers"). The engine's CPUs divided between the sides that run at once
    (:func:`default_jobs`), unless the run's screening may be stored for reuse and the
    suite's recorded tests take at least :data:`SPLIT_FROM_MS`: then every CPU of the
    engine per side. Workers are part of a side's reuse key, so the count must not
    depend on whether the other side is reused; with every CPU, a run whose base is reused
    screens its patch on the whole engine (about half the time), and a run that screens
    both sides pays each worker's own collection once more, small beside such a suite's
    tests. Pure."""
    paired = default_jobs(engine_cpus, sides)
    if not reusable or recorded_ms < SPLIT_FROM_MS:
        return paired
    return max(paired, default_jobs(engine_cpus, 1))


@dataclass(frozen=True, kw_only=True)
class ContainerLimits:
    memory: str
    pids: int
    cpus: float


def container_limits(
    jobs: int, engine_cpus: int | None, *, tests: int = 0, memory_mb: int | None = None
) -> ContainerLimits:
    """Limits of a side's container running ``jobs`` workers: memory and pids per worker,
    one CPU per worker, never more CPUs than the engine has (it refuses more). A worker
    collects the whole selection: past :data:`TESTS_IN_BASE_MEMORY` recorded ``tests``
    each gets :data:`MEMORY_PER_TEST_KB` more per test. ``memory_mb`` (``--memory``)
    is the container's, whatever the rest."""
    jobs = max(1, jobs)
    cpus = CPUS_PER_JOB * jobs
    if engine_cpus:
        cpus = min(cpus, float(engine_cpus))
    if memory_mb is None:
        extra_kb = max(0, tests - TESTS_IN_BASE_MEMORY) * MEMORY_PER_TEST_KB
        memory_mb = (MEMORY_PER_JOB_MB + -(-extra_kb // 1024)) * jobs
    return ContainerLimits(memory=f"{memory_mb}m", pids=PIDS_PER_JOB * jobs, cpus=cpus)


def memory_mb(text: str) -> int:
    """``--memory`` as megabytes: a whole number with an optional unit (``k``, ``m``,
    ``g``; bytes without one), as docker takes it, rounded up to a megabyte; a
    ``ValueError`` saying what it takes for anything else or outside
    :data:`MIN_MEMORY_MB` to :data:`MAX_MEMORY_MB`."""
    match = _MEMORY.fullmatch(text)
    if match is None:
        raise ValueError(f"--memory {text!r}: a size such as 768m or 2g")
    size_kb = int(match.group(1)) * _UNIT_KB[match.group(2).lower()]
    megabytes = int(-(-size_kb // 1024))
    if not MIN_MEMORY_MB <= megabytes <= MAX_MEMORY_MB:
        raise ValueError(f"--memory {text!r}: between {MIN_MEMORY_MB}m and {MAX_MEMORY_MB}m")
    return megabytes


def measured_durations(
    labelled: Mapping[str, Mapping[str, Sequence[Replay]]],
) -> dict[str, float]:
    """Property id -> milliseconds this run measured: per side the median of its completed
    replays' ``duration_ms``, then the longer side (a patch may slow a test down).
    Properties without a completed, timed replay are left out."""
    measured: dict[str, float] = {}
    for per_property in labelled.values():
        for property_id, replays in per_property.items():
            times = [
                float(replay.duration_ms)
                for replay in replays
                if replay.duration_ms is not None
                and Label.is_completed(replay.label)
                and replay.duration_ms >= 0
            ]
            if not times:
                continue
            # One replay (a screening's): its own time, without statistics' sort.
            median = round(times[0] if len(times) == 1 else statistics.median(times), 3)
            measured[property_id] = max(median, measured.get(property_id, 0.0))
    return measured


def merge_durations(
    previous: Mapping[str, float], measured: Mapping[str, float]
) -> dict[str, float]:
    """What was recorded, with this run's measurements replacing the tests it measured
    (a run that selected a few tests keeps the rest). Sorted by node id."""
    merged = dict(previous)
    merged.update(measured)
    return dict(sorted(merged.items()))


def durations_document(
    repository: str, durations: Mapping[str, float], updated_at: datetime
) -> dict[str, Any]:
    """The ``replay-durations/1`` document (docs/records.md)."""
    return {
        "schema": DURATIONS_SCHEMA,
        "repository": repository,
        "updated_at": updated_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "durations_ms": dict(sorted(durations.items())),
    }


def parse_durations_document(document: Any) -> dict[str, float]:
    """Node id -> milliseconds of a ``replay-durations/1`` document; ``SchemaError`` when
    it is not one. Entries that are not non-negative numbers are dropped."""
    if not isinstance(document, Mapping) or document.get("schema") != DURATIONS_SCHEMA:
        raise SchemaError(f"not a {DURATIONS_SCHEMA} document")
    entries = document.get("durations_ms")
    if not isinstance(entries, Mapping):
        raise SchemaError(f"{DURATIONS_SCHEMA}: durations_ms is not an object")
    return {
        str(key): float(value)
        for key, value in entries.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    }
