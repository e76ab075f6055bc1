"""Tables off a terminal: plain text is laid out directly, and the lines are rich's."""

from __future__ import annotations

import contextlib
import io

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from orchestrator.commands import _table
from orchestrator.commands._table import Column, plain_lines, print_table, rich_plain_lines
from orchestrator.core.text_safety import terminal_safe

HEADINGS = st.from_regex(r"[a-z_]{1,10}( [a-z_]{1,8})?", fullmatch=True)
COLUMNS = st.lists(
    st.builds(Column, heading=HEADINGS, justify=st.sampled_from(["left", "right"])),
    min_size=1,
    max_size=6,
)
# Printable ASCII with no blank at either end (inner blanks and "[x]" included).
PLAIN = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30).map(str.strip)
# Anything: wide and combining characters, tabs, newlines, control characters, edge blanks.
ANY = st.one_of(PLAIN, st.text(max_size=12))

# rich is imported and set up by its first table: here, not inside a timed example.
rich_plain_lines([Column(heading="warm-up")], [["1"]])

Table = tuple[list[Column], list[list[str]]]


def tables(cells: st.SearchStrategy[str]) -> st.SearchStrategy[Table]:
    return COLUMNS.flatmap(
        lambda columns: st.tuples(
            st.just(columns),
            st.lists(st.lists(cells, min_size=len(columns), max_size=len(columns)), max_size=12),
        )
    )


def printed(columns: list[Column], rows: list[list[str]]) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_table(columns, iter(rows))  # rows may come as a generator
    return out.getvalue().splitlines()


@given(tables(PLAIN))
def test_plain_text_is_laid_out_directly_as_rich_would(table):
    columns, rows = table
    lines = plain_lines(columns, rows)
    assert lines is not None
    assert lines == rich_plain_lines(columns, rows)


@given(tables(ANY))
def test_print_table_off_a_terminal_prints_riches_lines_for_any_text(table):
    columns, rows = table
    safe = [[terminal_safe(cell) for cell in row] for row in rows]
    lines = printed(columns, rows)
    assert lines == rich_plain_lines(columns, safe)
    assert len(lines) == 1 + len(rows)  # a cell never starts a row of its own


def test_text_rich_treats_its_own_way_is_left_to_rich():
    columns = [Column(heading="property"), Column(heading="n", justify="right")]
    for odd in ("wide \u5bbd", "emoji \U0001f3fb", "tab\there", " edge", "two\nlines"):
        assert plain_lines(columns, [(odd, "1")]) is None
    assert plain_lines([Column(heading="[b]x[/b]")], [("1",)]) is None  # a heading is markup


class _Stream(io.StringIO):
    def __init__(self, *, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_not_a_terminal_is_decided_without_rich_only_where_rich_agrees(monkeypatch) -> None:
    for variable in ("TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(variable, raising=False)
    for environ in ({}, {"TTY_COMPATIBLE": "1"}, {"FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "0"}):
        for tty in (False, True):
            with monkeypatch.context() as scoped:
                for name, value in environ.items():
                    scoped.setenv(name, value)
                scoped.setattr("sys.stdout", _Stream(tty=tty))
                surely_not = _table._surely_not_a_terminal()
                if surely_not:
                    assert not Console(highlight=False).is_terminal, (environ, tty)
                assert surely_not == (not tty and not environ), (environ, tty)
