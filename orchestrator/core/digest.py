"""Canonical JSON and the digests every record names (records.md, "Canonical digest").

``digest(x) = "sha256:" + sha256(json.dumps(x, sort_keys=True, separators=(",", ":"),
ensure_ascii=False).encode("utf-8")).hexdigest()``; records say which rule they used
with ``"canonicalization": "json-sort-keys"``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.errors import SchemaError
from orchestrator.model import CANONICALIZATION

__all__ = ["CANONICALIZATION", "NULL_DIGEST", "canonical_json", "digest", "oracle_digest"]
DIGEST_PREFIX = "sha256:"


def canonical_json(value: Any) -> bytes:
    """The exact bytes that are hashed: sorted keys, compact separators, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def digest(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return DIGEST_PREFIX + hashlib.sha256(canonical_json(value)).hexdigest()


NULL_DIGEST = digest(None)


def oracle_subset(payload: Any, oracle_keys: Sequence[str]) -> Any:
    """The part of ``payload`` the oracle digest covers.

    With no declared keys the whole payload is the oracle (seed 004: a payload
    without separable oracle keys is hashed whole). A declared key absent from
    the payload is left out, so "absent" and ``null`` hash differently.
    """
    if not oracle_keys:
        return payload
    if not isinstance(payload, Mapping):
        raise SchemaError(
            f"oracle keys {', '.join(oracle_keys)} declared but the payload is not a JSON object"
        )
    return {key: payload[key] for key in oracle_keys if key in payload}


def oracle_digest(payload: Any, oracle_keys: Sequence[str] = ()) -> str:
    """Digest of the declared oracle keys only (the whole payload when none are declared)."""
    return digest(oracle_subset(payload, oracle_keys))
