"""Builders for the pure-core tests: evidence documents and values with sane defaults."""

from __future__ import annotations

from typing import Any

from orchestrator.core.digest import digest
from orchestrator.model import Evidence, Replay, ShrinkSummary

PROPERTY_ID = "tests/test_budget.py::test_clock_budget"
ASSERTION = f"{PROPERTY_ID}@tests/test_budget.py:9:AssertionError"
OTHER_ASSERTION = f"{PROPERTY_ID}@tests/test_budget.py:12:KeyError"
FIXTURE_DIGEST = digest({"user_id": 0, "role": ""})


def replay(label: str = "assert_pass", **fields: Any) -> Replay:
    if label == "assert_fail":
        fields.setdefault("assertion_id", ASSERTION)
    fields.setdefault("calls", {"clock": 1})
    fields.setdefault("duration_ms", 12.5)
    return Replay(label=label, **fields)


def side(*labels: str, **fields: Any) -> tuple[Replay, ...]:
    return tuple(replay(label, **fields) for label in labels)


def evidence(
    base: tuple[Replay, ...] | None = None,
    patch: tuple[Replay, ...] | None = None,
    **fields: Any,
) -> Evidence:
    base = side("assert_pass", "assert_pass", "assert_pass") if base is None else base
    patch = side("assert_pass", "assert_pass", "assert_pass") if patch is None else patch
    values: dict[str, Any] = {
        "base_rev": "a" * 40,
        "patch_rev": "b" * 40,
        "image_digest": "sha256:" + "1" * 64,
        "runner_id": "local",
        "command": "pytest -q tests/test_budget.py",
        "property_id": PROPERTY_ID,
        "seed": 0,
        "fixture_digest": FIXTURE_DIGEST,
        "origin_digest": FIXTURE_DIGEST,
        "oracle_changed": False,
        "shrink": ShrinkSummary(attempts=2, identical_minima=2, stable=True),
        "replays": len(base),
        "base": base,
        "patch": patch,
    }
    values.update(fields)
    return Evidence(**values)


def evidence_doc(**overrides: Any) -> dict[str, Any]:
    doc = evidence().to_json()
    doc.update(overrides)
    return doc
