"""The run's property store as values: one line per property, and what a reader checks.
Pure.

A run folder keeps every property's report entry, evidence and decision in one file,
``properties.jsonl.gz`` (docs/records.md, "The run's properties"): gzip-compressed UTF-8
text, one JSON object per line. The first line is the header, ``{"schema":
"replay-properties/1", "run_id": ..., "properties": N}``; then N lines in the run's order,
each ``{"index": n, "property_id": ..., "entry": <the replay-report entry>, "evidence":
<replay-evidence/1>, "decision": <replay-decision/1>}``. The file may be several gzip
members one after the other (``zcat`` and Python's ``gzip`` read it as one stream).
:mod:`orchestrator.services.property_store` writes and reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orchestrator.core.replay_run import PropertyOutcome, report_entry
from orchestrator.errors import SchemaError
from orchestrator.model import DECISION_SCHEMA, PROPERTIES_SCHEMA, Decision, Lane

# A line longer than this is no line this tool wrote (a property's evidence is a few KB;
# a thousand replays of long messages stay far below it): a reader refuses it.
MAX_LINE_BYTES = 64 * 1024 * 1024


def record_of(item: PropertyOutcome) -> dict[str, Any]:
    """One property's line: its report entry, evidence and decision."""
    return {
        "index": item.index,
        "property_id": item.evidence.property_id,
        "entry": report_entry(item),
        "evidence": item.evidence.to_json(),
        "decision": item.decision.to_json(),
    }


def encode(document: Mapping[str, Any]) -> bytes:
    """One line of the store: compact JSON with sorted keys, UTF-8, and a newline."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8") + b"\n"


def header(run_id: str, properties: int) -> dict[str, Any]:
    """The store's first line."""
    return {"schema": PROPERTIES_SCHEMA, "run_id": run_id, "properties": properties}


def header_problem(document: Any) -> str | None:
    """Why a first line is no store header of this version (None: it is one)."""
    if not isinstance(document, Mapping):
        return "its first line is not a JSON object"
    schema = document.get("schema")
    if schema != PROPERTIES_SCHEMA:
        found = "no schema" if schema is None else f"schema {schema!r}"
        return f"expected a {PROPERTIES_SCHEMA} header, found {found}"
    count = document.get("properties")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return "its header's properties is not a count"
    return None


def record_problem(document: Any) -> str | None:
    """Why a line is no property record (None: it is one; its documents' own fields are
    their readers' to check, as for the files of an earlier run folder)."""
    if not isinstance(document, Mapping):
        return "a line is not a JSON object"
    index = document.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 1:
        return "a line's index is not a number from 1"
    if not isinstance(document.get("property_id"), str):
        return f"line {index}: property_id is not a string"
    for name in ("entry", "evidence", "decision"):
        if not isinstance(document.get(name), Mapping):
            return f"line {index}: {name} is not a JSON object"
    return None


def decision_from_json(document: Mapping[str, Any]) -> Decision:
    """A stored ``replay-decision/1`` document as the value it was written from; a
    document of another shape is a :class:`SchemaError`."""
    if document.get("schema") != DECISION_SCHEMA:
        raise SchemaError(f"expected a {DECISION_SCHEMA} document")
    lane = next((member for member in Lane if member.value == document.get("lane")), None)
    if lane is None:
        raise SchemaError(f"unknown lane {document.get('lane')!r}")
    reasons = document.get("reasons")
    tests_from = document.get("tests_from")
    code, blocking, freeze = (document.get(k) for k in ("code", "blocking", "freeze_allowed"))
    if not isinstance(code, str) or not isinstance(blocking, bool) or not isinstance(freeze, bool):
        raise SchemaError("a decision's code, blocking or freeze_allowed has the wrong type")
    if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
        raise SchemaError("a decision's reasons is not a list of strings")
    if tests_from is not None and not isinstance(tests_from, str):
        raise SchemaError("a decision's tests_from is not a string")
    return Decision(
        lane=lane,
        code=code,
        blocking=blocking,
        freeze_allowed=freeze,
        reasons=tuple(reasons),
        tests_from=tests_from,
    )
