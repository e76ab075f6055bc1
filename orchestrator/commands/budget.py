"""``orchestrator budget``: the latency probe of seed 004, separate from the property replay."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Annotated

import typer

from orchestrator.commands._grouped import Variant, grouped, take
from orchestrator.commands._option_groups import (
    FixtureAndShrink,
    Limits,
    OneTest,
    Outputs,
    Recording,
    Sampling,
    Scheduling,
    TimingAdmission,
)
from orchestrator.commands._options import (
    DEFAULT_TIMEOUT_S,
    BudgetCommandOption,
    BudgetJsonOption,
    BudgetMsOption,
    ImageOption,
    PropertyOption,
    RepoOption,
    RevOption,
    RunnerLabelOption,
    TimeoutOption,
)

# budget's spelling of the shared groups: one check at one revision, in one image.
_Test = Annotated[
    OneTest,
    take(
        repo=Variant(RepoOption),
        rev=Variant(RevOption),
        property_id=Variant(PropertyOption),
        command=Variant(BudgetCommandOption, "pytest -q"),
    ),
]
_Limits = Annotated[
    Limits,
    take(image=Variant(ImageOption), timeout_s=Variant(TimeoutOption, DEFAULT_TIMEOUT_S)),
]
_Sampling = Annotated[Sampling, take("samples", budget_ms=Variant(BudgetMsOption))]
_Scheduling = Annotated[Scheduling, take(runner_id=Variant(RunnerLabelOption, "local"))]


@grouped
def budget(
    *,
    test: _Test,
    sampling: _Sampling,
    fixture: Annotated[FixtureAndShrink, take("fixture")],
    limits: _Limits,
    admission: TimingAdmission,
    scheduling: _Scheduling,
    outputs: Annotated[Outputs, take(as_json=BudgetJsonOption)],
    recording: Annotated[Recording, take("ledger")],
) -> None:
    """Sample one check >= 5 times (one revision, same input, same image) and classify it.

    Prints the samples (the test body's duration in each replay), their median and
    spread, and classify_latency: unknown (within budget), timing (wide spread) or
    property (a stable overrun is a contract miss). Latency never enters a replay
    label. With --admit --owner NAME --max-age 24h, and only if every sample's
    property passed, the timing admission runs and its code is stored in the ledger's
    event log; timing_debt_opened also writes the timing freeze. Exit 0 when the
    property lane is green (and, with --admit, the freeze was opened), 1 otherwise.
    """
    from orchestrator.commands._command_arguments import BudgetArguments
    from orchestrator.commands._output import echo_json
    from orchestrator.errors import ExitCode, VerdictError
    from orchestrator.services.budget import run_budget

    arguments = BudgetArguments(
        test=test, fixture=fixture, sampling=sampling, scheduling=scheduling, limits=limits,
        recording=recording, admission=admission, outputs=outputs,
    )  # fmt: skip
    arguments.validate()
    options = arguments.budget_options()
    admitting = arguments.admission_options()
    outcome = run_budget(
        options, admission=admitting, env=os.environ, clock=lambda: datetime.now(UTC)
    )
    doc, sampled, admitted = outcome.report, outcome.sampled, outcome.admitted
    if arguments.outputs.as_json:
        echo_json(doc)
    else:
        typer.echo(f"samples (ms): {', '.join(f'{s:g}' for s in sampled.samples_ms)}")
        typer.echo(f"labels: {', '.join(sampled.labels)}")
        if doc["median_ms"] is not None:
            typer.echo(
                f"median {doc['median_ms']:g} ms, spread {doc['spread_ms']:g} ms, "
                f"budget {options.budget_ms:g} ms: {doc['latency_class']}"
            )
        if admitted is not None:
            typer.echo(f"admission: {admitted}")
    if not sampled.green:
        raise VerdictError("the property lane is red: no timing freeze", ExitCode.BLOCKING)
    if admitted is not None and admitted != "timing_debt_opened":
        raise VerdictError(f"timing freeze refused: {admitted}", ExitCode.BLOCKING)


def register(app: typer.Typer) -> None:
    app.command("budget")(budget)
