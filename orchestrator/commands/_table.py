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
from typing import Literal

import typer

_UNBOUNDED_WIDTH = 1_000_000  # wide enough that no row of ours ever wraps


@dataclass(frozen=True, kw_only=True)
class Column:
    heading: str
    justify: Literal["left", "right"] = "left"


def print_table(columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> None:
    """Print one header line and one line per row (cells are plain text, never markup)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column.heading, justify=column.justify, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a "[x]" in a node id is no markup
    terminal = Console(highlight=False)
    if terminal.is_terminal:
        terminal.print(table)
        return
    plain = Console(file=io.StringIO(), width=_UNBOUNDED_WIDTH, color_system=None, highlight=False)
    with plain.capture() as captured:
        plain.print(table)
    for line in captured.get().splitlines():
        typer.echo(line.rstrip())
