"""The ``timing-admission-request/1`` document and its evaluation (seed 004's ``admit``).

A request names one timing check, its samples and budget, the other checks'
results and the fixture payload with its locked oracle digest. ``evaluate``
returns the admission and the ``TimingFreeze`` row it would open, so that a shell
can print it, or hand the row to the ledger (which validates it again with
``core.records.validate_timing_freeze``).

Request document::

    {"schema": "timing-admission-request/1",
     "test_name": "list_latency", "owner": "suite-owner",
     "opened_at": "2026-09-24T11:00:00Z", "max_age_hours": 24,
     "samples": [840, 700, 1000, 820, 900],      # ms; sample_runs = len, spread = max - min
     "sample_runs": 5, "spread_ms": 300,         # optional overrides of the two above
     "budget_ms": 400,
     "checks": [{"name": "list_latency", "passed": false, "kind": "timing"}, ...],
     "payload": {...}, "oracle_keys": ["status", ...], "locked_oracle_digest": "sha256:...",
     "now": "2026-09-24T12:00:00Z"}             # optional; the shell's clock otherwise
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from orchestrator.core.digest import oracle_digest
from orchestrator.core.evidence import check_schema, optional_int, optional_number, optional_str
from orchestrator.core.records import as_utc, timing_freeze_to_json
from orchestrator.core.timing import (
    MAX_AGE_HOURS,
    MIN_AGE_HOURS,
    Admission,
    Check,
    FreezeRequest,
    Kind,
    admit,
    classify_latency,
    latency_summary,
)
from orchestrator.errors import SchemaError
from orchestrator.model import TimingFreeze

REQUEST_SCHEMA = "timing-admission-request/1"
ADMISSION_SCHEMA = "timing-admission/1"


@dataclass(frozen=True, kw_only=True)
class AdmissionRequest:
    freeze: FreezeRequest
    samples: tuple[float, ...]
    checks: tuple[Check, ...]
    payload: Any
    oracle_keys: tuple[str, ...]
    locked_oracle_digest: str
    now: datetime | None


@dataclass(frozen=True, kw_only=True)
class AdmissionOutcome:
    """The admission, and the freeze row it opens (written only when ``allowed``)."""

    request: AdmissionRequest
    admission: Admission
    freeze: TimingFreeze
    latency_ms: float | None
    latency_class: Kind | None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": ADMISSION_SCHEMA,
            "test_name": self.request.freeze.test_name,
            "code": self.admission.code,
            "allowed": self.admission.allowed,
            "detail": self.admission.detail,
            "expires_at": self.admission.to_json()["expires_at"],
            "latency_ms": self.latency_ms,
            "spread_ms": self.request.freeze.spread_ms,
            "budget_ms": self.request.freeze.budget_ms,
            "sample_runs": self.request.freeze.sample_runs,
            "latency_class": None if self.latency_class is None else self.latency_class.value,
            "freeze": timing_freeze_to_json(self.freeze) if self.admission.allowed else None,
        }


def parse_time(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise SchemaError(f"{name}: expected an ISO-8601 timestamp string")
    try:
        return as_utc(datetime.fromisoformat(value))
    except ValueError:
        raise SchemaError(f"{name}: not an ISO-8601 timestamp: {value!r}") from None


def _required(value: Any, name: str) -> Any:
    if value is None:
        raise SchemaError(f"{name}: missing")
    return value


def _checks(value: Any) -> tuple[Check, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SchemaError("checks: expected an array of {name, passed, kind}")
    checks = []
    kinds = {kind.value: kind for kind in Kind}
    for index, item in enumerate(value):
        where = f"checks[{index}]"
        if not isinstance(item, Mapping):
            raise SchemaError(f"{where}: expected an object")
        name = _required(optional_str(item, "name", f"{where}."), f"{where}.name")
        passed = item.get("passed")
        if not isinstance(passed, bool):
            raise SchemaError(f"{where}.passed: expected true or false")
        kind = item.get("kind")
        if kind not in kinds:
            raise SchemaError(f"{where}.kind: expected one of {', '.join(sorted(kinds))}")
        checks.append(Check(name=name, passed=passed, kind=kinds[kind]))
    return tuple(checks)


def _samples(value: Any) -> tuple[float, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or any(
        isinstance(s, bool) or not isinstance(s, int | float) for s in value
    ):
        raise SchemaError("samples: expected an array of numbers (milliseconds)")
    return tuple(float(s) for s in value)


def _oracle_keys(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise SchemaError("oracle_keys: expected an array of strings")
    return tuple(value)


def parse_admission_request(doc: Any) -> AdmissionRequest:
    obj = check_schema(doc, REQUEST_SCHEMA)
    samples = _samples(obj.get("samples"))
    sample_runs = optional_int(obj, "sample_runs")
    spread = optional_number(obj, "spread_ms")
    if spread is None:
        spread = latency_summary(samples)[1] if samples else 0.0
    freeze = FreezeRequest(
        test_name=_required(optional_str(obj, "test_name"), "test_name"),
        owner=optional_str(obj, "owner") or "",
        opened_at=parse_time(_required(obj.get("opened_at"), "opened_at"), "opened_at"),
        max_age_hours=_required(optional_number(obj, "max_age_hours"), "max_age_hours"),
        sample_runs=len(samples) if sample_runs is None else sample_runs,
        spread_ms=spread,
        budget_ms=_required(optional_number(obj, "budget_ms"), "budget_ms"),
    )
    now = obj.get("now")
    return AdmissionRequest(
        freeze=freeze,
        samples=samples,
        checks=_checks(obj.get("checks")),
        payload=obj.get("payload"),
        oracle_keys=_oracle_keys(obj.get("oracle_keys")),
        locked_oracle_digest=_required(
            optional_str(obj, "locked_oracle_digest"), "locked_oracle_digest"
        ),
        now=None if now is None else parse_time(now, "now"),
    )


def evaluate(request: AdmissionRequest, now: datetime) -> AdmissionOutcome:
    """Seed 004's ``admit`` on the request, plus the timing freeze row it would open."""
    freeze = request.freeze
    admission = admit(
        freeze,
        request.checks,
        request.payload,
        request.locked_oracle_digest,
        as_utc(now),
        oracle_keys=request.oracle_keys,
    )
    latency = latency_summary(request.samples)[0] if request.samples else None
    latency_class = (
        None if latency is None else classify_latency(latency, freeze.budget_ms, freeze.spread_ms)
    )
    try:
        digest_of_oracle: str | None = oracle_digest(request.payload, request.oracle_keys)
    except SchemaError:
        digest_of_oracle = None
    row = TimingFreeze(
        test_name=freeze.test_name,
        owner=freeze.owner,
        opened_at=freeze.opened_at,
        max_age_hours=freeze.max_age_hours,
        sample_runs=freeze.sample_runs,
        samples=request.samples,
        spread_ms=freeze.spread_ms,
        budget_ms=freeze.budget_ms,
        oracle_digest=digest_of_oracle,
        expires_at=admission.expires_at or _expiry(freeze),
    )
    return AdmissionOutcome(
        request=request,
        admission=admission,
        freeze=row,
        latency_ms=latency,
        latency_class=latency_class,
    )


def _expiry(freeze: FreezeRequest) -> datetime | None:
    """``opened_at + max_age``, when the age is one ``admit`` could accept."""
    if not MIN_AGE_HOURS <= freeze.max_age_hours <= MAX_AGE_HOURS:
        return None
    return freeze.opened_at + timedelta(hours=freeze.max_age_hours)
