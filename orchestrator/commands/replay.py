"""``orchestrator replay``: replay a test command on a base and a patch revision; decide."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import click
import typer

ISOLATION_HELP = (
    "side: one container per side runs the N replays (fresh pytest process each); "
    "container: one container per replay (slower, stronger isolation)."
)


def replay(  # noqa: PLR0917 - one parameter per command-line option
    ctx: typer.Context,
    repo: Annotated[Path, typer.Option("--repo", help="The git repository to replay.")],
    base: Annotated[
        str, typer.Option("--base", help="Base revision (any git revision; pinned to its SHA).")
    ],
    patch: Annotated[str, typer.Option("--patch", help="Patch revision (pinned to its SHA).")],
    image: Annotated[
        str,
        typer.Option(
            "--image", help="Runner image tag or ID; pinned to its image ID, never pulled."
        ),
    ],
    command: Annotated[
        str,
        typer.Option("--command", help="The test command; with --property its paths give way."),
    ] = "pytest -q",
    property_ids: Annotated[
        list[str] | None,
        typer.Option(
            "--property",
            help="A pytest node id to decide (repeatable). Default: every test the command runs.",
        ),
    ] = None,
    fixture: Annotated[
        Path | None,
        typer.Option("--fixture", help="JSON fixture, mounted read-only, as $REPLAY_FIXTURE."),
    ] = None,
    shrink_report: Annotated[
        Path | None,
        typer.Option(
            "--shrink-report",
            help="What `orchestrator shrink --json` printed for --fixture (goes into evidence).",
        ),
    ] = None,
    replays: Annotated[int, typer.Option("--replays", min=1, help="Replays per side.")] = 5,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds one replay may take.")
    ] = 60.0,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed given to every replay as $REPLAY_SEED.")
    ] = 0,
    runner_id: Annotated[
        str, typer.Option("--runner-id", help="Recorded as the evidence's runner_id.")
    ] = "local",
    out: Annotated[
        Path | None, typer.Option("--out", help="Run folder (default .replay/runs/<run-id>/).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the replay-report/1 JSON document.")
    ] = False,
    isolation: Annotated[
        str,
        typer.Option(
            "--isolation", help=ISOLATION_HELP, click_type=click.Choice(["side", "container"])
        ),
    ] = "side",
) -> None:
    """Replay --command on --base and --patch, N times each, in hermetic containers; decide.

    Pins both revisions to full SHAs and the image to its ID, writes run-log.json
    into the run folder before anything runs, replays both sides at once (no
    network, read-only sources, non-root, resource limits), labels every replay
    from facts (assert_pass, assert_fail, timeout, harness_error), decides one lane
    per property and writes evidence-<n>.json, decision-<n>.json and summary.json.

    Exit status: the worst lane's (0 non-blocking, 1 blocking, 3 undecided or
    infrastructure failure), 2 for bad input.
    """
    from orchestrator import log
    from orchestrator.adapters.engine import connect
    from orchestrator.files import dumps
    from orchestrator.services.replay import ReplayOptions, execute, plan_replay

    options = ReplayOptions(
        repo=repo,
        base=base,
        patch=patch,
        image=image,
        command=command,
        property_ids=tuple(property_ids or ()),
        fixture=fixture,
        shrink_report=shrink_report,
        replays=replays,
        timeout_s=timeout,
        seed=seed,
        runner_id=runner_id,
        out=out,
        isolation=isolation,
    )
    json_logs = bool(getattr(ctx.obj, "json_logs", False))
    logger = log.get_logger("orchestrator.replay")
    client = connect(os.environ)
    try:
        plan = plan_replay(options, client=client, now=datetime.now(UTC))
        logger.info(
            "replay.planned",
            run_id=plan.run_id,
            run_dir=str(plan.run_dir),
            base_rev=plan.pins.base_rev,
            patch_rev=plan.pins.patch_rev,
            image_id=plan.pins.image_id,
        )
        with _progress(json_logs, replays, logger) as progress:
            outcome = execute(plan, client=client, progress=progress)
    finally:
        client.close()
    if as_json:
        typer.echo(dumps(outcome.report))
    else:
        _print_table(outcome)
        typer.echo(f"run folder: {plan.run_dir}")
    logger.info("replay.done", run_id=plan.run_id, exit_status=outcome.exit_status)
    if outcome.exit_status:
        raise typer.Exit(outcome.exit_status)


@contextmanager
def _progress(
    json_logs: bool, total: int, logger: Any
) -> Iterator[Callable[[str, int, int], None]]:
    """A bar per side on a terminal; a structlog line per finished replay otherwise."""
    if json_logs or not sys.stderr.isatty():

        def report(side: str, done: int, of: int) -> None:
            logger.info("replay.progress", side=side, done=done, total=of)

        yield report
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description:>6}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bars:
        tasks = {side: bars.add_task(side, total=total) for side in ("base", "patch")}

        def advance(side: str, done: int, of: int) -> None:
            if side not in tasks:
                tasks[side] = bars.add_task(side, total=of)
            bars.update(tasks[side], completed=done, total=of)

        yield advance


def _print_table(outcome: Any) -> None:
    from orchestrator.services.replay import call_deltas, label_summary

    header = ("property", "base", "patch", "call deltas", "lane", "code")
    rows: list[Sequence[str]] = [header]
    for item in outcome.properties:
        evidence, decision = item.evidence, item.decision
        rows.append(
            (
                str(evidence.property_id),
                label_summary(evidence.base),
                label_summary(evidence.patch),
                "; ".join(call_deltas(evidence.base, evidence.patch)) or "-",
                decision.lane.value,
                decision.code,
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    for row in rows:
        typer.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
