"""``orchestrator freeze list|show|export``: read the live freeze rows of the ledger."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.commands._options import LedgerOption
from orchestrator.commands._table import Column, print_table

if TYPE_CHECKING:
    from orchestrator.adapters.ledger import FreezeRow

freeze_app = typer.Typer(
    name="freeze",
    help="Read the freeze ledger: time-boxed quarantine rows, never merge approvals.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


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


@freeze_app.command("list")
def list_freezes(
    *,
    expired: Annotated[
        bool, typer.Option("--expired", help="Only rows past their expiry now.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a freeze-list/1 JSON document.")
    ] = False,
    ledger: LedgerOption,
) -> None:
    """List live freezes: id, kind, state (live or EXPIRED), expiry, owner, property or test.

    With --expired only the rows past their expiry now (what `orchestrator check` fails on).
    """
    from orchestrator.adapters.ledger import sqlite_reads

    now = datetime.now(UTC)
    expired_at = now if expired else None
    rows = sqlite_reads.live_freezes(ledger, expired_at=expired_at)
    if rows is None:  # not an up-to-date SQLite ledger: the store opens (or creates) it
        from orchestrator.adapters.ledger import Ledger

        with Ledger.open(ledger) as store:
            rows = store.live_freezes(expired_at=expired_at)
    if as_json:
        from orchestrator.files import dumps

        doc = {
            "schema": "freeze-list/1",
            "now": now.isoformat(),
            "freezes": [row.to_json() | {"expired": row.expired(now)} for row in rows],
        }
        typer.echo(dumps(doc))
        return
    if not rows:
        typer.echo("no expired live freezes" if expired else "no live freezes")
        return
    _print_rows(rows, now)


@freeze_app.command("show")
def show_freeze(
    freeze_id: Annotated[
        int, typer.Argument(metavar="ID", help="The freeze id (from freeze list).")
    ],
    *,
    ledger: LedgerOption,
) -> None:
    """Print one live freeze as JSON: its record and the stored fixture bytes.

    ID is a freeze id, as `orchestrator freeze list` shows it.

    The minimal fixture and the unshrunk payload stored beside a flake freeze are
    printed as `fixture` and `origin`. An unknown ID is exit 2.
    """
    import json

    from orchestrator.adapters.ledger import Ledger
    from orchestrator.errors import InputError
    from orchestrator.files import dumps

    with Ledger.open(ledger) as store:
        row = store.freeze(freeze_id)
    if row is None:
        raise InputError(f"freeze {freeze_id}: no such live freeze")
    doc = row.to_json()
    for name, blob in (("fixture", row.fixture_bytes), ("origin", row.origin_bytes)):
        if blob is not None:
            doc[name] = json.loads(blob.decode("utf-8"))
    typer.echo(dumps(doc))


@freeze_app.command("export")
def export_freezes(
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the document to FILE (atomically) instead of stdout."),
    ] = None,
    *,
    ledger: LedgerOption,
) -> None:
    """Canonical JSON of all live rows, sorted, for review in a pull request.

    A freeze-export/1 document: every live freeze row with its stored fixture bytes,
    canonical JSON (sorted keys, compact), so the same rows export the same bytes.
    """
    from orchestrator.adapters.ledger import Ledger
    from orchestrator.core.digest import canonical_json
    from orchestrator.files import write_atomic
    from orchestrator.services.ledger_jobs import export_document

    with Ledger.open(ledger) as store:
        data = canonical_json(export_document(store.live_freezes(payloads=True))) + b"\n"
    if out is None:
        typer.echo(data.decode("utf-8"), nl=False)
    else:
        write_atomic(out, data)


def register(app: typer.Typer) -> None:
    app.add_typer(freeze_app, name="freeze")
