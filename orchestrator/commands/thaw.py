"""``orchestrator thaw``: the scheduled re-probe of due freezes (never a renewal)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.commands._command_options import (
    ThawAsJsonOption,
    ThawDueWithinOption,
    ThawReplaysOption,
    ThawRepoOption,
    ThawRevOption,
)
from orchestrator.commands._grouped import Variant, grouped, take
from orchestrator.commands._option_groups import Limits, OneTest, Outputs, Recording, Scheduling
from orchestrator.commands._options import DEFAULT_TIMEOUT_S, RunnerLabelOption, TimeoutOption
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


# thaw's spelling of the shared groups: the revision to re-probe at, the replays, the image.
_Rev = Annotated[
    OneTest,
    take(repo=Variant(ThawRepoOption, Path(".")), rev=Variant(ThawRevOption, "HEAD")),
]
_Scheduling = Annotated[
    Scheduling,
    take(replays=Variant(ThawReplaysOption, 5), runner_id=Variant(RunnerLabelOption, "local")),
]
_Limits = Annotated[Limits, take("image", timeout_s=Variant(TimeoutOption, DEFAULT_TIMEOUT_S))]


@grouped
def thaw(
    *,
    at: _Rev,
    due_within: ThawDueWithinOption = "0s",
    scheduling: _Scheduling,
    limits: _Limits,
    outputs: Annotated[Outputs, take(as_json=ThawAsJsonOption)],
    recording: Annotated[Recording, take("ledger")],
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
        repo=at.repo or Path("."), rev=at.rev or "HEAD", replays=scheduling.replays or 5,
        timeout_s=limits.seconds, image=limits.image, runner_id=scheduling.runner_id or "local",
    )  # fmt: skip
    report = thaw_due(recording.ledger, options, now=datetime.now(UTC), due_within=within)
    if outputs.as_json:
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
