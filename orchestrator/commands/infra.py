"""``orchestrator infra list``: the cases the runner broke, not the patch."""

from __future__ import annotations

import click

from orchestrator.commands._lazy import LazyGroup, declared
from orchestrator.commands._ledger_option import json_flag, ledger_option
from orchestrator.commands._table import Column, print_table

_COLUMNS = (
    Column(heading="id", justify="right"),
    Column(heading="queued_at"),
    Column(heading="code"),
    Column(heading="runner"),
    Column(heading="property"),
    Column(heading="labels"),
    Column(heading="reasons"),
)


# Plain Click, not Typer: a read command starts without importing Typer.
@click.command("list")
@json_flag("Print an infra-list/1 JSON document.")
@ledger_option
def list_infra(*, as_json: bool, ledger: str) -> None:
    """List queued infrastructure cases: labels per side, runner id, error sub-reasons.

    `replay` queues a property here when a replay timed out or ended in a harness
    error (lane infra_queue): the runner broke, not the patch, so nothing is frozen.
    """
    from orchestrator.services.ledger_access import infra_entries

    entries = infra_entries(ledger)
    if as_json:
        from orchestrator.commands._output import echo_json

        echo_json({"schema": "infra-list/1", "cases": [e.to_json() for e in entries]})
        return
    if not entries:
        click.echo("infra queue is empty")
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


command = LazyGroup(
    name="infra",
    help="The infra queue: timeouts and harness errors, never freeze rows.",
    no_args_is_help=True,
    entries={"list": declared(list_infra)},
)
