"""The pure weekly tally on known events, plus properties of the counting."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tally_events import EXPECTED_EVENTS_COUNTED, EXPECTED_THREE_WEEKS, KNOWN_EVENTS, NOW, event
from tiers import examples

from orchestrator.core.tally import (
    COUNTS,
    TALLY_SCHEMA,
    iso_week,
    tally,
    tally_from_json,
    week_starts,
)
from orchestrator.model import Event, EventKind

KEYS = [key for key, _ in COUNTS]


def rows(result):  # type: ignore[no-untyped-def]
    return [(w.week, *(w.value(key) for key in KEYS)) for w in result.weeks]


def test_known_events_across_three_weeks() -> None:
    result = tally(KNOWN_EVENTS, now=NOW, weeks=3)
    assert rows(result) == EXPECTED_THREE_WEEKS
    assert result.events_counted == EXPECTED_EVENTS_COUNTED
    assert not result.empty


def test_a_wider_window_adds_the_older_week_and_keeps_the_rest() -> None:
    result = tally(KNOWN_EVENTS, now=NOW, weeks=5)
    assert [w.week for w in result.weeks] == [
        "2026-W43", "2026-W44", "2026-W45", "2026-W46", "2026-W47",
    ]  # fmt: skip
    assert rows(result)[2:] == EXPECTED_THREE_WEEKS
    assert rows(result)[1] == ("2026-W44", 1, 1, 0, 0, 0)
    assert rows(result)[0] == ("2026-W43", 0, 0, 0, 0, 0)


def test_events_after_now_wait_for_their_week() -> None:
    later = tally(KNOWN_EVENTS, now=NOW + timedelta(days=1, hours=1), weeks=3)
    assert later.weeks[-1].properties_killed_mutant == 3


def test_week_starts_are_mondays_ending_with_the_current_week() -> None:
    starts = week_starts(NOW, 3)
    assert starts == (date(2026, 11, 2), date(2026, 11, 9), date(2026, 11, 16))
    assert {start.weekday() for start in starts} == {0}
    with pytest.raises(ValueError, match="at least 1"):
        week_starts(NOW, 0)


def test_iso_week_labels_cross_the_year_boundary() -> None:
    assert iso_week(date(2027, 1, 1)) == "2026-W53"
    assert iso_week(date(2026, 1, 1)) == "2026-W01"
    result = tally([], now=datetime(2027, 1, 5, tzinfo=UTC), weeks=2)
    assert [w.week for w in result.weeks] == ["2026-W53", "2027-W01"]


def test_empty_ledger_gives_zeros_and_says_so() -> None:
    result = tally([], now=NOW, weeks=8)
    assert len(result.weeks) == 8
    assert all(value == 0 for value in result.totals().values())
    assert result.empty
    assert result.to_json()["empty"] is True


def test_json_document_round_trips_and_names_its_schema() -> None:
    result = tally(KNOWN_EVENTS, now=NOW, weeks=3)
    doc = result.to_json()
    assert doc["schema"] == TALLY_SCHEMA == "tally/1"
    assert doc["totals"] == {
        key: sum(row[1 + i] for row in EXPECTED_THREE_WEEKS) for i, key in enumerate(KEYS)
    }
    assert doc["weeks"][0] == {
        "week": "2026-W45",
        "start": "2026-11-02",
        "properties_drafted": 3,
        "properties_killed_mutant": 1,
        "shrink_changed_digest": 1,
        "output_matched_calls_moved": 1,
        "freezes_live_after_expiry": 0,
    }
    assert tally_from_json(doc) == result


# ------------------------------------------------------------------ properties

_kinds = st.sampled_from(list(EventKind))
_codes = st.sampled_from(["accepted", "mutant_survived", "call_budget", "shrink_unstable", "x"])
_labels = st.lists(st.sampled_from(["assert_pass", "assert_fail", "timeout"]), max_size=3)
_events = st.builds(
    lambda offset, kind, code, subject, base, patch, stable: event(
        NOW - timedelta(minutes=offset),
        kind,
        code,
        subject,
        base_labels=base,
        patch_labels=patch,
        stable=stable,
    ),
    st.integers(min_value=-3000, max_value=60 * 24 * 40),
    _kinds,
    _codes,
    st.sampled_from(["a", "b", "c", None]),
    _labels,
    _labels,
    st.booleans(),
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(_events, max_size=40), st.randoms(use_true_random=False))
def test_counting_is_order_free_and_bounded(events: list[Event], random) -> None:  # type: ignore[no-untyped-def]
    result = tally(events, now=NOW, weeks=6)
    shuffled = list(events)
    random.shuffle(shuffled)
    assert tally(shuffled, now=NOW, weeks=6) == result
    for week in result.weeks:
        assert week.properties_killed_mutant <= week.properties_drafted
    in_window = [e for e in events if datetime(2026, 10, 12, tzinfo=UTC) <= e.at <= NOW]
    assert result.events_counted == len(in_window)
    accept_events = sum(1 for e in in_window if e.kind is EventKind.ACCEPT)
    assert result.totals()["properties_drafted"] <= accept_events


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(_events, max_size=30), st.integers(min_value=1, max_value=10))
def test_a_wider_window_never_changes_the_recent_weeks(events: list[Event], extra: int) -> None:
    narrow = tally(events, now=NOW, weeks=3)
    wide = tally(events, now=NOW, weeks=3 + extra)
    assert wide.weeks[-3:] == narrow.weeks
