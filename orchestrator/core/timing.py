"""Timing debt (lanes.md section 4, seed 004): a separate probe, never mixed into labels.

With samples ``s`` (ms) of one named check and its written budget ``b``:
``latency = median(s)``, ``spread = max(s) - min(s)``, ``band = 0.25 * b``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from orchestrator.core.digest import oracle_digest

BAND_FRACTION = 0.25
MIN_SAMPLES = 5
MIN_AGE_HOURS = 1
MAX_AGE_HOURS = 72

# Admission codes, in the order ``admit`` checks them.
ADMISSION_CODES = (
    "sample_too_small",
    "age_out_of_band",
    "missing_owner",
    "fixture_oracle_drift",
    "property_red",
    "fixture_red",
    "spread_too_tight",
    "not_timing",
    "already_expired",
)
TIMING_DEBT_OPENED = "timing_debt_opened"


class Kind(StrEnum):
    PROPERTY = "property"
    FIXTURE = "fixture"
    TIMING = "timing"
    UNKNOWN = "unknown"


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    passed: bool
    kind: Kind


@dataclass(frozen=True, kw_only=True)
class FreezeRequest:
    test_name: str
    owner: str
    opened_at: datetime
    max_age_hours: float
    sample_runs: int
    spread_ms: float
    budget_ms: float


@dataclass(frozen=True, kw_only=True)
class Admission:
    allowed: bool
    code: str
    detail: str
    expires_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "code": self.code,
            "detail": self.detail,
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
        }


def band(budget_ms: float) -> float:
    return BAND_FRACTION * budget_ms


def latency_summary(samples_ms: Sequence[float]) -> tuple[float, float]:
    """``(median, spread)`` of the samples; an empty list has neither."""
    if not samples_ms:
        raise ValueError("latency_summary needs at least one sample")
    return float(statistics.median(samples_ms)), float(max(samples_ms) - min(samples_ms))


def classify_latency(latency_ms: float, budget_ms: float, spread_ms: float) -> Kind:
    """Within budget: ``unknown``; wide spread: ``timing``; a stable overrun: ``property``."""
    if latency_ms <= budget_ms:
        return Kind.UNKNOWN
    if spread_ms > band(budget_ms):
        return Kind.TIMING
    return Kind.PROPERTY


def thaw_allowed(samples_ms: Sequence[float], budget_ms: float) -> bool:
    """At least 5 samples, all within budget, spread inside the band."""
    if len(samples_ms) < MIN_SAMPLES:
        return False
    if max(samples_ms) > budget_ms:
        return False
    return max(samples_ms) - min(samples_ms) <= band(budget_ms)


def admit(
    request: FreezeRequest,
    checks: Sequence[Check],
    payload: Any,
    locked_oracle_digest: str,
    now: datetime,
    *,
    oracle_keys: Sequence[str] = (),
) -> Admission:
    """The first failing admission code, in seed 004's order, or ``timing_debt_opened``."""

    def refuse(code: str, detail: str) -> Admission:
        return Admission(allowed=False, code=code, detail=detail)

    if request.sample_runs < MIN_SAMPLES:
        return refuse("sample_too_small", f"need >= {MIN_SAMPLES} samples")
    if not MIN_AGE_HOURS <= request.max_age_hours <= MAX_AGE_HOURS:
        return refuse("age_out_of_band", f"age must be {MIN_AGE_HOURS}..{MAX_AGE_HOURS} hours")
    if not request.owner.strip():
        return refuse("missing_owner", "owner is required")
    if _payload_oracle_digest(payload, oracle_keys) != locked_oracle_digest:
        return refuse("fixture_oracle_drift", "oracle keys moved")
    red_properties = [c.name for c in checks if c.kind is Kind.PROPERTY and not c.passed]
    if red_properties:
        return refuse("property_red", "red properties: " + ", ".join(red_properties))
    red_fixtures = [c.name for c in checks if c.kind is Kind.FIXTURE and not c.passed]
    if red_fixtures:
        return refuse("fixture_red", "red fixture checks: " + ", ".join(red_fixtures))
    if request.spread_ms <= band(request.budget_ms):
        return refuse("spread_too_tight", "a tight overrun is not timing debt")
    target = [
        c for c in checks if c.name == request.test_name and c.kind is Kind.TIMING and not c.passed
    ]
    if not target:
        return refuse("not_timing", "the target is not a failing timing check")
    expires_at = request.opened_at + timedelta(hours=request.max_age_hours)
    if now > expires_at:
        return refuse("already_expired", "the request is past its max age")
    return Admission(
        allowed=True,
        code=TIMING_DEBT_OPENED,
        detail=expires_at.isoformat(),
        expires_at=expires_at,
    )


def _payload_oracle_digest(payload: Any, oracle_keys: Sequence[str]) -> str | None:
    """The payload's oracle digest, or ``None`` when it cannot have one (drift)."""
    if oracle_keys and not isinstance(payload, Mapping):
        return None
    return oracle_digest(payload, oracle_keys)
