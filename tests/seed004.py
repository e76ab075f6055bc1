"""Seed 004's synthetic harness as a request document: case D (wide spread over budget,
every other gate green), shared by the admit tests of the core and of the ledger; and
its thaw sample lists."""

from __future__ import annotations

from typing import Any

from orchestrator.core.digest import oracle_digest

ORACLE_KEYS = ["status", "schema_version", "body_sha256"]
PAYLOAD = {"status": 200, "schema_version": 3, "body_sha256": "abc123", "request_id": "v"}
SAMPLES_STILL_SLOW = (410.0, 390.0, 420.0, 400.0, 405.0)  # fails thaw at 400 ms
SAMPLES_THAWED = (310.0, 320.0, 300.0, 330.0, 315.0)  # passes thaw at 400 ms


def admission_request(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "timing-admission-request/1",
        "test_name": "list_latency",
        "owner": "suite-owner",
        "opened_at": "2026-09-24T11:00:00Z",
        "max_age_hours": 24,
        "samples": [840, 700, 1000, 820, 900],
        "budget_ms": 400,
        "checks": [
            {"name": "status_in_set", "passed": True, "kind": "property"},
            {"name": "known_bad_rejected", "passed": True, "kind": "property"},
            {"name": "oracle_digest", "passed": True, "kind": "fixture"},
            {"name": "list_latency", "passed": False, "kind": "timing"},
        ],
        "payload": PAYLOAD,
        "oracle_keys": ORACLE_KEYS,
        "locked_oracle_digest": oracle_digest(PAYLOAD, ORACLE_KEYS),
        "now": "2026-09-24T12:00:00Z",
    }
    doc.update(overrides)
    return doc
