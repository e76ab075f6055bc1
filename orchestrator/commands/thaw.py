"""``orchestrator thaw``: the scheduled re-probe of due freezes (never a renewal)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.commands.freeze import LEDGER_HELP


def thaw(  # noqa: PLR0917 - one parameter per command-line option
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
        int, typer.Option("--replays", min=1, help="Replays per flake freeze (timing: >= 5).")
    ] = 5,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds allowed per replay.")
    ] = 60.0,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="Runner image for the re-probe. Default: a flake freeze's pinned image; "
            "orchestrator-runner:latest for timing freezes. Never pulled.",
        ),
    ] = None,
    runner_id: Annotated[str, typer.Option("--runner-id", help="Label of this runner.")] = "local",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a thaw-report/1 document.")
    ] = False,
    ledger: Annotated[str | None, typer.Option("--ledger", help=LEDGER_HELP)] = None,
) -> None:
    """Re-probe every freeze at or past its expiry, then thaw it or leave it overdue.

    A flake freeze is replayed on its stored minimal fixture N times at --rev: all
    assert_pass with one call budget thaws it (the live row goes, the event stays);
    anything else appends an OVERDUE event. A timing freeze takes at least 5 new
    samples and thaws only if they all sit within budget with a narrow spread. Rows
    are claimed atomically, so two thaw jobs never probe the same freeze. Exit 1 when
    any freeze stays overdue, 0 otherwise, 3 when the engine or ledger is unavailable.
    """
    from orchestrator.adapters.git import resolve_rev
    from orchestrator.core.durations import parse_duration
    from orchestrator.errors import ExitCode, VerdictError
    from orchestrator.files import dumps
    from orchestrator.services.ledger_jobs import open_ledger
    from orchestrator.services.thaw import ThawOptions, run_thaw

    within = parse_duration(due_within, option="--due-within")
    repo = repo.resolve()
    sha = resolve_rev(repo, rev)
    now = datetime.now(UTC)
    options = ThawOptions(
        repo=repo, rev=sha, replays=replays, timeout_s=timeout, image=image, runner_id=runner_id
    )
    with open_ledger(ledger, os.environ, Path.cwd()) as store:
        # The engine is connected only when a freeze is actually claimed.
        report = run_thaw(store, options, now=now, due_within=within, client=None)
    if as_json:
        typer.echo(dumps(report.to_json()))
    else:
        for result in report.results:
            row = result.freeze
            outcome = "thawed" if result.verdict.thawed else "OVERDUE"
            reasons = "; ".join(result.verdict.reasons)
            typer.echo(
                f"{outcome:<8} freeze {row.id} ({row.kind.value}) {row.subject} "
                f"owner={row.owner} {result.verdict.code}" + (f" ({reasons})" if reasons else "")
            )
        if not report.results:
            typer.echo("no freeze is due")
    if report.overdue:
        raise VerdictError(
            f"{report.overdue} freeze(s) still overdue at {sha[:12]}; owners must fix them",
            ExitCode.BLOCKING,
        )


def register(app: typer.Typer) -> None:
    app.command("thaw")(thaw)
