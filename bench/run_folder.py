"""A finished run folder as the benches read it, whichever version wrote it.

``summary.json`` of ``replay-report/2`` lists only the properties that need a look; every
property's entry, evidence and decision is in ``properties.jsonl.gz`` (docs/records.md).
``replay-report/1`` listed every entry and named one evidence file per property. The
benches want every entry and, for some, a property's evidence: read here from either.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

STORE = "properties.jsonl.gz"


def records(run_dir: Path) -> Iterator[dict[str, Any]]:
    """Every property's line of the store (``entry``, ``evidence``, ``decision``), in the
    run's order; the header is skipped."""
    with gzip.open(run_dir / STORE, "rt", encoding="utf-8") as stream:
        next(stream, None)
        for line in stream:
            yield json.loads(line)


def report(run_dir: Path) -> dict[str, Any]:
    """``summary.json`` with ``decisions`` holding every property's entry."""
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    if (run_dir / STORE).is_file():
        summary["decisions"] = [record["entry"] for record in records(run_dir)]
        summary["decisions_left_out"] = 0
    return summary


def evidences(run_dir: Path, entries: list[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
    """Each entry's ``replay-evidence/1`` document (None: not in the folder), the store
    read once."""
    stored: dict[Any, dict[str, Any]] = {}
    if (run_dir / STORE).is_file():
        stored = {record.get("index"): record["evidence"] for record in records(run_dir)}
    found: list[dict[str, Any] | None] = []
    for entry in entries:
        named = entry.get("evidence_file")
        if named:
            path = run_dir / str(named)
            found.append(json.loads(path.read_text()) if path.is_file() else None)
        else:
            found.append(stored.get(entry.get("index")))
    return found
