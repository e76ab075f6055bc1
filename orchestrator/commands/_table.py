"""Tables on standard output, printed with rich.

On a terminal the table fits the window: a long cell (a node id) folds onto the next
line, never cut. Anywhere else (a CI log, a pipe, a file) there are no colour codes and
no folding: one line per row, columns in the declared order, no trailing blanks, so a
script can split a row on whitespace.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import click

if TYPE_CHECKING:
    from rich.table import Table

_UNBOUNDED_WIDTH = 1_000_000  # wide enough that no row of ours ever wraps
_GAP = "  "  # between two columns: rich's padding, one blank on each side


@dataclass(frozen=True, kw_only=True)
class Column:
    heading: str
    justify: Literal["left", "right"] = "left"


def _rich_table(columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column.heading, justify=column.justify, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a "[x]" in a node id is no markup
    return table


def rich_plain_lines(columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> list[str]:
    """The table as rich lays it out off a terminal: no colour, no folding."""
    from rich.console import Console

    plain = Console(file=io.StringIO(), width=_UNBOUNDED_WIDTH, color_system=None, highlight=False)
    with plain.capture() as captured:
        plain.print(_rich_table(columns, rows))
    return [line.rstrip() for line in captured.get().splitlines()]


def _plain_text(text: str) -> bool:
    """Printable ASCII with no blank at either end: one character per cell, laid out by
    rich as it is (wide and combining characters, tabs and edge blanks it treats in
    ways of its own)."""
    return text.isascii() and text.isprintable() and text == text.strip()


def plain_lines(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[str] | None:
    """The same lines as :func:`rich_plain_lines`, laid out directly; ``None`` unless
    every heading and cell is plain text (and a heading no markup).

    rich measures and renders every cell as a renderable, about 0.4 ms a row here (a
    `freeze list` of 20,000 rows took 9 s); plain text needs only each column's width.
    """
    headings = [column.heading for column in columns]
    if not all(_plain_text(heading) and "[" not in heading for heading in headings):
        return None
    if not all(len(row) == len(columns) and all(map(_plain_text, row)) for row in rows):
        return None
    widths = [len(heading) for heading in headings]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    return [
        _GAP.join(
            cell.rjust(width) if column.justify == "right" else cell.ljust(width)
            for column, width, cell in zip(columns, widths, cells, strict=True)
        ).rstrip()
        for cells in (headings, *rows)
    ]


def _surely_not_a_terminal() -> bool:
    """What rich's ``Console.is_terminal`` answers for standard output is False, known
    without importing rich (a read command's start-up): no variable that makes rich
    take a pipe for a terminal, and standard output says it is no tty."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return False
    isatty = getattr(sys.stdout, "isatty", None)
    try:
        return isatty is not None and not isatty()
    except ValueError:
        return False


def print_table(columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> None:
    """Print one header line and one line per row (cells are plain text, never markup).

    Every cell is made terminal-safe first (``core.text_safety``): a node id's ESC,
    newline or bidi override is printed as a visible escape, never acted on, and never
    starts a row of its own."""
    from orchestrator.core.text_safety import terminal_safe

    safe_rows = (tuple(terminal_safe(cell) for cell in row) for row in rows)
    if not _surely_not_a_terminal():
        from rich.console import Console

        terminal = Console(highlight=False)
        if terminal.is_terminal:
            terminal.print(_rich_table(columns, safe_rows))
            return
    listed = list(safe_rows)
    lines = plain_lines(columns, listed)
    if lines is None:
        lines = rich_plain_lines(columns, listed)
    click.echo("\n".join(lines))


def print_long_table(
    columns: Sequence[Column], rows: Callable[[], Iterator[Sequence[str]]]
) -> None:
    """:func:`print_table` of rows read twice (``rows()`` gives them afresh: a run's
    store), so that off a terminal a table of any length is printed a line at a time,
    never held whole: the first pass measures the columns, the second prints. On a
    terminal, or when a cell is not plain text, :func:`print_table` prints it."""
    from orchestrator.core.text_safety import terminal_safe

    def safe() -> Iterator[tuple[str, ...]]:
        return (tuple(terminal_safe(cell) for cell in row) for row in rows())

    headings = [column.heading for column in columns]
    widths = [len(heading) for heading in headings]
    plain = _surely_not_a_terminal() and all(
        _plain_text(heading) and "[" not in heading for heading in headings
    )
    if plain:
        for row in safe():
            if len(row) != len(columns) or not all(map(_plain_text, row)):
                plain = False
                break
            widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    if not plain:
        print_table(columns, rows())
        return

    def line(cells: Sequence[str]) -> str:
        return _GAP.join(
            cell.rjust(width) if column.justify == "right" else cell.ljust(width)
            for column, width, cell in zip(columns, widths, cells, strict=True)
        ).rstrip()

    click.echo(line(headings))
    for row in safe():
        click.echo(line(row))
