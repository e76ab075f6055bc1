"""Canonical digests (records.md) against seed 000's own code."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.digest import NULL_DIGEST, canonical_json, digest, oracle_digest

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


def seed_000_digest(fixture: dict) -> str:
    """Seed 000's ``digest`` verbatim (it returns bare hex; records.md adds the prefix)."""
    blob = json.dumps(fixture, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def test_seed_000_walkthrough_fixture_hashes_to_the_seed_value() -> None:
    fixture = {"user_id": 0, "role": ""}
    assert digest(fixture) == "sha256:" + seed_000_digest(fixture)
    # The value the seed's command prints, pinned so a change of rule is noticed.
    assert digest(fixture) == (
        "sha256:84a6b2a276edd51bdf5b880b71a82bf9d961ffaa35612e63498a7671871cf4f8"
    )


def test_canonical_json_is_sorted_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": "é"}]}) == (
        '{"a":[1,{"c":"é","d":2}],"b":1}'.encode()
    )


def test_null_digest_is_the_digest_of_json_null() -> None:
    assert "sha256:" + hashlib.sha256(b"null").hexdigest() == NULL_DIGEST


@given(json_values)
def test_key_order_never_changes_the_digest(value: object) -> None:
    if isinstance(value, dict):
        reordered = dict(reversed(list(value.items())))
        assert digest(reordered) == digest(value)
    assert digest(value).startswith("sha256:")


def test_oracle_digest_hashes_only_the_declared_keys() -> None:
    keys = ("status", "schema_version", "body_sha256")
    payload = {"status": 200, "schema_version": 3, "body_sha256": "abc123", "request_id": "v1"}
    moved_volatile = {**payload, "request_id": "v2"}
    moved_oracle = {**payload, "body_sha256": "def456"}
    assert oracle_digest(payload, keys) == oracle_digest(moved_volatile, keys)
    assert oracle_digest(payload, keys) != oracle_digest(moved_oracle, keys)
    assert oracle_digest(payload, keys) == digest(
        {"status": 200, "schema_version": 3, "body_sha256": "abc123"}
    )


def test_no_oracle_keys_hashes_the_whole_payload() -> None:
    payload = {"status": 200, "request_id": "v1"}
    assert oracle_digest(payload) == digest(payload)
    assert oracle_digest(payload, ()) != oracle_digest({**payload, "request_id": "v2"}, ())


def test_an_absent_oracle_key_differs_from_null() -> None:
    assert oracle_digest({"a": None}, ["a"]) != oracle_digest({}, ["a"])
