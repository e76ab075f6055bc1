"""``orchestrator tally``: the four counts worth keeping, per ISO week (lanes.md section 7).

The core counts (``orchestrator.core.tally``); the tables are drawn here.
"""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

from orchestrator.commands._command_options import (
    PLOT_EXTRA_HINT,
    TallyAsJsonOption,
    TallyMarkdownOption,
    TallyNowOption,
    TallyPngOption,
    TallyWeeksOption,
)
from orchestrator.commands._options import LedgerOption
from orchestrator.commands._table import Column, print_table

if TYPE_CHECKING:
    from orchestrator.core.tally import Tally

# Short headings for the terminal table, in the order of core.tally.COUNTS.
_SHORT_HEADINGS = ("drafted", "killed", "shrink_changed", "calls_moved", "live_expired")


def _parse_now(value: str | None) -> datetime:
    from orchestrator.errors import InputError

    if value is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"--now {value!r}: not an ISO-8601 date or time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def matplotlib_installed() -> bool:
    """Whether the optional plot dependency can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # ValueError: a module entry without a spec
        return False


def to_markdown(result: Tally) -> str:
    """A table for ``$GITHUB_STEP_SUMMARY``: one row per week, then the totals."""
    from orchestrator.core.tally import COUNTS

    headings = [heading for _, heading in COUNTS]
    lines = [
        "### Counts worth keeping",
        "",
        "| ISO week | " + " | ".join(headings) + " |",
        "|---|" + "---:|" * len(headings),
    ]
    for week in result.weeks:
        cells = [str(week.value(key)) for key, _ in COUNTS]
        lines.append(f"| {week.week} | " + " | ".join(cells) + " |")
    totals = result.totals()
    lines.append("| **total** | " + " | ".join(f"**{totals[key]}**" for key, _ in COUNTS) + " |")
    lines.append("")
    if result.empty:
        lines.append(
            f"No events in the ledger for these {len(result.weeks)} weeks: every count is zero."
        )
    else:
        lines.append(
            f"{result.events_counted} events from {result.weeks[0].week} "
            f"to {result.weeks[-1].week}."
        )
    return "\n".join(lines) + "\n"


def print_text(result: Tally) -> None:
    """The terminal table: a row per week, oldest first, then the totals."""
    from orchestrator.core.tally import COUNTS

    columns = (
        Column(heading="week"),
        *(Column(heading=heading, justify="right") for heading in _SHORT_HEADINGS),
    )
    rows = [(week.week, *(str(week.value(key)) for key, _ in COUNTS)) for week in result.weeks]
    totals = result.totals()
    rows.append(("total", *(str(totals[key]) for key, _ in COUNTS)))
    print_table(columns, rows)
    if result.empty:
        typer.echo(f"no events in the ledger for these {len(result.weeks)} weeks: all zero")


def tally(
    *,
    weeks: TallyWeeksOption = 8,
    png: TallyPngOption = None,
    markdown: TallyMarkdownOption = False,
    as_json: TallyAsJsonOption = False,
    ledger: LedgerOption,
    now: TallyNowOption = None,
) -> None:
    """Weekly counts from the ledger's event log, oldest week first.

    (1) properties drafted vs properties that killed a mutant (`orchestrator accept`);
    (2) failures whose second shrink changed the minimal digest; (3) cases whose output
    matched while a call count moved (`call_budget` with every replay passing on both
    sides); (4) freezes still live after their expiry. An empty ledger prints zeros.
    """
    from orchestrator.commands._output import echo_json
    from orchestrator.errors import InputError
    from orchestrator.services.tally import load_tally

    if markdown and as_json:
        raise InputError("--markdown and --json both print to stdout; choose one")
    if png is not None and not matplotlib_installed():
        raise InputError(f"--png needs matplotlib, an optional extra: {PLOT_EXTRA_HINT}")
    moment = _parse_now(now)
    result = load_tally(ledger, now=moment, weeks=weeks)
    if png is not None:
        from orchestrator.services.tally import write_png

        write_png(result, png)
    if as_json:
        doc = result.to_json()
        if png is not None:
            doc["png"] = str(png)
        echo_json(doc)
    elif markdown:
        typer.echo(to_markdown(result), nl=False)
    else:
        print_text(result)
        if png is not None:
            typer.echo(f"plot written to {png}")


def register(app: typer.Typer) -> None:
    app.command("tally")(tally)
