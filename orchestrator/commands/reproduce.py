"""``orchestrator reproduce``: run one recorded replay again, exactly; watch it, step into it."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from orchestrator.commands._grouped import grouped
from orchestrator.commands._option_groups import RecordedReplay, Session
from orchestrator.commands._output import echo_line
from orchestrator.commands._table import Column, print_table

if TYPE_CHECKING:
    from orchestrator.core.reproduce import RecordedRun
    from orchestrator.services.reproduce import SideResult

DEFAULT_WIDTH = 163  # off a terminal: two columns of pytest's 80, and " | "


@grouped
def reproduce(*, recorded: RecordedReplay, session: Session) -> None:
    """Run one recorded replay of PROPERTY again, exactly as it ran, and say whether the
    probe labels it as the run did.

    RUN_DIR is a finished run folder that `replay` wrote (its --out); PROPERTY is one of
    its properties, a pytest node id as the run's table and summary.json name it.

    The same image (by its ID, never pulled), the tree at the pinned SHA with the same
    --tests-from overlay, the fixture's kept bytes (checked against the run's digest),
    the seed and PYTHONHASHSEED of replay N, the same environment and limits, no
    network. pytest's own output streams to the terminal; then the label, the call
    counts and the recorded ones. A property that does not come out the same is not
    reproducible, which is evidence too.

    Exit status: 0 the label matches the recorded one (on every side run), 1 it does
    not, 2 bad input (a missing run folder, a property the run did not have, a replay
    out of range, a fixture whose bytes no longer match: one line, before any container
    starts), 3 the image is no longer on the engine or the engine failed, 130 interrupted.
    """
    from orchestrator.commands._command_arguments import ReproduceArguments
    from orchestrator.core.reproduce import Mode
    from orchestrator.services.reproduce import prepare
    from orchestrator.services.reproduce import reproduce as run_again
    from orchestrator.services.sides.pool import open_backend

    arguments = ReproduceArguments(recorded=recorded, session=session)
    arguments.validate()
    mode = arguments.mode
    prepared = prepare(arguments.request())
    from orchestrator.core.text_safety import CommandGuard

    # pytest's output comes from the tree under test: no line of it may start a workflow
    # command in a CI log, however the chunks cut it.
    guard = CommandGuard()
    try:
        with open_backend(os.environ) as backend:
            results = run_again(
                prepared,
                backend=backend,
                on_output=lambda chunk: _write_output(guard.feed(chunk)),
                on_note=_note,
            )
    finally:
        _write_output(guard.close())
    if len(results) > 1 and mode is Mode.RUN:
        _print_outputs(results)
    _print_comparison(results)
    status = _print_verdict(results, prepared.plan.run)
    for result in results:
        if result.kept is not None:
            from orchestrator.services.reproduce import kept_lines

            for line in kept_lines(result.kept):
                echo_line(line)
    if status:
        raise typer.Exit(status)


def _write_output(safe: bytes) -> None:
    """pytest's output (already made safe), as it comes, in order with our lines."""
    if not safe:
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(safe)
    sys.stdout.buffer.flush()


def _note(text: str) -> None:
    """A note of several lines (the commands of a side): its line breaks kept."""
    from orchestrator.core.text_safety import terminal_safe_lines

    typer.echo(terminal_safe_lines(text))


def _safe_output(text: str) -> str:
    """pytest's output for the side-by-side columns: tabs and CRLF as they would show, every
    other control character as a visible escape."""
    from orchestrator.core.text_safety import terminal_safe_lines

    return terminal_safe_lines(text.replace("\r\n", "\n").expandtabs(8))


def _print_outputs(results: Sequence[SideResult]) -> None:
    from orchestrator.core.reproduce import side_by_side

    left, right = results[0], results[1]
    width = shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    typer.echo("")
    for line in side_by_side(
        _safe_output(left.output),
        _safe_output(right.output),
        headings=(
            f"{left.replay.side} {left.replay.rev[:12]}",
            f"{right.replay.side} {right.replay.rev[:12]}",
        ),
        width=width,
    ):
        typer.echo(line)
    typer.echo("")


def _print_comparison(results: Sequence[SideResult]) -> None:
    from orchestrator.core.reproduce import calls_text, describe, shown_calls

    replays = [r.replay.recorded for r in results] + [
        r.observed for r in results if r.observed is not None
    ]
    shown = shown_calls(replays)
    rows = [
        ["replay", *(f"{r.replay.replay}, seed {r.replay.seed}" for r in results)],
        ["recorded", *(describe(r.replay.recorded) for r in results)],
        ["now", *(describe(r.observed) if r.observed else "- (not run)" for r in results)],
        ["calls recorded", *(calls_text(r.replay.recorded, shown) for r in results)],
        [
            "calls now",
            *(calls_text(r.observed, shown) if r.observed else "-" for r in results),
        ],
        [
            "reproduced",
            *(
                "-" if r.comparison is None else "yes" if r.comparison.same else "NO"
                for r in results
            ),
        ],
    ]
    print_table((Column(heading=""), *(Column(heading=r.replay.side) for r in results)), rows)


def _print_verdict(results: Sequence[SideResult], run: RecordedRun) -> int:
    """One line per side that did not come out the same; the exit status."""
    from orchestrator.core.reproduce import isolation_hint

    status = 0
    for result in results:
        comparison = result.comparison
        if comparison is None or comparison.same:
            continue
        status = 1
        echo_line(
            f"not reproduced: {result.replay.side} replay {result.replay.replay}: "
            f"{comparison.detail}"
        )
        hint = isolation_hint(run, result.replay.replay)
        if hint:
            echo_line(f"  {hint}")
    if status == 0 and any(result.comparison is not None for result in results):
        echo_line("reproduced: the probe labels it as the run did")
    return status


def register(app: typer.Typer) -> None:
    app.command("reproduce")(reproduce)
