"""How long one replay may take when nobody said (--timeout's default)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.core.bounds import MAX_TIMEOUT_S
from orchestrator.core.replay_deadline import (
    FACTOR,
    FLOOR_S,
    NAMED_DEFAULT_S,
    SLACK_S,
    WHOLE_SUITE_DEFAULT_S,
    replay_deadline,
)

PATHS = {"lib.py", "tests/test_a.py", "tests/test_b.py", "docs/usage.rst"}


def deadline(durations, *, given=None, named=False, command_paths=(), selected=(), paths=PATHS):
    return replay_deadline(
        given=given, named=named, paths=paths, command_paths=command_paths,
        durations=durations, selected=selected,
    )  # fmt: skip


def test_a_timeout_given_wins_and_named_tests_keep_a_minute():
    assert deadline({}, given=5.0).timeout_s == 5.0
    assert deadline({}, given=5.0).rule == "--timeout"
    assert deadline({}, named=True).timeout_s == NAMED_DEFAULT_S == 60.0


def test_a_whole_suite_without_a_record_gets_the_generous_default():
    found = deadline({})
    assert (found.timeout_s, found.rule) == (1800.0, "the whole-suite default (no record)")
    assert WHOLE_SUITE_DEFAULT_S == 30 * 60


def test_a_recorded_suite_gets_three_times_its_time_plus_a_minute_at_least_ten_minutes():
    small = {"tests/test_a.py::t1": 20_000.0, "tests/test_b.py::t2": 15_000.0}  # a 35 s suite
    assert deadline(small).timeout_s == FLOOR_S == 600.0
    big = {"tests/test_a.py::t1": 400_000.0, "tests/test_b.py::t2": 200_000.0,
           "docs/usage.rst::usage.rst": 50_000.0}  # fmt: skip
    found = deadline(big)
    assert found.timeout_s == 3 * 650 + 60 == FACTOR * 650 + SLACK_S
    assert found.rule == "recorded durations: 3 x 650.0 s (3 tests) + 60 s, at least 600 s"
    # A test whose file is gone, or that the command does not run, is not counted.
    gone = {**big, "tests/test_gone.py::t": 10_000_000.0}
    assert deadline(gone).timeout_s == found.timeout_s
    assert deadline(big, command_paths=("tests/test_a.py",)).timeout_s == 3 * 400 + 60
    assert (
        deadline({"tests/test_a.py::t": 1e12, "tests/test_b.py::t": 1}).timeout_s == MAX_TIMEOUT_S
    )


def test_a_partial_record_is_scaled_up_or_not_trusted():
    half = {"tests/test_a.py::t1": 400_000.0}  # one of two test modules recorded
    found = deadline(half)
    assert found.timeout_s == 3 * 800 + 60
    assert "scaled up from 1 of 2 test modules" in found.rule
    paths = PATHS | {"tests/test_c.py", "tests/test_d.py"}
    little = deadline(half, paths=paths)  # one of four: a record of a few named tests
    assert little.timeout_s == WHOLE_SUITE_DEFAULT_S
    assert little.rule == "the whole-suite default (1 of 4 test modules recorded)"


def test_changed_tests_are_timed_by_their_modules_records():
    record = {"tests/test_a.py::t1": 400_000.0, "tests/test_b.py::t2": 900_000.0}
    assert deadline(record, selected=("tests/test_a.py::t1",)).timeout_s == 3 * 400 + 60
    assert deadline({}, selected=("tests/test_a.py::t1",)).timeout_s == WHOLE_SUITE_DEFAULT_S


records = st.dictionaries(
    st.sampled_from(["tests/test_a.py::x", "tests/test_b.py::y", "tests/test_b.py::z",
                     "docs/usage.rst::usage.rst", "tests/test_gone.py::g"]),
    st.floats(min_value=0, max_value=1e9),
)  # fmt: skip


@settings(max_examples=examples(200), deadline=None)
@given(record=records, more=st.floats(min_value=0, max_value=1e9))
def test_a_derived_deadline_is_bounded_and_grows_with_the_record(record, more):
    found = deadline(record)
    assert FLOOR_S <= found.timeout_s <= MAX_TIMEOUT_S
    longer = {key: value + more for key, value in record.items()}
    assert deadline(longer).timeout_s >= found.timeout_s
