"""Scheduling from recorded durations (core/schedule.py, probe/schedule.py): pure."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core import schedule
from orchestrator.errors import SchemaError
from orchestrator.model import Replay

MODULES = st.sampled_from([f"tests/test_{name}.py" for name in "abcdefgh"])
NAMES = st.text(alphabet="xyz_", min_size=1, max_size=4)


@st.composite
def suites(draw: st.DrawFn) -> tuple[list[str], dict[str, float]]:
    """Unique node ids in collection order (a module's tests may be interleaved with
    another's, as a project's own hooks can order them) and durations for some of them."""
    ids = draw(
        st.lists(
            st.builds(lambda module, name: f"{module}::test_{name}", MODULES, NAMES),
            unique=True,
            max_size=40,
        )
    )
    known = draw(st.lists(st.sampled_from(ids), unique=True)) if ids else []
    durations = {
        test_id: draw(st.floats(min_value=0, max_value=5000, allow_nan=False)) for test_id in known
    }
    # Records of tests that are not in this selection (gone, or deselected) are ignored.
    durations["tests/test_gone.py::test_old"] = 99_999.0
    return ids, durations


@given(suites(), st.integers(min_value=1, max_value=6))
def test_a_split_is_a_partition_in_order_with_whole_modules(suite, bins) -> None:
    ids, durations = suite
    split = schedule.split_by_module(ids, durations, bins)
    assert len(split) == bins
    assert sorted(test for part in split for test in part) == sorted(ids)
    for part in split:
        # Each list keeps the collection order of its tests.
        assert list(part) == [test for test in ids if test in set(part)]
    owner = {schedule.module_of(test): index for index, part in enumerate(split) for test in part}
    for index, part in enumerate(split):
        assert all(owner[schedule.module_of(test)] == index for test in part)


@given(suites(), st.integers(min_value=1, max_value=6))
def test_the_longest_list_is_within_the_list_scheduling_bound(suite, bins) -> None:
    ids, durations = suite
    split = schedule.split_by_module(ids, durations, bins)
    costs = schedule.bin_costs(split, ids, durations)
    modules = schedule.module_costs(ids, durations)
    total = sum(modules.values())
    longest_module = max(modules.values(), default=0.0)
    # Any greedy placement keeps the longest list within the average plus the longest item.
    assert max(costs, default=0.0) <= total / bins + longest_module + 1e-6
    # And it never leaves a list empty while there are as many modules as lists.
    if len(modules) >= bins:
        assert all(part for part in split)


@given(suites())
def test_one_bin_is_the_whole_selection_in_order(suite) -> None:
    ids, durations = suite
    assert schedule.split_by_module(ids, durations, 1) == (tuple(ids),)


@given(suites(), st.integers(min_value=1, max_value=5))
def test_shards_are_disjoint_and_cover_the_selection(suite, count) -> None:
    ids, durations = suite
    shards = [schedule.shard(ids, durations, index, count) for index in range(1, count + 1)]
    assert sorted(test for part in shards for test in part) == sorted(ids)
    with pytest.raises(ValueError, match="shard"):
        schedule.shard(ids, durations, count + 1, count)


@given(suites())
def test_unknown_tests_cost_the_average_of_the_known_ones(suite) -> None:
    ids, durations = suite
    costs = schedule.estimated_costs(ids, durations)
    known = [durations[test] for test in ids if test in durations]
    average = sum(known) / len(known) if known else schedule.UNKNOWN_COST_MS
    for test in ids:
        expected = durations.get(test, average)
        assert math.isclose(costs[test], expected, rel_tol=1e-9, abs_tol=1e-9)


@given(suites())
def test_longest_first_orders_by_decreasing_cost_keeping_ties_in_order(suite) -> None:
    ids, durations = suite
    ordered = schedule.order_longest_first(ids, durations)
    costs = schedule.estimated_costs(ids, durations)
    assert sorted(ordered) == sorted(ids)
    for first, second in itertools.pairwise(ordered):
        assert costs[first] > costs[second] or (
            costs[first] == costs[second] and ids.index(first) < ids.index(second)
        )


def test_lpt_puts_the_one_long_module_alone() -> None:
    ids = [f"tests/test_long.py::test_{n}" for n in range(2)] + [
        f"tests/test_m{m}.py::test_{n}" for m in range(4) for n in range(3)
    ]
    durations = {"tests/test_long.py::test_0": 20_000.0, "tests/test_long.py::test_1": 1.0}
    durations.update({test: 1.0 for test in ids if "test_m" in test})
    long_bin, rest = schedule.split_by_module(ids, durations, 2)
    assert long_bin == ("tests/test_long.py::test_0", "tests/test_long.py::test_1")
    assert len(rest) == 12


def test_nothing_known_balances_by_count() -> None:
    ids = [f"tests/test_{m}.py::test_{n}" for m in "abcd" for n in range(5)]
    split = schedule.split_by_module(ids, {}, 2)
    assert [len(part) for part in split] == [10, 10]


def test_bad_records_are_unknown() -> None:
    ids = ["t.py::a", "t.py::b", "u.py::c"]
    costs = schedule.estimated_costs(ids, {"t.py::a": -1.0, "t.py::b": float("inf"), "u.py::c": 4})
    assert costs == {"t.py::a": 4.0, "t.py::b": 4.0, "u.py::c": 4.0}


def test_bins_must_be_positive() -> None:
    with pytest.raises(ValueError, match="bins"):
        schedule.split_by_module(["t.py::a"], {}, 0)


def test_measured_durations_take_the_median_of_completed_replays_and_the_longer_side() -> None:
    def run(label: str, ms: float | None) -> Replay:
        return Replay(label=label, duration_ms=ms)

    labelled = {
        "base": {
            "t.py::a": (run("assert_pass", 1.0), run("assert_pass", 3.0), run("assert_fail", 2.0)),
            "t.py::b": (run("timeout", None), run("harness_error", 0.0)),
        },
        "patch": {
            "t.py::a": (run("assert_pass", 9.0),),
            "t.py::b": (run("assert_pass", 5.0), run("assert_pass", None)),
        },
    }
    assert schedule.measured_durations(labelled) == {"t.py::a": 9.0, "t.py::b": 5.0}


@given(
    st.dictionaries(NAMES, st.floats(min_value=0, max_value=1e6)),
    st.dictionaries(NAMES, st.floats(min_value=0, max_value=1e6)),
)
def test_merging_keeps_old_records_and_takes_new_measurements(previous, measured) -> None:
    merged = schedule.merge_durations(previous, measured)
    assert set(merged) == set(previous) | set(measured)
    assert all(merged[key] == value for key, value in measured.items())
    assert all(merged[key] == value for key, value in previous.items() if key not in measured)
    assert list(merged) == sorted(merged)


def test_a_durations_document_reads_back() -> None:
    now = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)
    document = schedule.durations_document("abc", {"t.py::b": 2.5, "t.py::a": 1}, now)
    assert document["schema"] == schedule.DURATIONS_SCHEMA
    assert document["updated_at"] == "2026-05-06T07:08:09Z"
    assert schedule.parse_durations_document(document) == {"t.py::a": 1.0, "t.py::b": 2.5}
    document["durations_ms"]["t.py::c"] = "slow"
    assert "t.py::c" not in schedule.parse_durations_document(document)
    with pytest.raises(SchemaError):
        schedule.parse_durations_document({"schema": "other/1"})
    with pytest.raises(SchemaError):
        schedule.parse_durations_document({"schema": schedule.DURATIONS_SCHEMA})


@given(st.one_of(st.none(), st.integers(min_value=-2, max_value=64)))
def test_default_jobs_share_the_engine_between_two_sides(cpus) -> None:
    jobs = schedule.default_jobs(cpus)
    assert jobs >= 1
    if cpus and cpus >= 2:
        assert jobs == cpus // 2


@given(
    st.one_of(st.none(), st.integers(min_value=-2, max_value=64)),
    st.integers(1, 8),
    st.floats(min_value=0, max_value=1e9),
    st.booleans(),
)
def test_screening_splits_a_long_suite_over_the_engine_only_when_it_may_be_reused(
    cpus, sides, recorded_ms, reusable
) -> None:
    jobs = schedule.screening_jobs(cpus, sides=sides, recorded_ms=recorded_ms, reusable=reusable)
    paired = schedule.default_jobs(cpus, sides)
    # Never fewer workers than the engine's share, never more than its CPUs.
    assert paired <= jobs <= max(1, cpus or 1)
    if not reusable or recorded_ms < schedule.SPLIT_FROM_MS:
        assert jobs == paired  # what a run without a store (or a short suite) always had
    elif cpus and cpus >= 1:
        assert jobs == cpus  # the patch alone on the whole engine when the base is reused


@given(st.integers(min_value=1, max_value=32), st.one_of(st.none(), st.integers(1, 64)))
def test_container_limits_scale_with_jobs_within_the_engine(jobs, cpus) -> None:
    limits = schedule.container_limits(jobs, cpus)
    assert limits.memory == f"{512 * jobs}m"
    assert limits.pids == 256 * jobs
    assert limits.cpus == (min(jobs, cpus) if cpus else jobs)


@given(st.integers(1, 8), st.integers(0, 400_000))
def test_a_larger_suite_gets_more_memory_past_fifty_thousand_tests(jobs, tests) -> None:
    limits = schedule.container_limits(jobs, None, tests=tests)
    megabytes = int(limits.memory.removesuffix("m"))
    assert megabytes >= schedule.MEMORY_PER_JOB_MB * jobs
    if tests <= schedule.TESTS_IN_BASE_MEMORY:
        assert megabytes == schedule.MEMORY_PER_JOB_MB * jobs
    else:  # about 6 KB per test past 50,000, for each worker (each collects them all)
        extra_kb = (tests - schedule.TESTS_IN_BASE_MEMORY) * schedule.MEMORY_PER_TEST_KB
        assert megabytes * 1024 >= (schedule.MEMORY_PER_JOB_MB * 1024 + extra_kb) * jobs
    assert schedule.container_limits(1, None, tests=100_000).memory == "805m"


def test_memory_given_is_the_container_s_whatever_the_suite() -> None:
    assert schedule.container_limits(4, None, tests=10**6, memory_mb=900).memory == "900m"


@pytest.mark.parametrize(
    ("text", "megabytes"),
    [("768m", 768), ("2g", 2048), ("2G", 2048), ("1048576k", 1024), ("536870912", 512),
     ("64m", 64), ("100mb", 100)],
)  # fmt: skip
def test_memory_takes_docker_s_sizes(text, megabytes) -> None:
    assert schedule.memory_mb(text) == megabytes


@pytest.mark.parametrize("text", ["", "lots", "1.5g", "63m", "-1g", "2t", "9999999999"])
def test_memory_outside_what_a_container_takes_is_refused(text) -> None:
    with pytest.raises(ValueError, match="--memory"):
        schedule.memory_mb(text)
