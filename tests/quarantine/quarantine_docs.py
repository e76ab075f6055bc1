"""freeze-export/1 documents for the quarantine tests, shaped as `orchestrator freeze
export` writes them (the records are the ledger's: records.md, "Freeze rows")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

LATER = (datetime.now(UTC) + timedelta(days=3)).isoformat()
EARLIER = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
OPENED = (datetime.now(UTC) - timedelta(days=1)).isoformat()


def flake_entry(
    freeze_id: int, test: str, *, expires_at: str = LATER, owner: str = "team-a"
) -> dict[str, Any]:
    record = {
        "schema": "freeze-record/1",
        "kind": "flake",
        "property_id": test,
        "assertion_id": f"{test}@{test.split('::', maxsplit=1)[0]}:3:AssertionError",
        "seed": 0,
        "fixture_digest": "sha256:74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b",
        "origin_digest": "sha256:74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b",
        "shrink_path": [],
        "canonicalization": "json-sort-keys",
        "replays": {
            "base": ["assert_fail", "assert_pass"] * 5,
            "patch": ["assert_pass", "assert_fail"] * 5,
        },
        "base_rev": "a" * 40,
        "patch_rev": "b" * 40,
        "image_digest": "sha256:" + "c" * 64,
        "runner_id": "local",
        "command": "pytest -q",
        "owner": owner,
        "opened_at": OPENED,
        "expires_at": expires_at,
    }
    return {"id": freeze_id, "kind": "flake", "record": record, "fixture": None}


def timing_entry(
    freeze_id: int, test: str, *, expires_at: str = LATER, budget_ms: float = 400
) -> dict[str, Any]:
    record = {
        "schema": "freeze-record/1",
        "kind": "timing",
        "test_name": test,
        "owner": "perf-team",
        "opened_at": OPENED,
        "max_age_hours": 72,
        "sample_runs": 5,
        "samples": [840.0, 700.0, 1000.0, 820.0, 900.0],
        "spread_ms": 300.0,
        "budget_ms": budget_ms,
        "oracle_digest": "sha256:" + "e" * 64,
        "expires_at": expires_at,
    }
    return {"id": freeze_id, "kind": "timing", "record": record}


def write_export(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"schema": "freeze-export/1", "freezes": list(entries)}))
    return path
