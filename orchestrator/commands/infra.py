"""``orchestrator infra list``: the cases the runner broke, not the patch."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.commands._options import LedgerOption
from orchestrator.commands._table import Column, print_table

infra_app = typer.Typer(
    name="infra",
    help="The infra queue: timeouts and harness errors, never freeze rows.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

_COLUMNS = (
    Column(heading="id", justify="right"),
    Column(heading="queued_at"),
    Column(heading="code"),
    Column(heading="runner"),
    Column(heading="property"),
    Column(heading="labels"),
    Column(heading="reasons"),
)


@infra_app.command("list")
def list_infra(
    *,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print an infra-list/1 JSON document.")
    ] = False,
    ledger: LedgerOption,
) -> None:
    """List queued infrastructure cases: labels per side, runner id, error sub-reasons.

    `replay` queues a property here when a replay timed out or ended in a harness
    error (lane infra_queue): the runner broke, not the patch, so nothing is frozen.
    """
    from orchestrator.adapters.ledger import sqlite_reads

    entries = sqlite_reads.infra_entries(ledger)
    if entries is None:  # not an up-to-date SQLite ledger: the store opens (or creates) it
        from orchestrator.adapters.ledger import Ledger

        with Ledger.open(ledger) as store:
            entries = store.infra_entries()
    if as_json:
        from orchestrator.files import dumps

        typer.echo(dumps({"schema": "infra-list/1", "cases": [e.to_json() for e in entries]}))
        return
    if not entries:
        typer.echo("infra queue is empty")
        return
    print_table(
        _COLUMNS,
        (
            (
                str(entry.id),
                entry.queued_at.isoformat(timespec="seconds"),
                entry.code,
                entry.runner_id or "-",
                entry.property_id or "-",
                " ".join(f"{side}={','.join(labels)}" for side, labels in entry.labels.items()),
                ";".join(entry.reasons) or "-",
            )
            for entry in entries
        ),
    )


def register(app: typer.Typer) -> None:
    app.add_typer(infra_app, name="infra")
