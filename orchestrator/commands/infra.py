"""``orchestrator infra list``: cases the runner broke, not the patch."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from orchestrator.commands.freeze import LEDGER_HELP

infra_app = typer.Typer(
    name="infra",
    help="The infra queue: timeouts and harness errors, never freeze rows.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@infra_app.command("list")
def list_infra(
    as_json: bool = typer.Option(False, "--json", help="Print an infra-list/1 JSON document."),
    ledger: str | None = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """List queued infrastructure cases (labels, runner id, error sub-reasons)."""
    from orchestrator.files import dumps
    from orchestrator.services.ledger_jobs import open_ledger

    with open_ledger(ledger, os.environ, Path.cwd()) as store:
        entries = store.infra_entries()
    if as_json:
        typer.echo(dumps({"schema": "infra-list/1", "cases": [e.to_json() for e in entries]}))
        return
    if not entries:
        typer.echo("infra queue is empty")
        return
    for entry in entries:
        labels = " ".join(f"{side}={','.join(labels)}" for side, labels in entry.labels.items())
        typer.echo(
            f"{entry.id:>6}  {entry.queued_at.isoformat(timespec='seconds')}  {entry.code:<13}  "
            f"runner={entry.runner_id or '-'}  {entry.property_id or '-'}  {labels}  "
            f"reasons={';'.join(entry.reasons) or '-'}"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(infra_app, name="infra")
