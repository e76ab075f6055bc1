"""The quarantine's pure decision (orchestrator/core/quarantine.py): which freeze covers
which failure of a test, at a given moment, and the freeze-export/1 documents it reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.quarantine import (
    EXPORT_SCHEMA,
    FailureKind,
    Freeze,
    Leaf,
    Standing,
    by_test,
    covers,
    failure_kind,
    freezes_from_export,
    rule,
)
from orchestrator.errors import SchemaError
from orchestrator.kinds import FreezeKind

NOW = datetime(2026, 9, 24, 12, 0, tzinfo=UTC)
TEST = "tests/test_api.py::test_list"


def freeze(freeze_id: int = 1, kind: FreezeKind = FreezeKind.FLAKE, **overrides: Any) -> Freeze:
    values: dict[str, Any] = {
        "freeze_id": freeze_id,
        "kind": kind,
        "test": TEST,
        "owner": "team-a",
        "opened_at": NOW - timedelta(days=1),
        "expires_at": NOW + timedelta(days=2),
        "reason": "flaky",
        "budget_ms": 400.0 if kind is FreezeKind.TIMING else None,
    }
    values.update(overrides)
    return Freeze(**values)


def leaf(*types: str, message: str = "") -> Leaf:
    return Leaf(types=(*types, "builtins.Exception", "builtins.BaseException"), message=message)


# --- what failed ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "leaves", "kind"),
    [
        ("setup", [leaf("builtins.TimeoutError")], FailureKind.ERROR),
        ("teardown", [leaf("builtins.AssertionError")], FailureKind.ERROR),
        ("call", [leaf("builtins.AssertionError")], FailureKind.ASSERTION),
        ("call", [leaf("builtins.KeyError", "builtins.LookupError")], FailureKind.ASSERTION),
        ("call", [], FailureKind.ASSERTION),  # a strict xpass: a failure without exception
        ("call", [leaf("builtins.TimeoutError", "builtins.OSError")], FailureKind.TIMING),
        ("call", [leaf("socket.timeout", "builtins.TimeoutError")], FailureKind.TIMING),
        ("call", [leaf("subprocess.TimeoutExpired")], FailureKind.TIMING),
        ("call", [leaf("hypothesis.errors.DeadlineExceeded")], FailureKind.TIMING),
        (
            "call",
            [leaf("_pytest.outcomes.Failed", message="Timeout (>1.0s) from pytest-timeout.")],
            FailureKind.TIMING,
        ),
        ("call", [leaf("_pytest.outcomes.Failed", message="wrong")], FailureKind.ASSERTION),
        # A group is timing only when every exception in it is.
        (
            "call",
            [leaf("hypothesis.errors.DeadlineExceeded"), leaf("builtins.TimeoutError")],
            FailureKind.TIMING,
        ),
        (
            "call",
            [leaf("builtins.TimeoutError"), leaf("builtins.AssertionError")],
            FailureKind.ASSERTION,
        ),
        # Names are whole classes: a project's own TimeoutError-like name is not one.
        ("call", [leaf("myproject.errors.TimeoutError")], FailureKind.ASSERTION),
    ],
)
def test_what_failed(phase: str, leaves: list[Leaf], kind: FailureKind) -> None:
    assert failure_kind(phase, leaves) is kind


# --- the ruling ----------------------------------------------------------------------


def test_a_live_flake_freeze_quarantines_a_failure_of_the_body() -> None:
    ruling = rule([freeze()], failure=FailureKind.ASSERTION, now=NOW)
    assert ruling is not None
    assert ruling.standing is Standing.QUARANTINED
    assert not ruling.fails_session
    assert ruling.note == (
        "quarantined by flake freeze 1 (owner team-a, expires 2026-09-26T12:00:00+00:00,"
        " 2d 0h left)"
    )


def test_a_quarantined_failure_that_raised_something_else_says_so() -> None:
    """The freeze was opened for one failure; a new one under it may be a new bug."""
    frozen = freeze(assertion_id=f"{TEST}@tests/test_api.py:9:AssertionError")
    same = rule([frozen], failure=FailureKind.ASSERTION, now=NOW, exception="AssertionError")
    other = rule([frozen], failure=FailureKind.ASSERTION, now=NOW, exception="KeyError")
    assert same is not None
    assert other is not None
    assert same.standing is other.standing is Standing.QUARANTINED
    assert "raised" not in same.note
    assert other.note.endswith(
        "left); it raised KeyError, not the AssertionError it was frozen for"
    )
    unknown = rule([freeze()], failure=FailureKind.ASSERTION, now=NOW, exception="KeyError")
    assert unknown is not None
    assert "raised" not in unknown.note  # no frozen failure named: nothing to compare


@pytest.mark.parametrize(
    ("left", "shown"),
    [
        (timedelta(days=2, hours=3, minutes=59), "2d 3h left"),
        (timedelta(hours=5, minutes=10, seconds=30), "5h 10m left"),
        (timedelta(minutes=7), "7m left"),
        (timedelta(seconds=20), "0m left"),
    ],
)
def test_a_live_freeze_says_how_long_it_has_left(left: timedelta, shown: str) -> None:
    ruling = rule([freeze(expires_at=NOW + left)], failure=None, now=NOW)
    assert ruling is not None
    assert f", {shown}): a thaw candidate" in ruling.note


def test_a_pass_under_a_live_freeze_is_a_thaw_candidate() -> None:
    ruling = rule([freeze()], failure=None, now=NOW)
    assert ruling is not None
    assert (ruling.standing, ruling.failed, ruling.fails_session) == (Standing.PASSED, False, False)
    assert ruling.note.endswith("a thaw candidate")


def test_an_expired_freeze_does_not_apply_and_says_so() -> None:
    gone = freeze(expires_at=NOW)  # expiry is the end: at that moment it no longer applies
    ruling = rule([gone], failure=FailureKind.ASSERTION, now=NOW)
    assert ruling is not None
    assert (ruling.standing, ruling.fails_session) == (Standing.EXPIRED, True)
    assert ruling.note == (
        "flake freeze 1 expired at 2026-09-24T12:00:00+00:00 (owner team-a): it no longer"
        " quarantines this test"
    )
    passed = rule([gone], failure=None, now=NOW)
    assert passed is not None
    assert (passed.standing, passed.fails_session) == (Standing.EXPIRED, False)


def test_a_timing_freeze_covers_its_timing_check_never_an_assertion() -> None:
    timing = freeze(kind=FreezeKind.TIMING)
    covered = rule([timing], failure=FailureKind.TIMING, now=NOW)
    assert covered is not None
    assert covered.standing is Standing.QUARANTINED
    refused = rule([timing], failure=FailureKind.ASSERTION, now=NOW)
    assert refused is not None
    assert (refused.standing, refused.fails_session) == (Standing.NOT_COVERED, True)
    assert refused.note == (
        "timing freeze 1 (owner team-a) does not cover this failure: a timing freeze covers"
        " only the test's timing check (budget 400 ms), never its assertions"
    )


def test_no_freeze_covers_a_set_up_or_tear_down_error() -> None:
    for kind in FreezeKind:
        ruling = rule([freeze(kind=kind)], failure=FailureKind.ERROR, now=NOW)
        assert ruling is not None
        assert ruling.standing is Standing.NOT_COVERED
        assert "never a set-up or tear-down error" in ruling.note


def test_among_several_freezes_a_live_covering_one_wins() -> None:
    expired = freeze(1, expires_at=NOW - timedelta(hours=1))
    timing = freeze(2, FreezeKind.TIMING, expires_at=NOW + timedelta(days=3))
    flake = freeze(3, expires_at=NOW + timedelta(hours=1))
    ruling = rule([expired, timing, flake], failure=FailureKind.ASSERTION, now=NOW)
    assert ruling is not None
    assert (ruling.standing, ruling.freeze.freeze_id) == (Standing.QUARANTINED, 3)
    timed_out = rule([expired, timing, flake], failure=FailureKind.TIMING, now=NOW)
    assert timed_out is not None
    assert timed_out.freeze.freeze_id == 3  # a flake freeze first: it covers more
    assert rule([], failure=FailureKind.ASSERTION, now=NOW) is None


def test_naive_moments_are_utc() -> None:
    ruling = rule([freeze()], failure=None, now=NOW.replace(tzinfo=None))
    assert ruling is not None
    assert ruling.standing is Standing.PASSED


freezes_strategy = st.lists(
    st.builds(
        freeze,
        freeze_id=st.integers(1, 50),
        kind=st.sampled_from(FreezeKind),
        expires_at=st.integers(-72, 72).map(lambda h: NOW + timedelta(hours=h)),
    ),
    max_size=5,
)
failures = st.none() | st.sampled_from(FailureKind)


@given(freezes_strategy, failures)
def test_quarantined_exactly_when_a_live_freeze_covers_the_failure(
    freezes: list[Freeze], failure: FailureKind | None
) -> None:
    ruling = rule(freezes, failure=failure, now=NOW)
    if not freezes:
        assert ruling is None
        return
    assert ruling is not None
    live = [f for f in freezes if f.expires_at > NOW]
    covering = [f for f in live if failure is not None and covers(f, failure)]
    assert (ruling.standing is Standing.QUARANTINED) == bool(covering)
    assert ruling.failed == (failure is not None)
    # The session fails exactly where it would without the quarantine, less what is covered.
    assert ruling.fails_session == (failure is not None and not covering)
    if ruling.standing is Standing.QUARANTINED:
        assert ruling.freeze in covering
        assert ruling.freeze.live(NOW)
    if ruling.standing is Standing.EXPIRED:
        assert not live
    # A timing freeze never quarantines an assertion failure or an error.
    if ruling.standing is Standing.QUARANTINED and ruling.freeze.kind is FreezeKind.TIMING:
        assert failure is FailureKind.TIMING


@given(freezes_strategy, failures, st.randoms())
def test_the_ruling_does_not_depend_on_the_order_of_the_freezes(
    freezes: list[Freeze], failure: FailureKind | None, random: Any
) -> None:
    shuffled = list(freezes)
    random.shuffle(shuffled)
    assert rule(freezes, failure=failure, now=NOW) == rule(shuffled, failure=failure, now=NOW)


@given(freezes_strategy, failures)
def test_after_every_expiry_nothing_is_quarantined(
    freezes: list[Freeze], failure: FailureKind | None
) -> None:
    later = max((f.expires_at for f in freezes), default=NOW) + timedelta(seconds=1)
    ruling = rule(freezes, failure=failure, now=later)
    assert ruling is None or ruling.standing is Standing.EXPIRED


# --- reading freezes -------------------------------------------------------------------


def flake_entry(freeze_id: int = 7, **record: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "schema": "freeze-record/1",
        "kind": "flake",
        "property_id": TEST,
        "assertion_id": f"{TEST}@tests/test_api.py:9:AssertionError",
        "owner": "team-a",
        "opened_at": "2026-09-23T12:00:00+00:00",
        "expires_at": "2026-09-26T12:00:00+00:00",
        "replays": {
            "base": ["assert_fail", "assert_pass"] * 5,
            "patch": ["assert_fail"] * 5 + ["assert_pass"] * 5,
        },
    }
    values.update(record)
    return {"id": freeze_id, "kind": "flake", "record": values, "fixture": None}


def timing_entry(freeze_id: int = 8) -> dict[str, Any]:
    record = {
        "schema": "freeze-record/1",
        "kind": "timing",
        "test_name": "tests/test_api.py::test_latency",
        "owner": "perf",
        "opened_at": "2026-09-24T11:00:00Z",
        "expires_at": "2026-09-25T11:00:00Z",
        "sample_runs": 5,
        "spread_ms": 300,
        "budget_ms": 400,
    }
    return {"id": freeze_id, "kind": "timing", "record": record}


def test_an_export_gives_each_freeze_with_its_test_owner_expiry_and_reason() -> None:
    doc = {"schema": EXPORT_SCHEMA, "freezes": [flake_entry(), timing_entry()]}
    flake, timing = freezes_from_export(doc)
    assert (flake.freeze_id, flake.kind, flake.test, flake.owner) == (
        7, FreezeKind.FLAKE, TEST, "team-a",
    )  # fmt: skip
    assert flake.expires_at == datetime(2026, 9, 26, 12, tzinfo=UTC)
    assert flake.reason == (
        "flaky on both sides (base 5/10, patch 5/10 replays failed) at"
        f" {TEST}@tests/test_api.py:9:AssertionError"
    )
    assert timing.test == "tests/test_api.py::test_latency"
    assert timing.budget_ms == 400.0
    assert timing.reason == "timing debt: 5 samples spread 300 ms over a budget of 400 ms"
    assert freezes_from_export({"schema": EXPORT_SCHEMA, "freezes": []}) == ()
    assert Freeze.from_json(flake.to_json()) == flake
    assert by_test([timing, flake]) == {TEST: (flake,), timing.test: (timing,)}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "expected a freeze-export/1 document, got 'list'"),
        ({"schema": "freeze-list/1", "freezes": []}, "got 'freeze-list/1'"),
        ({"schema": EXPORT_SCHEMA}, "freezes: expected an array"),
        ({"schema": EXPORT_SCHEMA, "freezes": [1]}, "freezes[0]: expected an object"),
        ({"schema": EXPORT_SCHEMA, "freezes": [{**flake_entry(), "id": "7"}]}, "freezes[0].id"),
        ({"schema": EXPORT_SCHEMA, "freezes": [{**flake_entry(), "kind": "x"}]}, ".kind"),
        ({"schema": EXPORT_SCHEMA, "freezes": [{**flake_entry(), "record": []}]}, ".record:"),
        (
            {"schema": EXPORT_SCHEMA, "freezes": [flake_entry(owner=" ")]},
            "freezes[0].record.owner: expected a non-empty string",
        ),
        (
            {"schema": EXPORT_SCHEMA, "freezes": [flake_entry(property_id=None)]},
            "freezes[0].record.property_id",
        ),
        (
            {"schema": EXPORT_SCHEMA, "freezes": [flake_entry(expires_at="soon")]},
            "freezes[0].record.expires_at: not an ISO-8601 timestamp: 'soon'",
        ),
    ],
)
def test_a_document_of_another_shape_is_refused_whole(doc: Any, message: str) -> None:
    with pytest.raises(SchemaError) as refused:
        freezes_from_export(doc)
    assert message in str(refused.value)
