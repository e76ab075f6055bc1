"""Lines on standard output that may hold text from the tree under test.

A node id, an assertion message or a reason is printed through ``core.text_safety``: one
line, no control character a terminal or a CI log would act on (tables do the same in
``_table.print_table``). A ``--json`` document is printed with :func:`echo_json`: the same
values, with what JSON leaves raw (C1 controls, bidi and invisible characters, the
runner's ``##[`` command syntax) written as JSON escapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
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


def echo_report(report: Mapping[str, Any], run_dir: Path) -> None:
    """A replay report (``replay --json``) with every property's entry, read back from
    the run's store one at a time (never held whole), printed as :func:`echo_json`
    prints: the document summary.json holds, but ``decisions`` lists them all."""
    from orchestrator.services.property_store import StoreRead, has_store

    if not has_store(run_dir):  # a run that wrote none: its report is whole as it is
        echo_json(report)
        return
    stored = StoreRead(run_dir)
    document = {**report, "decisions": [], "decisions_left_out": 0}
    echo_json_with_list(document, "decisions", (record["entry"] for record in stored.records()))


def echo_json_with_list(
    document: Mapping[str, Any], key: str, items: Iterable[Any], *, err: bool = False
) -> None:
    """:func:`echo_json` of ``document`` whose top-level ``key`` (an empty list in it) is
    ``items``, printed one item at a time: the same text as the whole document would
    give, without holding the list."""
    from orchestrator.core.json_text import indented
    from orchestrator.files import dumps

    text = dumps(document)
    marker = f'\n  "{key}": []'
    head, found, tail = text.partition(marker)
    if not found:
        raise ValueError(f"{key} is not an empty list at the document's top level")
    click.echo(json_terminal_safe(head + f'\n  "{key}": ['), err=err, nl=False)
    first = True
    for item in items:
        part = indented(item).replace("\n", "\n    ")
        click.echo(json_terminal_safe(("\n    " if first else ",\n    ") + part), err=err, nl=False)
        first = False
    click.echo(json_terminal_safe(("\n  ]" if not first else "]") + tail), err=err)
