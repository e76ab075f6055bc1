"""``orchestrator freeze list|show|export``: read the live freeze rows of the ledger.

``freeze`` and ``freeze list`` are declared with plain Click, so that a listing starts
without importing Typer; ``show`` and ``export`` (``_freeze_documents``) with Typer.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from orchestrator.commands._lazy import LazyGroup, declared, module_command
from orchestrator.commands._ledger_option import expired_flag, json_flag, ledger_option
from orchestrator.commands._table import Column, print_table

if TYPE_CHECKING:
    from orchestrator.services.ledger_access import FreezeRow


_LIST_COLUMNS = (
    Column(heading="id", justify="right"),
    Column(heading="kind"),
    Column(heading="state"),
    Column(heading="expires_at"),
    Column(heading="owner"),
    Column(heading="subject"),
)


def _print_rows(rows: Sequence[FreezeRow], now: datetime) -> None:
    print_table(
        _LIST_COLUMNS,
        (
            (
                str(row.id),
                row.kind.value,
                "EXPIRED" if row.expired(now) else "live",
                row.expires_at.isoformat(timespec="seconds"),
                row.owner,
                row.subject,
            )
            for row in rows
        ),
    )


@click.command("list")
@expired_flag
@json_flag("Print a freeze-list/1 JSON document.")
@ledger_option
def list_freezes(*, expired: bool, as_json: bool, ledger: str) -> None:
    """List live freezes: id, kind, state (live or EXPIRED), expiry, owner, property or test.

    With --expired only the rows past their expiry now (what `orchestrator check` fails on).
    """
    from orchestrator.services.ledger_access import live_freezes

    now = datetime.now(UTC)
    rows = live_freezes(ledger, expired_at=now if expired else None)
    if as_json:
        from orchestrator.commands._output import echo_json

        doc = {
            "schema": "freeze-list/1",
            "now": now.isoformat(),
            "freezes": [row.to_json() | {"expired": row.expired(now)} for row in rows],
        }
        echo_json(doc)
        return
    if not rows:
        click.echo("no expired live freezes" if expired else "no live freezes")
        return
    _print_rows(rows, now)


_DOCUMENTS = "orchestrator.commands._freeze_documents"

command = LazyGroup(
    name="freeze",
    help="Read the freeze ledger: time-boxed quarantine rows, never merge approvals.",
    no_args_is_help=True,
    entries={
        "list": declared(list_freezes),
        # The first paragraphs of their help (tests/unit/test_cli_lazy.py holds them so).
        "show": (
            module_command(_DOCUMENTS, "show"),
            "Print one live freeze as JSON: its record and the stored fixture bytes.",
        ),
        "export": (
            module_command(_DOCUMENTS, "export"),
            "Canonical JSON of all live rows, sorted, for review in a pull request.",
        ),
    },
)
