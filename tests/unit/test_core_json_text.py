"""``core.json_text.indented`` is ``json.dumps(indent=2, sort_keys=True,
ensure_ascii=False)``, character for character: every run-folder document is written with
it, and readers (and the digests of some) see exactly the standard library's text."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples

from orchestrator.core.json_text import indented


def reference(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)


class Lane(enum.StrEnum):
    BLOCKING = "property_regression"


class Code(enum.IntEnum):
    THREE = 3


class Ratio(float):
    pass


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True), st.text(), st.just(Lane.BLOCKING),
    st.just(Code.THREE), st.floats(allow_nan=False).map(Ratio), st.just(-0.0),
)  # fmt: skip
KEYS = st.text(alphabet=st.characters(codec="utf-8"), max_size=6)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=30,
)


@settings(max_examples=examples(400), deadline=None)
@given(DOCUMENTS)
def test_the_text_is_json_dumps(document: Any) -> None:
    assert indented(document) == reference(document)


@pytest.mark.parametrize(
    "document",
    [
        {1: "an int key", 2: "is converted by json"},
        {"a": 1, 2: "mixed keys: json refuses to sort them"},
        {"nested": {True: None}},
        [{"list": [1, 2.5, math.inf, -math.inf, math.nan, '\x00\u2028é"\\']}],
        type("Sub", (dict,), {})(a=1),
    ],
    ids=["int keys", "mixed keys", "bool key", "specials", "dict subclass"],
)
def test_what_only_json_decides_is_left_to_it(document: Any) -> None:
    try:
        expected: str | type[BaseException] = reference(document)
    except TypeError:
        expected = TypeError
    if expected is TypeError:
        with pytest.raises(TypeError):
            indented(document)
    else:
        assert indented(document) == expected


def test_an_object_json_cannot_encode_raises_its_error() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        indented({"when": object()})


def test_a_cycle_raises_its_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        indented({"loop": loop})
