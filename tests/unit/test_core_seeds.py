"""Seed 000's classifier lines and seed 004's cases A-D and thaw lists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.core.digest import oracle_digest
from orchestrator.core.labels import classify_labels
from orchestrator.core.timing import (
    ADMISSION_CODES,
    Check,
    FreezeRequest,
    Kind,
    admit,
    classify_latency,
    latency_summary,
    thaw_allowed,
)

# --- seed 000 ---------------------------------------------------------------------------


def test_seed_000_classifier_lines() -> None:
    assert classify_labels(["assert_fail"] * 5) == "block_patch"
    mixed = ["assert_fail", "assert_pass", "assert_fail", "assert_pass", "assert_fail"]
    assert classify_labels(mixed) == "freeze_eligible"
    with_timeout = ["assert_fail", "timeout", "assert_fail", "assert_pass", "assert_fail"]
    assert classify_labels(with_timeout) == "infra_queue"


def test_seed_000_walkthrough_and_malformed_lists() -> None:
    assert classify_labels(
        ["assert_fail", "assert_pass", "assert_fail", "assert_fail", "assert_pass"]
    ) == ("freeze_eligible")
    assert classify_labels(["assert_pass"] * 5) == "not_reproduced"
    assert classify_labels(["assert_pass"] * 4) == "reject_malformed"
    assert classify_labels(["assert_pass"] * 4 + ["flaky"]) == "reject_malformed"
    assert classify_labels(["harness_error"] + ["assert_pass"] * 4) == "infra_queue"


# --- seed 004 ---------------------------------------------------------------------------

ORACLE_KEYS = ("status", "schema_version", "body_sha256")
NOW = datetime(2026, 9, 24, 12, 0, tzinfo=UTC)
PAYLOAD = {
    "status": 200,
    "schema_version": 3,
    "body_sha256": "abc123",
    "request_id": "volatile",
    "latency_ms": 840,
}
LOCKED = oracle_digest(PAYLOAD, ORACLE_KEYS)
GREEN = (
    Check(name="status_in_set", passed=True, kind=Kind.PROPERTY),
    Check(name="known_bad_rejected", passed=True, kind=Kind.PROPERTY),
    Check(name="oracle_digest", passed=True, kind=Kind.FIXTURE),
    Check(name="list_latency", passed=False, kind=Kind.TIMING),
)


def request(**overrides: object) -> FreezeRequest:
    values: dict[str, object] = {
        "test_name": "list_latency",
        "owner": "suite-owner",
        "opened_at": NOW - timedelta(hours=1),
        "max_age_hours": 24,
        "sample_runs": 5,
        "spread_ms": 300.0,
        "budget_ms": 400.0,
    }
    values.update(overrides)
    return FreezeRequest(**values)  # type: ignore[arg-type]


def run_admit(req: FreezeRequest, checks=GREEN, payload=PAYLOAD, locked=LOCKED, now=NOW):  # type: ignore[no-untyped-def]
    return admit(req, checks, payload, locked, now, oracle_keys=ORACLE_KEYS)


def test_seed_004_main_opens_timing_debt_until_the_next_day() -> None:
    admission = run_admit(request())
    assert (admission.allowed, admission.code) == (True, "timing_debt_opened")
    assert admission.detail == "2026-09-25T11:00:00+00:00"
    assert admission.expires_at == datetime(2026, 9, 25, 11, 0, tzinfo=UTC)


def test_case_a_property_red_wins_over_a_red_timing_check() -> None:
    checks = (
        Check(name="status_in_set", passed=True, kind=Kind.PROPERTY),
        Check(name="known_bad_rejected", passed=False, kind=Kind.PROPERTY),
        Check(name="list_latency", passed=False, kind=Kind.TIMING),
    )
    admission = run_admit(request(), checks=checks)
    assert (admission.allowed, admission.code) == (False, "property_red")
    assert "known_bad_rejected" in admission.detail


def test_case_b_oracle_drift_but_volatile_keys_are_free() -> None:
    drifted = {**PAYLOAD, "body_sha256": "def456"}
    assert run_admit(request(), payload=drifted).code == "fixture_oracle_drift"
    volatile = {**PAYLOAD, "request_id": "another"}
    assert run_admit(request(), payload=volatile).code == "timing_debt_opened"


def test_case_c_stable_overrun_is_a_property_and_spread_too_tight() -> None:
    assert classify_latency(700, 400, 20) is Kind.PROPERTY
    assert run_admit(request(spread_ms=20.0)).code == "spread_too_tight"


def test_case_d_wide_spread_is_timing_debt() -> None:
    assert classify_latency(840, 400, 300) is Kind.TIMING
    assert run_admit(request(spread_ms=300.0)).code == "timing_debt_opened"


def test_classify_latency_within_budget_is_unknown() -> None:
    assert classify_latency(400, 400, 500) is Kind.UNKNOWN
    assert classify_latency(401, 400, 100) is Kind.PROPERTY  # band is 100: not greater
    assert classify_latency(401, 400, 100.5) is Kind.TIMING


def test_thaw_sample_lists() -> None:
    assert not thaw_allowed([410, 390, 420, 400, 405], 400)
    assert thaw_allowed([310, 320, 300, 330, 315], 400)
    assert not thaw_allowed([200], 400)
    assert not thaw_allowed([100, 100, 100, 100, 250], 400)  # spread 150 > band 100


def test_latency_summary_is_median_and_spread() -> None:
    assert latency_summary([840, 700, 1000, 820, 900]) == (840.0, 300.0)


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"sample_runs": 4}, "sample_too_small"),
        ({"max_age_hours": 0.5}, "age_out_of_band"),
        ({"max_age_hours": 73}, "age_out_of_band"),
        ({"owner": "  "}, "missing_owner"),
        ({"test_name": "other_check"}, "not_timing"),
        ({"opened_at": NOW - timedelta(hours=30)}, "already_expired"),
    ],
)
def test_each_admission_refusal(overrides: dict[str, object], code: str) -> None:
    assert run_admit(request(**overrides)).code == code


def test_codes_come_in_the_seed_order() -> None:
    # Everything wrong at once: the first code of the list is the one reported, and
    # fixing the reported problem reveals the next one in order.
    broken: dict[str, object] = {
        "sample_runs": 1,
        "max_age_hours": 100,
        "owner": "",
        "spread_ms": 10.0,
        "test_name": "nothing",
        "opened_at": NOW - timedelta(hours=200),
    }
    checks = (
        Check(name="p", passed=False, kind=Kind.PROPERTY),
        Check(name="f", passed=False, kind=Kind.FIXTURE),
    )
    payload = {**PAYLOAD, "status": 500}
    fixes: list[tuple[str, dict[str, object]]] = [
        ("sample_too_small", {"sample_runs": 5}),
        ("age_out_of_band", {"max_age_hours": 24}),
        ("missing_owner", {"owner": "me"}),
        ("fixture_oracle_drift", {}),
        ("property_red", {}),
        ("fixture_red", {}),
        ("spread_too_tight", {"spread_ms": 300.0}),
        ("not_timing", {"test_name": "list_latency"}),
        ("already_expired", {"opened_at": NOW - timedelta(hours=1)}),
    ]
    seen = []
    for expected, fix in fixes:
        got = run_admit(request(**broken), checks=checks, payload=payload)
        seen.append(got.code)
        assert got.code == expected
        broken.update(fix)
        if expected == "fixture_oracle_drift":
            payload = PAYLOAD
        if expected == "property_red":
            checks = (*checks[1:], *GREEN)
        if expected == "fixture_red":
            checks = GREEN
    assert tuple(seen) == ADMISSION_CODES
    assert run_admit(request(**broken), checks=checks, payload=payload).allowed
