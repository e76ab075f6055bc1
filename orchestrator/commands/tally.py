"""``orchestrator tally``: the four counts worth keeping, per ISO week (lanes.md section 7)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

_LEDGER_HELP = (
    "Ledger database URL (sqlite:///PATH or postgresql+psycopg://USER@HOST/DB). "
    "Default: $ORCHESTRATOR_LEDGER, else sqlite:///.replay/ledger.db in the current folder."
)


def _parse_now(value: str | None) -> datetime:
    from orchestrator.errors import InputError

    if value is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--now {value!r}: not an ISO-8601 date or time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def tally(
    *,
    weeks: Annotated[
        int, typer.Option("--weeks", min=1, max=520, help="How many ISO weeks to show.")
    ] = 8,
    png: Annotated[
        Path | None,
        typer.Option("--png", help="Also draw the weekly series to this PNG (a panel per count)."),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a Markdown table (for $GITHUB_STEP_SUMMARY).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a tally/1 JSON document.")] = False,
    ledger: Annotated[str | None, typer.Option("--ledger", help=_LEDGER_HELP)] = None,
    now: Annotated[
        str | None,
        typer.Option("--now", help="Count as of this instant (ISO-8601; UTC if no offset)."),
    ] = None,
) -> None:
    """Weekly counts from the ledger's event log, oldest week first.

    (1) properties drafted vs properties that killed a mutant (`orchestrator accept`);
    (2) failures whose second shrink changed the minimal digest; (3) cases whose output
    matched while a call count moved (`call_budget` with every replay passing on both
    sides); (4) freezes still live after their expiry. An empty ledger prints zeros.
    """
    from orchestrator.adapters.ledger_location import ledger_url
    from orchestrator.core.tally import to_markdown, to_text
    from orchestrator.errors import InputError
    from orchestrator.files import dumps
    from orchestrator.services.tally import load_tally, write_png

    if markdown and as_json:
        raise InputError("--markdown and --json both print to stdout; choose one")
    moment = _parse_now(now)
    result = load_tally(ledger_url(ledger, os.environ, Path.cwd()), now=moment, weeks=weeks)
    if png is not None:
        write_png(result, png)
    if as_json:
        doc = result.to_json()
        if png is not None:
            doc["png"] = str(png)
        typer.echo(dumps(doc))
    elif markdown:
        typer.echo(to_markdown(result), nl=False)
    else:
        typer.echo(to_text(result), nl=False)
        if png is not None:
            typer.echo(f"plot written to {png}")


def register(app: typer.Typer) -> None:
    app.command("tally")(tally)
