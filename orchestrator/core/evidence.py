"""Parse untrusted JSON documents into the shared frozen values.

Wrong shapes and wrong types raise ``SchemaError`` (exit 2, one line naming the
field). Missing required fields and unknown label strings are *not* errors here:
they are represented (``None``, the raw label) so that ``decide`` can reject the
evidence with its own code (``reject_malformed``), as lanes.md row 1 asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.errors import SchemaError
from orchestrator.model import EVIDENCE_SCHEMA, SHRINK_SCHEMA, Evidence, Replay, ShrinkSummary


def _object(doc: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise SchemaError(f"{where}: expected a JSON object, got {_type_name(doc)}")
    return doc


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def check_schema(doc: Any, expected: str) -> Mapping[str, Any]:
    """The document must be an object whose ``schema`` is exactly ``expected``."""
    obj = _object(doc, "document")
    schema = obj.get("schema")
    if schema != expected:
        found = "no schema" if schema is None else f"schema {schema!r}"
        raise SchemaError(f"expected a {expected} document, found {found}")
    return obj


def optional_str(obj: Mapping[str, Any], name: str, where: str = "") -> str | None:
    value = obj.get(name)
    if value is None or isinstance(value, str):
        return value
    raise SchemaError(f"{where}{name}: expected a string, got {_type_name(value)}")


def optional_int(obj: Mapping[str, Any], name: str, where: str = "") -> int | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchemaError(f"{where}{name}: expected an integer, got {_type_name(value)}")
    return value


def optional_number(obj: Mapping[str, Any], name: str, where: str = "") -> float | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaError(f"{where}{name}: expected a number, got {_type_name(value)}")
    return float(value)


def optional_bool(obj: Mapping[str, Any], name: str, where: str = "") -> bool | None:
    value = obj.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise SchemaError(f"{where}{name}: expected true or false, got {_type_name(value)}")


def _calls(value: Any, where: str) -> dict[str, int]:
    if value is None:
        return {}
    obj = _object(value, where)
    calls: dict[str, int] = {}
    for name, count in obj.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise SchemaError(f"{where}.{name}: expected a non-negative integer call count")
        calls[str(name)] = count
    return calls


def parse_replay(doc: Any, where: str) -> Replay:
    obj = _object(doc, where)
    prefix = f"{where}."
    label = obj.get("label")
    if label is None:
        raise SchemaError(f"{prefix}label: missing")
    if not isinstance(label, str):
        raise SchemaError(f"{prefix}label: expected a string, got {_type_name(label)}")
    return Replay(
        label=label,
        assertion_id=optional_str(obj, "assertion_id", prefix),
        assertion_key=optional_str(obj, "assertion_key", prefix),
        calls=_calls(obj.get("calls"), f"{prefix}calls"),
        duration_ms=optional_number(obj, "duration_ms", prefix),
        image_digest=optional_str(obj, "image_digest", prefix),
        runner_id=optional_str(obj, "runner_id", prefix),
        reason=optional_str(obj, "reason", prefix),
        message=optional_str(obj, "message", prefix),
    )


def _strings(obj: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = obj.get(name)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SchemaError(f"{name}: expected an array of strings, got {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise SchemaError(f"{name}[{index}]: expected a string, got {_type_name(item)}")
    return tuple(value)


def _replays(obj: Mapping[str, Any], side: str) -> tuple[Replay, ...]:
    value = obj.get(side)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SchemaError(f"{side}: expected an array of replays, got {_type_name(value)}")
    return tuple(parse_replay(item, f"{side}[{index}]") for index, item in enumerate(value))


def _shrink_path(value: Any, where: str) -> tuple[Mapping[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SchemaError(f"{where}: expected an array of steps, got {_type_name(value)}")
    steps = []
    for index, step in enumerate(value):
        step_obj = _object(step, f"{where}[{index}]")
        if not isinstance(step_obj.get("op"), str):
            raise SchemaError(f"{where}[{index}].op: expected a string")
        steps.append(dict(step_obj))
    return tuple(steps)


def parse_shrink_summary(value: Any, where: str = "shrink") -> ShrinkSummary:
    """The stability part of a shrink report (``attempts``, ``identical_minima``, ``stable``)."""
    obj = _object(value, where)
    prefix = f"{where}."
    attempts = optional_int(obj, "attempts", prefix)
    identical = optional_int(obj, "identical_minima", prefix)
    stable = optional_bool(obj, "stable", prefix)
    if attempts is None:
        raise SchemaError(f"{prefix}attempts: missing")
    if identical is None:
        raise SchemaError(f"{prefix}identical_minima: missing")
    if stable is None:
        raise SchemaError(f"{prefix}stable: missing")
    return ShrinkSummary(
        attempts=attempts,
        identical_minima=identical,
        stable=stable,
        minimal_digest=optional_str(obj, "minimal_digest", prefix),
        origin_digest=optional_str(obj, "origin_digest", prefix),
        shrink_path=_shrink_path(obj.get("shrink_path"), f"{prefix}shrink_path"),
        test=optional_str(obj, "test", prefix),
        rev=optional_str(obj, "rev", prefix),
        image_id=optional_str(obj, "image_id", prefix),
        seed=optional_int(obj, "seed", prefix),
    )


def parse_shrink_report(doc: Any) -> ShrinkSummary:
    """A ``shrink-report/1`` document (what ``orchestrator shrink --json`` prints)."""
    obj = check_schema(doc, SHRINK_SCHEMA)
    summary = parse_shrink_summary(obj, "shrink report")
    if summary.minimal_digest is None:
        raise SchemaError("shrink report.minimal_digest: missing")
    return summary


def parse_evidence(doc: Any) -> Evidence:
    """A ``replay-evidence/1`` document (records.md) as an ``Evidence`` value."""
    obj = check_schema(doc, EVIDENCE_SCHEMA)
    shrink_doc = obj.get("shrink")
    oracle_changed = optional_bool(obj, "oracle_changed")
    return Evidence(
        base_rev=optional_str(obj, "base_rev"),
        patch_rev=optional_str(obj, "patch_rev"),
        image_digest=optional_str(obj, "image_digest"),
        runner_id=optional_str(obj, "runner_id"),
        command=optional_str(obj, "command"),
        property_id=optional_str(obj, "property_id"),
        seed=optional_int(obj, "seed"),
        fixture_digest=optional_str(obj, "fixture_digest"),
        origin_digest=optional_str(obj, "origin_digest"),
        oracle_changed=bool(oracle_changed),
        shrink=None if shrink_doc is None else parse_shrink_summary(shrink_doc),
        replays=optional_int(obj, "replays"),
        base=_replays(obj, "base"),
        patch=_replays(obj, "patch"),
        base_oracle_digest=optional_str(obj, "base_oracle_digest"),
        patch_oracle_digest=optional_str(obj, "patch_oracle_digest"),
        oracle_reasons=_strings(obj, "oracle_reasons"),
        screened=optional_int(obj, "screened") or 0,
        signal=_strings(obj, "signal"),
        adaptive=optional_int(obj, "adaptive") or 0,
        environment=_environment(obj.get("environment")),
        pythonpath=_pythonpath(obj.get("pythonpath")),
        tests_from=optional_str(obj, "tests_from"),
    )


def _environment(value: Any) -> dict[str, str]:
    """``environment``: variable name -> value (absent in older documents)."""
    if value is None:
        return {}
    obj = _object(value, "environment")
    for name, item in obj.items():
        if not isinstance(item, str):
            raise SchemaError(f"environment.{name}: expected a string, got {_type_name(item)}")
    return {str(name): item for name, item in obj.items()}


def _pythonpath(value: Any) -> dict[str, tuple[str, ...]]:
    """``pythonpath``: side -> PYTHONPATH entries (absent in older documents)."""
    if value is None:
        return {}
    obj = _object(value, "pythonpath")
    return {str(side): _strings(obj, side) for side in obj}
