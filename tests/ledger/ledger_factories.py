"""Builders for valid ledger inputs; each test breaks exactly the field it is about.

Decisions come from the real core (``orchestrator.core.lanes.decide``), so a flake
freeze here is written from a genuinely ``flake_queue_eligible`` decision.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from orchestrator import model
from orchestrator.core.digest import canonical_json, digest
from orchestrator.core.lanes import decide

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PROPERTY = "tests/test_roles.py::test_role_allowed"
ASSERTION = f"{PROPERTY}@tests/test_roles.py:9:AssertionError"
ORIGIN = {"user_id": 0, "role": "", "name": "a wide generated payload", "tags": [1, 2, 3]}
MINIMAL = {"user_id": 0, "role": ""}
SHRINK_PATH = (
    {"step": "drop_key", "key": "tags"},
    {"step": "drop_key", "key": "name"},
)
BASE_REV = "a" * 40
PATCH_REV = "b" * 40
IMAGE = "sha256:" + "c" * 64


def replay(label: str, **extra: Any) -> model.Replay:
    failing = label == model.Label.ASSERT_FAIL
    return model.Replay(
        label=label,
        assertion_id=ASSERTION if failing else None,
        calls={"clock": 1},
        duration_ms=10.0,
        image_digest=IMAGE,
        runner_id="local",
        **extra,
    )


MIXED = ("assert_fail", "assert_pass", "assert_fail", "assert_pass", "assert_fail")


def evidence(
    base: tuple[str, ...] = MIXED, patch: tuple[str, ...] = MIXED, **overrides: Any
) -> model.Evidence:
    values: dict[str, Any] = {
        "base_rev": BASE_REV,
        "patch_rev": PATCH_REV,
        "image_digest": IMAGE,
        "runner_id": "local",
        "command": "pytest -q tests/test_roles.py",
        "property_id": PROPERTY,
        "seed": 7,
        "fixture_digest": digest(MINIMAL),
        "origin_digest": digest(ORIGIN),
        "oracle_changed": False,
        "shrink": model.ShrinkSummary(attempts=2, identical_minima=2, stable=True),
        "replays": len(patch),
        "base": tuple(replay(label) for label in base),
        "patch": tuple(replay(label) for label in patch),
    }
    values.update(overrides)
    return model.Evidence(**values)


def eligible() -> tuple[model.Evidence, model.Decision]:
    found = evidence()
    decision = decide(found)
    assert decision.lane is model.Lane.FLAKE_QUEUE_ELIGIBLE, decision
    return found, decision


def flake_record(n: int = 0, **overrides: Any) -> model.FlakeFreeze:
    """A complete flake freeze; ``n`` makes the record (and its digest) distinct."""
    record = model.FlakeFreeze(
        property_id=PROPERTY if n == 0 else f"{PROPERTY}[{n}]",
        assertion_id=ASSERTION,
        seed=7,
        fixture_digest=digest(MINIMAL),
        origin_digest=digest(ORIGIN),
        shrink_path=SHRINK_PATH,
        canonicalization=model.CANONICALIZATION,
        replays={"base": MIXED, "patch": MIXED},
        base_rev=BASE_REV,
        patch_rev=PATCH_REV,
        image_digest=IMAGE,
        runner_id="local",
        command="pytest -q tests/test_roles.py",
        owner="suite-owner",
        opened_at=NOW,
        expires_at=NOW + timedelta(days=3),
    )
    return dataclasses.replace(record, **overrides)


FIXTURE_BYTES = canonical_json(MINIMAL)
ORIGIN_BYTES = json.dumps(ORIGIN, indent=2).encode()  # any spelling; the digest is canonical

SAMPLES_STILL_SLOW = (410.0, 390.0, 420.0, 400.0, 405.0)  # seed 004: fails thaw at 400 ms
SAMPLES_THAWED = (310.0, 320.0, 300.0, 330.0, 315.0)  # seed 004: passes thaw at 400 ms
WIDE_SAMPLES = (700.0, 990.0, 840.0, 860.0, 800.0)  # case D: median 840, spread 290 > 100


def timing_record(**overrides: Any) -> model.TimingFreeze:
    record = model.TimingFreeze(
        test_name="tests/test_latency.py::test_list_latency",
        owner="suite-owner",
        opened_at=NOW,
        max_age_hours=24.0,
        sample_runs=5,
        samples=WIDE_SAMPLES,
        spread_ms=290.0,
        budget_ms=400.0,
        oracle_digest=digest({"status": 200}),
        expires_at=NOW + timedelta(hours=24),
    )
    return dataclasses.replace(record, **overrides)
