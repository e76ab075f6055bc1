"""Batches over a pool of engines and CI shards: pure planning, property-based."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from orchestrator.core.pool import (
    Batch,
    check_engine_urls,
    lanes_for,
    longest_first,
    plan_batches,
    plan_batches_on,
    retry,
    runner_ids,
    sides_at_once,
    weights,
)
from orchestrator.core.shards import Shard, parse_shard, partition, shard_record
from orchestrator.errors import InputError

node_ids = st.lists(
    st.from_regex(r"tests/test_[a-c]\.py::test_[a-z0-9]{1,6}", fullmatch=True),
    min_size=1,
    max_size=40,
    unique=True,
)
slot_lists = st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4)


@st.composite
def selections(draw: st.DrawFn) -> tuple[list[str], dict[str, float]]:
    ids = draw(node_ids)
    known = draw(st.lists(st.sampled_from(ids), unique=True))
    durations = {p: draw(st.floats(min_value=0.0, max_value=100.0)) for p in known}
    return ids, durations


@given(selections(), slot_lists)
def test_every_property_is_in_exactly_one_batch_in_the_selections_order(selection, slots):
    ids, durations = selection
    batches = plan_batches(ids, slots, durations)
    flat = [p for batch in batches for p in batch.property_ids]
    assert sorted(flat) == sorted(ids)
    for batch in batches:
        assert list(batch.property_ids) == [p for p in ids if p in batch.property_ids]
        assert 0 <= batch.engine < len(slots)
    assert len(batches) <= sum(lanes_for(s) for s in slots)
    assert len({batch.key for batch in batches}) == len(batches)


@given(selections(), slot_lists)
def test_lanes_differ_by_at_most_the_heaviest_property(selection, slots):
    """Longest-processing-time list scheduling: each property goes to the lightest lane,
    so no lane ends more than one property's weight above another's."""
    ids, durations = selection
    weight = weights(ids, durations)
    batches = plan_batches(ids, slots, durations)
    lanes = sum(lanes_for(s) for s in slots)
    loads = [sum(weight[p] for p in batch.property_ids) for batch in batches]
    loads += [0.0] * (lanes - len(loads))  # lanes that got nothing
    assert max(loads) - min(loads) <= max(weight.values()) + 1e-9


@given(selections(), slot_lists, st.randoms(use_true_random=False))
def test_a_plan_is_a_function_of_its_inputs_not_of_their_order(selection, slots, random):
    ids, durations = selection
    shuffled = list(ids)
    random.shuffle(shuffled)
    plan = plan_batches(ids, slots, durations)
    assert plan == plan_batches(ids, slots, durations)
    assert {b.key: set(b.property_ids) for b in plan} == {
        b.key: set(b.property_ids) for b in plan_batches(shuffled, slots, durations)
    }


def test_the_longest_recorded_property_goes_first_and_unknowns_count_as_the_mean():
    durations = {"a::x": 1.0, "a::y": 9.0}
    assert longest_first(["a::x", "a::y", "a::z"], durations) == ("a::y", "a::z", "a::x")
    assert weights(["a::x", "a::y", "a::z"], durations)["a::z"] == 5.0
    assert longest_first(["b::2", "b::1"], {}) == ("b::1", "b::2")  # nothing known: node ids


def test_one_lane_per_two_slots_and_a_smaller_selection_reaches_every_engine():
    assert [lanes_for(s) for s in (1, 2, 3, 4, 16)] == [1, 1, 1, 2, 8]
    batches = plan_batches(["t::a", "t::b"], [4, 4], {})
    assert [(b.key, b.engine) for b in batches] == [("e1-b1", 0), ("e2-b1", 1)]


def test_no_properties_named_is_one_batch_of_everything_on_the_first_engine():
    assert plan_batches((), [2, 2], {}) == (Batch(key="e1-b1", engine=0, property_ids=()),)


def test_a_batch_is_queued_again_once():
    batch = Batch(key="e2-b1", engine=1, property_ids=("t::a",))
    again = retry(batch)
    assert again is not None
    assert (again.key, again.attempt, again.engine) == ("e2-b1-attempt2", 2, 1)
    assert retry(again) is None
    assert batch.raw_dir(single=True) == "raw"
    assert batch.raw_dir(single=False) == "raw/e2-b1"
    assert again.raw_dir(single=True) == "raw/e2-b1-attempt2"


def test_engine_urls_and_the_runner_ids_they_give():
    urls = check_engine_urls(["unix:///var/run/docker.sock", "ssh://ci@build-2", "tcp://h:2376"])
    assert runner_ids(urls, None, named=True) == urls
    assert runner_ids(urls[:1], "ci-7", named=True) == ("ci-7@unix:///var/run/docker.sock",)
    assert runner_ids(urls[:1], None, named=False) == ("local",)
    assert runner_ids(urls[:1], "ci-7", named=False) == ("ci-7",)
    with pytest.raises(InputError, match="given twice"):
        check_engine_urls(["ssh://a", "ssh://a"])
    with pytest.raises(InputError, match="expected unix"):
        check_engine_urls(["http://a"])


# ---------------------------------------------------------------- shards


@given(selections(), st.integers(min_value=1, max_value=7))
@example(  # an unknown test's weight, the known mean, once moved with the order of the ids
    (
        [f"tests/test_a.py::test_{n}" for n in ("0", "00", "1", "2", "01", "10", "000", "5")],
        {
            "tests/test_a.py::test_0": 0.0,
            "tests/test_a.py::test_00": 57.0,
            "tests/test_a.py::test_1": 7.198627103908019,
            "tests/test_a.py::test_2": 1.1986271039080192,
        },
    ),
    2,
)
def test_shards_cover_the_selection_exactly_once(selection, count):
    ids, durations = selection
    parts = partition(ids, count, durations)
    assert len(parts) == count
    flat = [p for part in parts for p in part]
    assert sorted(flat) == sorted(ids)
    for part in parts:
        assert list(part) == [p for p in ids if p in part]
    assert partition(list(reversed(ids)), count, durations) == tuple(
        tuple(p for p in reversed(ids) if p in part) for part in parts
    )


@given(node_ids, st.integers(min_value=1, max_value=7))
def test_without_durations_shards_differ_by_one_property_at_most(ids, count):
    sizes = [len(part) for part in partition(ids, count, {})]
    assert max(sizes) - min(sizes) <= 1


@given(selections(), st.integers(min_value=1, max_value=5))
def test_every_shard_records_the_same_cut(selection, count):
    ids, durations = selection
    records = [
        shard_record(ids, Shard(index=i, count=count), durations)[1] for i in range(1, count + 1)
    ]
    for record in records:
        for key in ("count", "selection", "selected", "partition", "by"):
            assert record[key] == records[0][key]
    assert records[0]["selected"] == len(ids)


@pytest.mark.parametrize(("text", "index", "count"), [("1/3", 1, 3), (" 3 / 3 ", 3, 3)])
def test_a_shard_is_i_of_n(text, index, count):
    assert parse_shard(text) == Shard(index=index, count=count)


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "2", "a/b", "-1/2"])
def test_a_shard_outside_1_to_n_is_bad_input(text):
    with pytest.raises(InputError, match="--shard"):
        parse_shard(text)


@given(selections(), slot_lists, st.data())
def test_batches_on_given_engines_keep_each_property_on_its_engine(selection, slots, data):
    ids, durations = selection
    engine_of = {p: data.draw(st.integers(-1, len(slots))) for p in ids}
    batches = plan_batches_on(ids, slots, durations, engine_of)
    home = {p: e if 0 <= e < len(slots) else 0 for p, e in engine_of.items()}
    placed = [p for batch in batches for p in batch.property_ids]
    assert sorted(placed) == sorted(ids)  # each property once
    for batch in batches:
        assert batch.property_ids
        assert {home[p] for p in batch.property_ids} == {batch.engine}
        assert batch.key.startswith(f"e{batch.engine + 1}-b")
    assert len({batch.key for batch in batches}) == len(batches)
    for engine, engine_slots in enumerate(slots):
        assert sum(b.engine == engine for b in batches) <= lanes_for(engine_slots)


def test_batches_on_one_engine_are_its_lanes_as_plan_batches_cuts_them():
    ids = [f"tests/test_a.py::test_{n}" for n in range(6)]
    assert plan_batches_on(ids, [4], {}, {}) == plan_batches(ids, [4], {})


@pytest.mark.parametrize(("slots", "at_once"), [(1, 1), (2, 2), (3, 2), (4, 4), (16, 16)])
def test_sides_at_once_are_two_per_lane_or_one_with_a_single_slot(slots, at_once):
    assert sides_at_once(slots) == at_once
