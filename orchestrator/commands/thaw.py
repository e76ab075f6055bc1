"""``orchestrator thaw``: the scheduled re-probe of due freezes (never a renewal)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.commands._options import (
    DEFAULT_TIMEOUT_S,
    MAX_REPLAYS,
    LedgerOption,
    OptionalImageOption,
    TimeoutOption,
)
from orchestrator.commands._table import Column, print_table

_COLUMNS = (
    Column(heading="outcome"),
    Column(heading="freeze", justify="right"),
    Column(heading="kind"),
    Column(heading="subject"),
    Column(heading="owner"),
    Column(heading="code"),
    Column(heading="reasons"),
)


def thaw(  # noqa: PLR0913 - a Typer command's options are its parameters
    *,
    repo: Annotated[
        Path, typer.Option("--repo", help="The repository under test (default: here).")
    ] = Path("."),
    rev: Annotated[
        str, typer.Option("--rev", help="Revision to re-probe at (default: HEAD).")
    ] = "HEAD",
    due_within: Annotated[
        str,
        typer.Option(
            "--due-within",
            help="Also take freezes expiring within this long from now (30m, 72h, 7d).",
        ),
    ] = "0s",
    replays: Annotated[
        int,
        typer.Option(
            "--replays", min=1, max=MAX_REPLAYS, help="Replays per flake freeze (timing: >= 5)."
        ),
    ] = 5,
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    image: OptionalImageOption = None,
    runner_id: Annotated[str, typer.Option("--runner-id", help="Label of this runner.")] = "local",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a thaw-report/1 document.")
    ] = False,
    ledger: LedgerOption,
) -> None:
    """Re-probe every freeze at or past its expiry, then thaw it or leave it overdue.

    A flake freeze is replayed on its stored minimal fixture (none, when its replay
    had none) N times at --rev: all assert_pass with one call budget thaws it (the
    live row goes, the event stays, and a quarantine reading the ledger or a later
    export stops applying it); anything else appends an OVERDUE event. A timing
    freeze takes at least 5 new samples and thaws only if they all sit within budget
    with a narrow spread. Rows are claimed atomically, so two thaw jobs never probe
    the same freeze. Exit 1 when any freeze stays overdue, 0 otherwise, 3 when the
    engine or ledger is unavailable.

    Without --image a flake freeze is re-probed on the image it was pinned to, a
    timing freeze on orchestrator-runner:latest.
    """
    from orchestrator.commands._output import echo_json
    from orchestrator.core.durations import parse_duration
    from orchestrator.errors import ExitCode, VerdictError
    from orchestrator.services.thaw import ThawOptions, thaw_due

    within = parse_duration(due_within, option="--due-within")
    options = ThawOptions(
        repo=repo, rev=rev, replays=replays, timeout_s=timeout, image=image, runner_id=runner_id
    )
    report = thaw_due(ledger, options, now=datetime.now(UTC), due_within=within)
    if as_json:
        echo_json(report.to_json())
    elif report.results:
        print_table(
            _COLUMNS,
            (
                (
                    "thawed" if result.verdict.thawed else "OVERDUE",
                    str(result.freeze.id),
                    result.freeze.kind.value,
                    result.freeze.subject,
                    result.freeze.owner,
                    result.verdict.code,
                    "; ".join(result.verdict.reasons) or "-",
                )
                for result in report.results
            ),
        )
    else:
        typer.echo("no freeze is due")
    if report.overdue:
        raise VerdictError(
            f"{report.overdue} freeze(s) still overdue at {report.rev[:12]}; owners must fix them",
            ExitCode.BLOCKING,
        )


def register(app: typer.Typer) -> None:
    app.command("thaw")(thaw)
