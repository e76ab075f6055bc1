"""The refusal codes for a flake freeze's payload bytes (records.payload_bytes_codes)."""

from __future__ import annotations

import dataclasses
import json

from hypothesis import assume, given
from hypothesis import strategies as st

from orchestrator.core.digest import digest
from orchestrator.core.records import payload_bytes_codes
from orchestrator.model import FlakeFreeze

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)
spellings = st.sampled_from(
    [
        json.dumps,
        lambda value: json.dumps(value, indent=2, ensure_ascii=False),
        lambda value: json.dumps(value, sort_keys=True, separators=(",", ":")),
    ]
)


def record(fixture: object, origin: object) -> FlakeFreeze:
    return unknown_record(fixture_digest=digest(fixture), origin_digest=digest(origin))


def unknown_record(**known: object) -> FlakeFreeze:
    """A record with only ``known`` fields (the payload codes read the two digests)."""
    empty = {field.name: None for field in dataclasses.fields(FlakeFreeze)}
    return FlakeFreeze(**{**empty, **known})


@given(json_values, json_values, spellings)
def test_payloads_matching_their_digests_in_any_spelling_pass(fixture, origin, spell) -> None:
    blobs = (spell(fixture).encode(), spell(origin).encode())
    assert payload_bytes_codes(record(fixture, origin), *blobs) == ()


@given(json_values, json_values, json_values)
def test_a_payload_of_another_value_is_a_digest_mismatch(fixture, origin, other) -> None:
    assume(digest(other) not in (digest(fixture), digest(origin)))
    wrong = json.dumps(other).encode()
    right = (json.dumps(fixture).encode(), json.dumps(origin).encode())
    assert payload_bytes_codes(record(fixture, origin), wrong, right[1]) == (
        "fixture_bytes_digest_mismatch",
    )
    assert payload_bytes_codes(record(fixture, origin), right[0], wrong) == (
        "origin_bytes_digest_mismatch",
    )


@given(json_values, st.binary())
def test_missing_or_unreadable_payloads_have_their_own_codes(value, noise) -> None:
    good = json.dumps(value).encode()
    try:
        json.loads(noise.decode("utf-8"))
        readable = True
    except (UnicodeDecodeError, json.JSONDecodeError):
        readable = False
    assume(not readable)
    frozen = record(value, value)
    assert payload_bytes_codes(frozen, None, None) == (
        "missing_field:fixture_bytes",
        "missing_field:origin_bytes",
    )
    assert payload_bytes_codes(frozen, noise, good) == ("fixture_bytes_not_json",)
    assert payload_bytes_codes(frozen, good, b"\xff" + good) == ("origin_bytes_not_json",)


def test_a_record_without_digests_only_needs_readable_payloads() -> None:
    unknown = unknown_record()
    assert payload_bytes_codes(unknown, b"{}", b"[1]") == ()
