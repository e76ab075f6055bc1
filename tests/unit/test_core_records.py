"""Freeze-record validation (lanes.md section 5) and evidence parsing (records.md)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from unit_factories import (
    ASSERTION,
    FIXTURE_DIGEST,
    OTHER_ASSERTION,
    PROPERTY_ID,
    evidence,
    evidence_doc,
    replay,
    side,
)

from orchestrator.core.digest import NULL_DIGEST, digest
from orchestrator.core.evidence import parse_evidence, parse_shrink_report
from orchestrator.core.lanes import decide
from orchestrator.core.records import (
    FLAKE_FIELDS,
    TIMING_FIELDS,
    fixture_to_mount,
    flake_freeze_from_json,
    flake_freeze_from_replay,
    flake_freeze_to_json,
    freeze_payloads,
    payload_bytes_codes,
    timing_freeze_from_json,
    timing_freeze_to_json,
    validate_flake_freeze,
    validate_timing_freeze,
)
from orchestrator.errors import SchemaError
from orchestrator.model import Decision, FlakeFreeze, Lane, TimingFreeze

NOW = datetime(2026, 9, 24, 12, 0, tzinfo=UTC)
MAX_AGE = timedelta(days=7)
ELIGIBLE = Decision(
    lane=Lane.FLAKE_QUEUE_ELIGIBLE, code="flake_queue_eligible", blocking=False, freeze_allowed=True
)
ORIGIN = digest({"user_id": 4242, "role": "ghost", "noise": 1})


def flake(**overrides: Any) -> FlakeFreeze:
    values: dict[str, Any] = {
        "property_id": PROPERTY_ID,
        "assertion_id": ASSERTION,
        "seed": 0,
        "fixture_digest": FIXTURE_DIGEST,
        "origin_digest": ORIGIN,
        "shrink_path": ({"op": "drop_key", "path": ["noise"]},),
        "canonicalization": "json-sort-keys",
        "replays": {
            "base": ("assert_fail",) * 3,
            "patch": ("assert_fail", "assert_pass", "assert_fail"),
        },
        "base_rev": "a" * 40,
        "patch_rev": "b" * 40,
        "image_digest": "sha256:" + "1" * 64,
        "runner_id": "local",
        "command": "pytest -q tests/test_budget.py",
        "owner": "suite-owner",
        "opened_at": NOW,
        "expires_at": NOW + timedelta(days=3),
    }
    values.update(overrides)
    return FlakeFreeze(**values)


def timing(**overrides: Any) -> TimingFreeze:
    values: dict[str, Any] = {
        "test_name": "list_latency",
        "owner": "suite-owner",
        "opened_at": NOW,
        "max_age_hours": 24,
        "sample_runs": 5,
        "samples": (840.0, 700.0, 1000.0, 820.0, 900.0),
        "spread_ms": 300.0,
        "budget_ms": 400.0,
        "oracle_digest": "sha256:" + "e" * 64,
        "expires_at": NOW + timedelta(hours=24),
    }
    values.update(overrides)
    return TimingFreeze(**values)


def check_flake(record: FlakeFreeze, decision: Decision = ELIGIBLE) -> tuple[str, ...]:
    return validate_flake_freeze(record, decision=decision, now=NOW, max_age=MAX_AGE)


def test_a_complete_flake_freeze_is_valid() -> None:
    assert check_flake(flake()) == ()


@pytest.mark.parametrize("name", [n for n in FLAKE_FIELDS if n != "shrink_path"])
@pytest.mark.parametrize("empty", [None, ""])
def test_every_missing_or_empty_flake_field_has_its_code(name: str, empty: Any) -> None:
    if name in ("seed", "opened_at", "expires_at") and empty == "":
        empty = None
    if name == "replays" and empty == "":
        empty = {"base": (), "patch": ("assert_pass",)}
    codes = check_flake(flake(**{name: empty}))
    assert codes[0] == f"missing_field:{name}"


def test_missing_shrink_path_and_unexplained_empty_path() -> None:
    assert check_flake(flake(shrink_path=None)) == ("missing_field:shrink_path",)
    assert check_flake(flake(shrink_path=())) == ("shrink_path_missing",)
    # Nothing was shrunk: origin equals fixture and an empty path is honest.
    assert check_flake(flake(shrink_path=(), origin_digest=FIXTURE_DIGEST)) == ()


def test_flake_freeze_needs_the_eligible_lane() -> None:
    blocking = decide(evidence(base=(), patch=(), replays=0))
    assert "not_flake_queue_eligible" in check_flake(flake(), blocking)


def test_expiry_rules_and_fixed_order() -> None:
    assert check_flake(flake(expires_at=NOW)) == ("expiry_not_in_future",)
    assert check_flake(flake(expires_at=NOW + timedelta(days=8))) == ("expiry_beyond_max",)
    codes = check_flake(
        flake(owner="", expires_at=NOW - timedelta(days=1), shrink_path=()),
        decision=dataclasses.replace(ELIGIBLE, lane=Lane.BLOCK_PATCH, freeze_allowed=False),
    )
    assert codes == (
        "missing_field:owner",
        "not_flake_queue_eligible",
        "expiry_not_in_future",
        "shrink_path_missing",
    )


def test_naive_datetimes_are_taken_as_utc() -> None:
    naive = flake(
        opened_at=NOW.replace(tzinfo=None),
        expires_at=(NOW + timedelta(days=1)).replace(tzinfo=None),
    )
    assert check_flake(naive) == ()


def test_a_flake_freeze_from_eligible_evidence_is_valid() -> None:
    ev = evidence(
        base=side("assert_fail", "assert_pass", "assert_fail"),
        patch=side("assert_pass", "assert_fail", "assert_fail"),
    )
    decision = decide(ev)
    assert decision.lane is Lane.FLAKE_QUEUE_ELIGIBLE
    record = flake_freeze_from_replay(
        ev, owner="suite-owner", expires_at=NOW + timedelta(days=3), shrink_path=(), now=NOW
    )
    assert record.assertion_id == ASSERTION
    assert record.replays == {
        "base": ("assert_fail", "assert_pass", "assert_fail"),
        "patch": ("assert_pass", "assert_fail", "assert_fail"),
    }
    assert (record.opened_at, record.canonicalization) == (NOW, "json-sort-keys")
    assert validate_flake_freeze(record, decision=decision, now=NOW, max_age=MAX_AGE) == ()


def test_a_replay_without_a_fixture_keeps_null_and_nothing_else_is_invented() -> None:
    without = flake(fixture_digest=NULL_DIGEST, origin_digest=NULL_DIGEST, shrink_path=())
    assert check_flake(without) == ()
    payloads = freeze_payloads(without, None, None)
    assert payloads == (b"null", b"null")
    assert payload_bytes_codes(without, *payloads) == ()
    # Given bytes are kept as given (checked against the digest as always).
    assert freeze_payloads(without, b"1", None) == (b"1", b"null")
    assert payload_bytes_codes(without, b"1", b"null") == ("fixture_bytes_digest_mismatch",)
    # A payload that is not null is never made up: the record stays incomplete.
    shrunk_from_nothing = flake(origin_digest=NULL_DIGEST)
    assert freeze_payloads(shrunk_from_nothing, None, None) == (None, b"null")
    assert payload_bytes_codes(shrunk_from_nothing, None, b"null") == (
        "missing_field:fixture_bytes",
    )
    assert freeze_payloads(flake(), None, None) == (None, None)


def test_a_re_probe_mounts_no_fixture_where_the_replay_had_none() -> None:
    assert fixture_to_mount(NULL_DIGEST, b"null") is None
    assert fixture_to_mount(FIXTURE_DIGEST, b'{"n": 1}') == b'{"n": 1}'


def test_a_flake_freeze_needs_the_one_assertion_the_patch_fails_at() -> None:
    two = (replay("assert_fail"), replay("assert_fail", assertion_id=OTHER_ASSERTION))
    ev = evidence(patch=(*two, replay("assert_pass")))
    record = flake_freeze_from_replay(ev, owner="o", expires_at=None, shrink_path=(), now=NOW)
    assert record.assertion_id is None
    codes = validate_flake_freeze(record, decision=ELIGIBLE, now=NOW, max_age=MAX_AGE)
    assert "missing_field:assertion_id" in codes


def test_timing_freeze_validation() -> None:
    def check(record: TimingFreeze, code: str = "timing_debt_opened") -> tuple[str, ...]:
        return validate_timing_freeze(
            record, admission_code=code, now=NOW, max_age=timedelta(hours=72)
        )

    assert check(timing()) == ()
    for name in TIMING_FIELDS:
        assert check(timing(**{name: None}))[0] == f"missing_field:{name}"
    assert check(timing(samples=())) == ("missing_field:samples",)
    assert check(timing(owner=" ")) == ("missing_field:owner",)
    assert check(timing(), "spread_too_tight") == ("not_timing_debt_opened",)
    assert check(timing(expires_at=NOW + timedelta(hours=100))) == ("expiry_beyond_max",)


def test_freeze_rows_round_trip_through_json() -> None:
    row = flake_freeze_to_json(flake())
    assert row["opened_at"] == "2026-09-24T12:00:00+00:00"
    assert row["canonicalization"] == "json-sort-keys"
    assert "merge" not in row
    assert flake_freeze_from_json(row) == flake()
    assert timing_freeze_from_json(timing_freeze_to_json(timing())) == timing()


# --- evidence parsing -------------------------------------------------------------------


def test_parse_evidence_round_trips_the_records_example() -> None:
    ev = evidence()
    assert parse_evidence(ev.to_json()) == ev


def test_parse_evidence_round_trips_oracle_digests_reasons_and_assertion_keys() -> None:
    key = "tests/test_budget.py::test_clock_budget@test_clock_budget+4:AssertionError"
    ev = evidence(
        patch=side("assert_fail", "assert_pass", "assert_fail", assertion_key=key),
        base_oracle_digest="sha256:" + "a" * 64,
        patch_oracle_digest=None,
        oracle_reasons=("gone on patch",),
    )
    doc = ev.to_json()
    assert doc["patch"][0]["assertion_key"] == key
    assert doc["base_oracle_digest"] == "sha256:" + "a" * 64
    assert doc["patch_oracle_digest"] is None
    assert doc["oracle_reasons"] == ["gone on patch"]
    assert doc["tests_from"] is None
    assert parse_evidence(doc) == ev


def test_evidence_without_the_added_fields_still_parses() -> None:
    doc = evidence_doc()
    for name in ("base_oracle_digest", "patch_oracle_digest", "oracle_reasons"):
        del doc[name]
    for replay_doc in doc["base"] + doc["patch"]:
        del replay_doc["assertion_key"]
    assert parse_evidence(doc) == evidence()


def test_missing_fields_and_unknown_labels_parse_and_are_decided_malformed() -> None:
    doc = evidence_doc()
    del doc["command"]
    doc["patch"][0]["label"] = "assert_maybe"
    decision = decide(parse_evidence(doc))
    assert (decision.lane, decision.code) == (Lane.REJECT_MALFORMED, "missing_field:command")
    assert any("assert_maybe" in reason for reason in decision.reasons)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema="replay-evidence/2"), "replay-evidence/1"),
        (lambda d: d.pop("schema"), "no schema"),
        (lambda d: d.update(seed="zero"), "seed"),
        (lambda d: d.update(seed=True), "seed"),
        (lambda d: d.update(base="many"), "base"),
        (lambda d: d["patch"][0].update(calls={"clock": -1}), "patch[0].calls.clock"),
        (lambda d: d["patch"][1].update(label=3), "patch[1].label"),
        (lambda d: d.update(shrink={"attempts": 2}), "shrink.identical_minima"),
        (lambda d: d.update(oracle_changed="no"), "oracle_changed"),
        (lambda d: d.update(base_oracle_digest=1), "base_oracle_digest"),
        (lambda d: d.update(oracle_reasons="test body"), "oracle_reasons"),
        (lambda d: d.update(oracle_reasons=["test body", 2]), "oracle_reasons[1]"),
        (lambda d: d["base"][0].update(assertion_key=4), "base[0].assertion_key"),
    ],
)
def test_wrong_shapes_are_schema_errors(mutate: Any, message: str) -> None:
    doc = evidence_doc()
    mutate(doc)
    with pytest.raises(SchemaError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_evidence(doc)


def test_not_an_object_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="expected a JSON object"):
        parse_evidence([1, 2])


def test_parse_shrink_report() -> None:
    doc = {
        "schema": "shrink-report/1",
        "minimal": {"user_id": 0, "role": ""},
        "minimal_digest": FIXTURE_DIGEST,
        "origin_digest": ORIGIN,
        "shrink_path": [{"op": "drop_key", "path": ["noise"]}],
        "property_calls": 9,
        "attempts": 2,
        "identical_minima": 2,
        "stable": True,
    }
    summary = parse_shrink_report(doc)
    assert (summary.attempts, summary.identical_minima, summary.stable) == (2, 2, True)
    assert summary.minimal_digest == FIXTURE_DIGEST
    assert summary.shrink_path == ({"op": "drop_key", "path": ["noise"]},)
    with pytest.raises(SchemaError):
        parse_shrink_report({**doc, "schema": "replay-evidence/1"})
    # A host-side report has no test pins; a test's report (shrink --test) has them.
    assert (summary.test, summary.rev, summary.image_id, summary.seed) == (None,) * 4
    pinned = {
        **doc,
        "test": "tests/test_users.py::test_role",
        "rev": "c" * 40,
        "image_id": "sha256:" + "d" * 64,
        "seed": 3,
        "assertion_key": "tests/test_users.py::test_role@test_role+3:AssertionError",
    }
    summary = parse_shrink_report(pinned)
    assert (summary.test, summary.rev, summary.image_id, summary.seed) == (
        "tests/test_users.py::test_role",
        "c" * 40,
        "sha256:" + "d" * 64,
        3,
    )
    assert {"test", "rev", "image_id", "seed"} <= set(summary.to_json())
    with pytest.raises(SchemaError, match="seed"):
        parse_shrink_report({**pinned, "seed": "3"})


def test_parse_evidence_round_trips_tests_from() -> None:
    ev = evidence(tests_from="3" * 40)
    assert parse_evidence(ev.to_json()) == ev
    doc = ev.to_json()
    del doc["tests_from"]  # documents from other CI systems: absent is null
    assert parse_evidence(doc).tests_from is None
