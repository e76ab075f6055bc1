"""Lines on standard output that may hold text from the tree under test.

A node id, an assertion message or a reason is printed through ``core.text_safety``: one
line, no control character a terminal or a CI log would act on (tables do the same in
``_table.print_table``; ``--json`` documents need nothing, JSON escapes every control).
"""

from __future__ import annotations

import click

from orchestrator.core.text_safety import terminal_safe


def echo_line(text: str, *, err: bool = False) -> None:
    """Print ``text`` as exactly one terminal-safe line."""
    click.echo(terminal_safe(text), err=err)
