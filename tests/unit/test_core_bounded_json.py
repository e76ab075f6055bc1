"""JSON from a container, parsed within bounds (core/bounded_json.py): whatever is
within the bounds parses as json.loads does; anything deep, long or not JSON is refused
with JsonRefused, and nothing else is ever raised."""

from __future__ import annotations

import json
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.bounded_json import MAX_DEPTH, MAX_DIGITS, JsonRefused, depth_of, loads

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def nesting(value) -> int:
    if isinstance(value, list):
        return 1 + max((nesting(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((nesting(item) for item in value.values()), default=0)
    return 0


@given(document=documents, ascii_only=st.booleans(), indent=st.sampled_from([None, 0, 2]))
def test_any_document_within_the_bounds_parses_as_json_loads_does(document, ascii_only, indent):
    text = json.dumps(document, ensure_ascii=ascii_only, indent=indent)
    assert loads(text.encode("utf-8")) == json.loads(text)
    assert loads(text) == json.loads(text)
    assert depth_of(text.encode("utf-8")) == nesting(document)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_parsed_or_refused_never_anything_else(data):
    try:
        value = loads(data)
    except JsonRefused:
        return
    assert value == json.loads(data.decode("utf-8"))


@given(st.text(alphabet='[]{}"\\:,0123456789.eE+-ntrufalsNIy ', max_size=300))
def test_json_like_text_is_parsed_or_refused_never_anything_else(text):
    try:
        value = loads(text)
    except JsonRefused:
        return
    assert value == json.loads(text)


@given(depth=st.integers(min_value=MAX_DEPTH + 1, max_value=200_000), kind=st.sampled_from("[{"))
@settings(max_examples=30, deadline=None)
def test_nesting_past_the_bound_is_refused(depth, kind):
    closing = {"[": "]", "{": "}"}[kind]
    inner = '{"a":' if kind == "{" else "["
    text = inner * depth + "1" + closing * depth
    with pytest.raises(JsonRefused, match="nested deeper"):
        loads(text)
    # Unclosed, too: refused, never a RecursionError.
    with pytest.raises(JsonRefused):
        loads(inner * depth)


def test_nesting_at_the_bound_is_taken():
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert nesting(loads(text)) == MAX_DEPTH


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"a": "[[[[{{{{" * 100, "b": ['\\"[[[', "]]]"]})
    assert loads(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        "9" * 5000,
        '{"duration_ms": ' + "1" * 5000 + "}",
        "1." + "0" * 100,
        "1e" + "9" * 100,
        "-" + "9" * (MAX_DIGITS + 1),
    ],
)
def test_long_numbers_are_refused(text):
    with pytest.raises(JsonRefused, match="digits"):
        loads(text)


def test_a_number_at_the_digit_bound_is_taken():
    assert loads("9" * MAX_DIGITS) == int("9" * MAX_DIGITS)
    assert loads('"' + "9" * 10_000 + '"') == "9" * 10_000  # a string is not a number


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"x": -Infinity}', "1e999", "-1e400"])
def test_values_that_are_not_finite_numbers_are_refused(text):
    with pytest.raises(JsonRefused):
        loads(text)


@pytest.mark.parametrize("data", [b"\xff\xfe{}", b'{"a": "\xc3"}', b"", b"{", b"[1,]", b"]["])
def test_not_json_is_refused(data):
    with pytest.raises(JsonRefused):
        loads(data)


def test_a_lone_surrogate_in_text_is_refused():
    with pytest.raises(JsonRefused):
        loads('"\udc80"')


def test_a_suite_of_twenty_thousand_tests_parses_fast():
    """The results of a whole suite go through it: about as fast as json.loads (the
    figures are printed, not asserted: a busy machine must not fail the test)."""
    tests = [
        {
            "nodeid": f"tests/test_mod_{i // 100}.py::test_case[{i}-param]",
            "label": "assert_pass",
            "duration_ms": 1.25 + i / 7,
            "calls": {"pkg.mod.func": i % 17, "pkg.other": 3},
            "message": None,
        }
        for i in range(20_000)
    ]
    doc = {"schema": "replay-run/1", "status": "completed", "result": {"tests": tests}}
    raw = json.dumps(doc).encode("utf-8")
    started = time.perf_counter()
    parsed = loads(raw)
    bounded_s = time.perf_counter() - started
    started = time.perf_counter()
    plain = json.loads(raw)
    plain_s = time.perf_counter() - started
    assert parsed == plain
    assert math.isfinite(bounded_s)
    print(
        f"{len(raw)} bytes: bounded {bounded_s * 1000:.1f} ms, json.loads {plain_s * 1000:.1f} ms"
    )
