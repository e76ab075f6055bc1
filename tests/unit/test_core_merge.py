"""Shards joined into one run: what merge refuses, and what the merged documents hold."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.shards import (
    MergedProperties,
    Shard,
    ShardRun,
    check_shards,
    merge_runs,
    merged_run_id,
    merged_screening,
    shard_record,
    worst_exit,
)
from orchestrator.errors import InputError

SELECTION = [f"tests/test_m.py::test_{n}" for n in range(7)]
PINS = {
    "base_rev": "1" * 40,
    "patch_rev": "2" * 40,
    "image_digest": "sha256:" + "a" * 64,
    "command": "pytest -q",
    "seed": 0,
    "fixture_digest": "sha256:f",
    "replays": 2,
}


def shard(index: int, count: int = 3, *, status: int = 0, **pins: Any) -> ShardRun:
    part, record = shard_record(SELECTION, Shard(index=index, count=count), {})
    run_log = {**PINS, **pins, "run_id": f"r{index}", "shard": record, "engines": [f"e{index}"]}
    # Its first property blocks (listed in the merged summary), the others behaved alike.
    lanes = ["property_regression" if n == 1 else "no_freeze" for n in range(1, len(part) + 1)]
    records = [
        {
            "index": n,
            "property_id": p,
            "entry": {"property_id": p, "lane": lane, "index": n, "raw_dir": "raw"},
            "evidence": {"property_id": p},
            "decision": {"lane": lane},
        }
        for n, (p, lane) in enumerate(zip(part, lanes, strict=True), start=1)
    ]
    summary = {
        "schema": "replay-report/2",
        "run_id": f"r{index}",
        "exit_status": status,
        "decisions": [r["entry"] for r in records if r["decision"]["lane"] != "no_freeze"],
    }
    return ShardRun(name=f"shard-{index}", run_log=run_log, summary=summary, records=records)


def test_shards_in_any_order_come_back_in_shard_order():
    ordered = check_shards([shard(3), shard(1), shard(2)])
    assert [run.name for run in ordered] == ["shard-1", "shard-2", "shard-3"]


@pytest.mark.parametrize(
    "pin", ["base_rev", "patch_rev", "image_digest", "command", "seed", "tests_from", "screening"]
)
def test_different_pins_are_refused_naming_the_folder_and_the_pin(pin):
    with pytest.raises(InputError, match=rf"shard-2: {pin} .* not shards of one run"):
        check_shards([shard(1), shard(2, **{pin: "other"}), shard(3)])


def test_a_missing_shard_is_refused():
    with pytest.raises(InputError, match="shard 2 of 3 missing"):
        check_shards([shard(1), shard(3)])


def test_a_shard_given_twice_is_refused():
    with pytest.raises(InputError, match="shard 1/3 is given twice"):
        check_shards([shard(1), shard(1), shard(2), shard(3)])


def test_shards_of_another_cut_are_refused():
    other = shard(2, count=2)
    with pytest.raises(InputError, match="shard count"):
        check_shards([shard(1), other])


def test_a_shard_missing_a_property_is_refused():
    short = shard(2)
    cut = ShardRun(
        name="shard-2", run_log=short.run_log, summary=short.summary, records=short.records[1:]
    )
    with pytest.raises(InputError, match="not whole"):
        check_shards([shard(1), cut, shard(3)])


def test_a_run_without_a_shard_record_is_the_whole_selection():
    whole = ShardRun(name="whole", run_log=dict(PINS), summary={"decisions": [], "run_id": "w"})
    assert check_shards([whole]) == (whole,)
    with pytest.raises(InputError, match="given twice"):
        check_shards([whole, whole])


def test_the_merged_run_renumbers_its_properties_and_moves_raw_folders():
    shards = check_shards([shard(1), shard(2), shard(3, status=1)])
    merged = merge_runs(shards, run_dir="/m")
    properties = MergedProperties(merged.summary)
    records = list(properties.records(shards))
    assert sorted(r["property_id"] for r in records) == sorted(SELECTION)
    assert [r["index"] for r in records] == [r["entry"]["index"] for r in records]
    assert [r["index"] for r in records] == list(range(1, len(SELECTION) + 1))
    assert [r["entry"]["shard"] for r in records] == [1] * 3 + [2] * 2 + [3] * 2
    assert {r["entry"]["raw_dir"] for r in records} == {f"shards/{n}/raw" for n in (1, 2, 3)}
    # The summary lists the properties that need a look (each shard's first) and counts.
    assert [d["index"] for d in merged.summary["decisions"]] == [1, 4, 6]
    assert merged.summary["lanes"] == {"property_regression": 3, "no_freeze": 4}
    assert (merged.summary["properties"], merged.summary["decisions_left_out"]) == (7, 4)
    targets = [c.target for c in merged.copies]
    assert len(targets) == len(set(targets))
    assert merged.summary["exit_status"] == 1
    assert merged.run_log["engines"] == ["e1", "e2", "e3"]
    assert "shard" not in merged.run_log
    assert [s["index"] for s in merged.run_log["merged_from"]] == [1, 2, 3]
    assert (
        merged.summary["run_id"]
        == merged.run_log["run_id"]
        == merged_run_id([shard(2), shard(1), shard(3)])
    )


@given(st.lists(st.sampled_from([0, 1, 3]), min_size=1, max_size=6))
def test_the_merged_exit_status_is_the_worst(statuses):
    expected = 1 if 1 in statuses else 3 if 3 in statuses else 0
    assert worst_exit(statuses) == expected


def screened_shard(index: int, screened: int, replayed: int) -> ShardRun:
    run = shard(index, screening={"policy": "screen", "screen": 1, "replays": 2})
    summary = {
        **run.summary,
        "screening": {
            "policy": "screen",
            "screen": 1,
            "replays": 2,
            "screened": screened,
            "replayed": replayed,
        },
    }
    return ShardRun(name=run.name, run_log=run.run_log, summary=summary, records=run.records)


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=3, max_size=3))
def test_screened_shards_merge_and_their_counts_add_up(counts):
    runs = [screened_shard(i, s, r) for i, (s, r) in enumerate(counts, start=1)]
    merged = merge_runs(check_shards(runs), run_dir="merged")
    assert merged.summary["screening"] == {
        "policy": "screen",
        "screen": 1,
        "replays": 2,
        "screened": sum(s for s, _ in counts),
        "replayed": sum(r for _, r in counts),
    }
    assert merged.run_log["screening"] == {"policy": "screen", "screen": 1, "replays": 2}


def test_a_shard_screened_under_another_policy_is_refused():
    other = shard(2, screening={"policy": "replays_all", "screen": 0, "replays": 2})
    with pytest.raises(InputError, match=r"shard-2: screening .* not shards of one run"):
        check_shards([screened_shard(1, 3, 1), other, screened_shard(3, 2, 0)])


def test_shards_of_an_earlier_version_merge_without_a_screening_count():
    assert merged_screening([shard(1), screened_shard(2, 1, 1)]) is None
    assert (
        "screening"
        not in merge_runs(check_shards([shard(1), shard(2), shard(3)]), run_dir="m").summary
    )


def test_the_tests_the_overlay_removed_carry_over_to_the_merged_run():
    runs = [shard(1), shard(2), shard(3)]
    for run in runs:
        run.summary["removed_tests"] = ["tests/test_x.py::test_fix"]
    merged = merge_runs(check_shards(runs), run_dir="/m")
    assert merged.summary["removed_tests"] == ["tests/test_x.py::test_fix"]
    earlier = merge_runs(check_shards([shard(1), shard(2), shard(3)]), run_dir="/m")
    assert "removed_tests" not in earlier.summary  # shards of an earlier version
