"""Output of any length printed a piece at a time: the same text as the whole at once."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.commands._output import echo_json, echo_json_with_list
from orchestrator.commands._table import Column, print_long_table, print_table

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(st.text(max_size=8).filter(lambda k: k != "items"), VALUES, max_size=4),
    st.lists(VALUES, max_size=5),
)
def test_a_list_printed_item_by_item_is_the_document_printed_whole(
    capsys: pytest.CaptureFixture[str], document: dict[str, Any], items: list[Any]
) -> None:
    capsys.readouterr()
    echo_json({**document, "items": items})
    whole = capsys.readouterr().out
    echo_json_with_list({**document, "items": []}, "items", iter(items))
    assert capsys.readouterr().out == whole


def test_a_list_that_is_not_empty_at_the_top_is_refused() -> None:
    with pytest.raises(ValueError, match="not an empty list"):
        echo_json_with_list({"items": [1]}, "items", iter([2]))


ROWS = st.lists(
    st.tuples(st.text("abcxyz[]:/ .-", max_size=12), st.text("0123 ,", max_size=6)),
    max_size=8,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ROWS)
def test_a_long_table_read_twice_is_the_table(
    capsys: pytest.CaptureFixture[str], rows: list[tuple[str, str]]
) -> None:
    columns = (Column(heading="property"), Column(heading="count", justify="right"))
    capsys.readouterr()
    print_table(columns, rows)
    whole = capsys.readouterr().out
    print_long_table(columns, lambda: iter(rows))
    assert capsys.readouterr().out == whole
