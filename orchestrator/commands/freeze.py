"""``orchestrator freeze list|show|export``: read the live freeze rows of the ledger."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

LEDGER_HELP = (
    "Ledger database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST/DB). "
    "Default: $ORCHESTRATOR_LEDGER, else sqlite:///.replay/ledger.db in the current folder."
)

freeze_app = typer.Typer(
    name="freeze",
    help="Read the freeze ledger: time-boxed quarantine rows, never merge approvals.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _row_line(row: object, now: datetime) -> str:
    from orchestrator.adapters.ledger import FreezeRow

    assert isinstance(row, FreezeRow)
    state = "EXPIRED" if row.expired(now) else "live"
    return (
        f"{row.id:>6}  {row.kind.value:<6}  {state:<7}  "
        f"{row.expires_at.isoformat(timespec='seconds')}  {row.owner:<16}  {row.subject}"
    )


@freeze_app.command("list")
def list_freezes(
    expired: bool = typer.Option(False, "--expired", help="Only rows past their expiry now."),
    as_json: bool = typer.Option(False, "--json", help="Print a freeze-list/1 JSON document."),
    ledger: str | None = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """List live freezes (id, kind, state, expiry, owner, property or test)."""
    from orchestrator.files import dumps
    from orchestrator.services.ledger_jobs import open_ledger

    now = datetime.now(UTC)
    with open_ledger(ledger, os.environ, Path.cwd()) as store:
        rows = store.live_freezes(expired_at=now if expired else None)
    if as_json:
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
    typer.echo(f"{'id':>6}  {'kind':<6}  {'state':<7}  {'expires_at':<25}  {'owner':<16}  subject")
    for row in rows:
        typer.echo(_row_line(row, now))


@freeze_app.command("show")
def show_freeze(
    freeze_id: int = typer.Argument(..., metavar="ID", help="The freeze id (from freeze list)."),
    ledger: str | None = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """Print one live freeze as JSON: its record and the stored fixture bytes."""
    import json

    from orchestrator.errors import InputError
    from orchestrator.files import dumps
    from orchestrator.services.ledger_jobs import open_ledger

    with open_ledger(ledger, os.environ, Path.cwd()) as store:
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
    ledger: str | None = typer.Option(None, "--ledger", help=LEDGER_HELP),
) -> None:
    """Canonical JSON of all live rows, sorted, for review in a pull request."""
    from orchestrator.core.digest import canonical_json
    from orchestrator.files import write_atomic
    from orchestrator.services.ledger_jobs import export_document, open_ledger

    with open_ledger(ledger, os.environ, Path.cwd()) as store:
        data = canonical_json(export_document(store.live_freezes(payloads=True))) + b"\n"
    if out is None:
        typer.echo(data.decode("utf-8"), nl=False)
    else:
        write_atomic(out, data)


def register(app: typer.Typer) -> None:
    app.add_typer(freeze_app, name="freeze")
