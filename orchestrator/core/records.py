"""Freeze records (lanes.md section 5): validation, the rows' canonical JSON, and the
flake freeze a replay's evidence makes.

A missing or empty field is a hard reject with its own code, never a default.
Validators return every rejection code in a fixed order; an empty tuple means the
record may be written. ``now`` is passed in: nothing here reads a clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from orchestrator.core.digest import NULL_DIGEST, digest
from orchestrator.core.lanes import failing_assertions
from orchestrator.core.timing import TIMING_DEBT_OPENED
from orchestrator.model import (
    CANONICALIZATION,
    FREEZE_SCHEMA,
    Decision,
    Evidence,
    FlakeFreeze,
    FreezeKind,
    Lane,
    TimingFreeze,
)

FLAKE_FIELDS = (
    "property_id",
    "assertion_id",
    "seed",
    "fixture_digest",
    "origin_digest",
    "shrink_path",
    "canonicalization",
    "replays",
    "base_rev",
    "patch_rev",
    "image_digest",
    "runner_id",
    "command",
    "owner",
    "opened_at",
    "expires_at",
)
TIMING_FIELDS = (
    "test_name",
    "owner",
    "opened_at",
    "max_age_hours",
    "sample_runs",
    "samples",
    "spread_ms",
    "budget_ms",
    "oracle_digest",
    "expires_at",
)


def as_utc(moment: datetime) -> datetime:
    """Naive datetimes are taken as UTC so that comparisons never raise."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _empty(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, Mapping | tuple | list | set | frozenset):
        return len(value) == 0
    return False


def _missing_flake(record: FlakeFreeze, name: str) -> bool:
    value = getattr(record, name)
    if name == "shrink_path":
        # An empty path is legitimate when nothing was shrunk (checked separately).
        return value is None
    if name == "replays":
        return (
            _empty(value)
            or not isinstance(value, Mapping)
            or any(_empty(value.get(side)) for side in ("base", "patch"))
        )
    return _empty(value)


def _expiry_codes(
    opened_at: datetime | None, expires_at: datetime | None, now: datetime, max_age: timedelta
) -> list[str]:
    if expires_at is None:
        return []
    codes = []
    expires = as_utc(expires_at)
    if expires <= as_utc(now):
        codes.append("expiry_not_in_future")
    start = as_utc(now) if opened_at is None else as_utc(opened_at)
    if expires - start > max_age:
        codes.append("expiry_beyond_max")
    return codes


def validate_flake_freeze(
    record: FlakeFreeze, *, decision: Decision, now: datetime, max_age: timedelta
) -> tuple[str, ...]:
    """Rejection codes for a flake freeze row; empty means it may be written."""
    codes = [f"missing_field:{name}" for name in FLAKE_FIELDS if _missing_flake(record, name)]
    if decision.lane is not Lane.FLAKE_QUEUE_ELIGIBLE or not decision.freeze_allowed:
        codes.append("not_flake_queue_eligible")
    codes.extend(_expiry_codes(record.opened_at, record.expires_at, now, max_age))
    if (
        record.shrink_path is not None
        and len(record.shrink_path) == 0
        and record.origin_digest is not None
        and record.fixture_digest is not None
        and record.origin_digest != record.fixture_digest
    ):
        codes.append("shrink_path_missing")
    return tuple(codes)


def validate_timing_freeze(
    record: TimingFreeze, *, admission_code: str, now: datetime, max_age: timedelta
) -> tuple[str, ...]:
    """Rejection codes for a timing freeze row; empty means it may be written."""
    codes = [f"missing_field:{name}" for name in TIMING_FIELDS if _empty(getattr(record, name))]
    if admission_code != TIMING_DEBT_OPENED:
        codes.append("not_timing_debt_opened")
    codes.extend(_expiry_codes(record.opened_at, record.expires_at, now, max_age))
    return tuple(codes)


def payload_bytes_codes(
    record: FlakeFreeze, fixture_bytes: bytes | None, origin_bytes: bytes | None
) -> tuple[str, ...]:
    """Rejection codes for the two payloads a flake freeze keeps beside its record: each
    must be present, UTF-8 JSON, and match its digest in the record (when it has one)."""
    codes: list[str] = []
    for name, blob, expected in (
        ("fixture_bytes", fixture_bytes, record.fixture_digest),
        ("origin_bytes", origin_bytes, record.origin_digest),
    ):
        if blob is None:
            codes.append(f"missing_field:{name}")
            continue
        try:
            parsed = json.loads(blob.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            codes.append(f"{name}_not_json")
            continue
        if expected and digest(parsed) != expected:
            codes.append(f"{name}_digest_mismatch")
    return tuple(codes)


# The bytes a flake freeze keeps for a payload that is JSON ``null``: what a replay
# without a fixture read (its fixture and origin digests are those of ``null``).
NULL_PAYLOAD = b"null"


def freeze_payloads(
    record: FlakeFreeze, fixture_bytes: bytes | None, origin_bytes: bytes | None
) -> tuple[bytes | None, bytes | None]:
    """The two payloads to keep beside a flake freeze. A payload whose digest in the
    record is that of JSON ``null`` and whose bytes were not given (a replay without a
    fixture: lanes.md, "Where the fixture came from") is kept as ``null``, the exact
    payload the digest names; any other missing payload stays missing, and
    :func:`payload_bytes_codes` refuses the record."""
    return (
        NULL_PAYLOAD
        if fixture_bytes is None and record.fixture_digest == NULL_DIGEST
        else fixture_bytes,
        NULL_PAYLOAD
        if origin_bytes is None and record.origin_digest == NULL_DIGEST
        else origin_bytes,
    )


def fixture_to_mount(fixture_digest: str | None, stored: bytes | None) -> bytes | None:
    """The fixture a re-probe of a flake freeze mounts: none when the replay that opened it
    had none (its digest is that of ``null``; ``reproduce`` reads the same rule), else the
    stored minimal fixture."""
    return None if fixture_digest == NULL_DIGEST else stored


def iso_utc(moment: datetime | None) -> str | None:
    return None if moment is None else as_utc(moment).isoformat()


def parse_iso(value: str | None) -> datetime | None:
    return None if value is None else as_utc(datetime.fromisoformat(value))


def flake_freeze_to_json(record: FlakeFreeze) -> dict[str, Any]:
    """The flake freeze row as a JSON document (records.md field names, UTC ISO-8601)."""
    return {
        "schema": FREEZE_SCHEMA,
        "kind": FreezeKind.FLAKE.value,
        "property_id": record.property_id,
        "assertion_id": record.assertion_id,
        "seed": record.seed,
        "fixture_digest": record.fixture_digest,
        "origin_digest": record.origin_digest,
        "shrink_path": None
        if record.shrink_path is None
        else [dict(step) for step in record.shrink_path],
        "canonicalization": record.canonicalization,
        "replays": None
        if record.replays is None
        else {side: list(labels) for side, labels in sorted(record.replays.items())},
        "base_rev": record.base_rev,
        "patch_rev": record.patch_rev,
        "image_digest": record.image_digest,
        "runner_id": record.runner_id,
        "command": record.command,
        "owner": record.owner,
        "opened_at": iso_utc(record.opened_at),
        "expires_at": iso_utc(record.expires_at),
    }


def timing_freeze_to_json(record: TimingFreeze) -> dict[str, Any]:
    """The timing freeze row as a JSON document (UTC ISO-8601 datetimes)."""
    return {
        "schema": FREEZE_SCHEMA,
        "kind": FreezeKind.TIMING.value,
        "test_name": record.test_name,
        "owner": record.owner,
        "opened_at": iso_utc(record.opened_at),
        "max_age_hours": record.max_age_hours,
        "sample_runs": record.sample_runs,
        "samples": None if record.samples is None else list(record.samples),
        "spread_ms": record.spread_ms,
        "budget_ms": record.budget_ms,
        "oracle_digest": record.oracle_digest,
        "expires_at": iso_utc(record.expires_at),
    }


def flake_freeze_from_json(doc: Mapping[str, Any]) -> FlakeFreeze:
    """Inverse of ``flake_freeze_to_json`` (for rows read back from the ledger)."""
    path = doc.get("shrink_path")
    replays = doc.get("replays")
    return FlakeFreeze(
        property_id=doc.get("property_id"),
        assertion_id=doc.get("assertion_id"),
        seed=doc.get("seed"),
        fixture_digest=doc.get("fixture_digest"),
        origin_digest=doc.get("origin_digest"),
        shrink_path=None if path is None else tuple(dict(step) for step in path),
        canonicalization=doc.get("canonicalization"),
        replays=None
        if replays is None
        else {side: tuple(labels) for side, labels in replays.items()},
        base_rev=doc.get("base_rev"),
        patch_rev=doc.get("patch_rev"),
        image_digest=doc.get("image_digest"),
        runner_id=doc.get("runner_id"),
        command=doc.get("command"),
        owner=doc.get("owner"),
        opened_at=parse_iso(doc.get("opened_at")),
        expires_at=parse_iso(doc.get("expires_at")),
    )


def timing_freeze_from_json(doc: Mapping[str, Any]) -> TimingFreeze:
    """Inverse of ``timing_freeze_to_json``."""
    samples = doc.get("samples")
    return TimingFreeze(
        test_name=doc.get("test_name"),
        owner=doc.get("owner"),
        opened_at=parse_iso(doc.get("opened_at")),
        max_age_hours=doc.get("max_age_hours"),
        sample_runs=doc.get("sample_runs"),
        samples=None if samples is None else tuple(float(s) for s in samples),
        spread_ms=doc.get("spread_ms"),
        budget_ms=doc.get("budget_ms"),
        oracle_digest=doc.get("oracle_digest"),
        expires_at=parse_iso(doc.get("expires_at")),
    )


def failing_assertion(evidence: Evidence) -> str | None:
    """The one assertion the patch's failing replays share (row 12 needs one), else None."""
    ids = sorted(i for i in failing_assertions(evidence.patch) if i)
    return ids[0] if len(ids) == 1 else None


def flake_freeze_from_replay(
    evidence: Evidence,
    *,
    owner: str | None,
    expires_at: datetime | None,
    shrink_path: Sequence[Mapping[str, Any]],
    now: datetime,
) -> FlakeFreeze:
    """The freeze record a replay's pinned facts make (validated by
    :func:`validate_flake_freeze` before it is written)."""
    return FlakeFreeze(
        property_id=evidence.property_id,
        assertion_id=failing_assertion(evidence),
        seed=evidence.seed,
        fixture_digest=evidence.fixture_digest,
        origin_digest=evidence.origin_digest,
        shrink_path=tuple(dict(step) for step in shrink_path),
        canonicalization=CANONICALIZATION,
        replays={
            "base": tuple(replay.label for replay in evidence.base),
            "patch": tuple(replay.label for replay in evidence.patch),
        },
        base_rev=evidence.base_rev,
        patch_rev=evidence.patch_rev,
        image_digest=evidence.image_digest,
        runner_id=evidence.runner_id,
        command=evidence.command,
        owner=owner,
        opened_at=now,
        expires_at=expires_at,
    )
