"""Lines on standard output that may hold text from the tree under test.

A node id, an assertion message or a reason is printed through ``core.text_safety``: one
line, no control character a terminal or a CI log would act on (tables do the same in
``_table.print_table``). A ``--json`` document is printed with :func:`echo_json`: the same
values, with what JSON leaves raw (C1 controls, bidi and invisible characters, the
runner's ``##[`` command syntax) written as JSON escapes.
"""

from __future__ import annotations

from typing import Any

import click

from orchestrator.core.text_safety import json_terminal_safe, terminal_safe


def echo_line(text: str, *, err: bool = False) -> None:
    """Print ``text`` as exactly one terminal-safe line."""
    click.echo(terminal_safe(text), err=err)


def echo_json(document: Any, *, err: bool = False) -> None:
    """Print ``document`` as indented JSON that decodes to exactly its values and holds
    nothing a terminal or a CI log would act on."""
    from orchestrator.files import dumps

    click.echo(json_terminal_safe(dumps(document)), err=err)
