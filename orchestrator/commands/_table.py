"""Tables on standard output, printed with rich.

On a terminal the table fits the window: a long cell (a node id) folds onto the next
line, never cut. Anywhere else (a CI log, a pipe, a file) there are no colour codes and
no folding: one line per row, columns in the declared order, no trailing blanks, so a
script can split a row on whitespace.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import typer

_UNBOUNDED_WIDTH = 1_000_000  # wide enough that no row of ours ever wraps


@dataclass(frozen=True, kw_only=True)
class Column:
    heading: str
    justify: Literal["left", "right"] = "left"


def print_table(columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> None:
    """Print one header line and one line per row (cells are plain text, never markup)."""
    from rich.console import Console

    cells = [tuple(row) for row in rows]
    terminal = Console(highlight=False)
    if terminal.is_terminal:
        terminal.print(_rich_table(columns, cells))
        return
    for line in plain_lines(columns, cells) or _rich_plain_lines(_rich_table(columns, cells)):
        typer.echo(line)


def _rich_table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column.heading, justify=column.justify, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a "[x]" in a node id is no markup
    return table


def _rich_plain_lines(table: Any) -> list[str]:
    """The table as rich prints it off a terminal, line by line, trailing blanks cut."""
    from rich.console import Console

    plain = Console(file=io.StringIO(), width=_UNBOUNDED_WIDTH, color_system=None, highlight=False)
    with plain.capture() as captured:
        plain.print(table)
    return [line.rstrip() for line in captured.get().splitlines()]


def plain_lines(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[str] | None:
    """The lines rich prints for the table off a terminal (columns two spaces apart, each
    as wide as its widest cell, no trailing blanks), laid out directly: thousands of rows
    (a whole suite's properties) take rich seconds. None when a cell holds anything but
    printable text on one line (then rich lays it out)."""
    from rich.cells import cell_len

    cells = [[column.heading for column in columns], *([str(c) for c in row] for row in rows)]
    if any(not cell.isprintable() for row in cells for cell in row):
        return None
    lengths = [[cell_len(cell) for cell in row] for row in cells]
    widths = [max(row[index] for row in lengths) for index in range(len(columns))]
    lines = []
    for row, row_lengths in zip(cells, lengths, strict=True):
        parts = []
        for column, cell, length, width in zip(columns, row, row_lengths, widths, strict=True):
            padding = " " * (width - length)
            parts.append(padding + cell if column.justify == "right" else cell + padding)
        lines.append("  ".join(parts).rstrip())
    return lines
