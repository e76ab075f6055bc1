"""``orchestrator budget``: the latency probe of seed 004, separate from the property replay."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import typer

from orchestrator.commands._options import (
    DEFAULT_TIMEOUT_S,
    AdmitOption,
    AdmitOwnerOption,
    BudgetCommandOption,
    BudgetJsonOption,
    BudgetMsOption,
    BudgetRunnerIdOption,
    FixtureOption,
    ImageOption,
    LedgerOption,
    LockedDigestOption,
    MaxAgeOption,
    OracleKeysOption,
    PropertyOption,
    RepoOption,
    RevOption,
    SamplesOption,
    TimeoutOption,
)


def budget(  # noqa: PLR0913 - a Typer command's options are its parameters
    *,
    repo: RepoOption,
    rev: RevOption,
    image: ImageOption,
    property_id: PropertyOption,
    budget_ms: BudgetMsOption,
    samples: SamplesOption = 5,
    fixture: FixtureOption = None,
    command: BudgetCommandOption = "pytest -q",
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    admit: AdmitOption = False,
    owner: AdmitOwnerOption = None,
    max_age: MaxAgeOption = "24h",
    oracle_keys: OracleKeysOption = "",
    locked_digest: LockedDigestOption = None,
    runner_id: BudgetRunnerIdOption = "local",
    as_json: BudgetJsonOption = False,
    ledger: LedgerOption,
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
    from orchestrator.commands._option_groups import (
        BudgetArguments,
        FixtureAndShrink,
        Limits,
        OneTest,
        Outputs,
        Recording,
        Sampling,
        Scheduling,
        TimingAdmission,
    )
    from orchestrator.commands._output import echo_json
    from orchestrator.errors import ExitCode, VerdictError
    from orchestrator.services.budget import run_budget

    arguments = BudgetArguments(
        test=OneTest(repo=repo, rev=rev, property_id=property_id, command=command),
        fixture=FixtureAndShrink(fixture=fixture),
        sampling=Sampling(samples=samples, budget_ms=budget_ms),
        scheduling=Scheduling(runner_id=runner_id),
        limits=Limits(image=image, timeout_s=timeout),
        recording=Recording(ledger=ledger),
        admission=TimingAdmission(
            admit=admit, owner=owner, max_age=max_age, oracle_keys=oracle_keys,
            locked_digest=locked_digest,
        ),
        outputs=Outputs(as_json=as_json),
    )  # fmt: skip
    arguments.validate()
    options = arguments.budget_options()
    admission = arguments.admission_options()
    outcome = run_budget(
        options, admission=admission, env=os.environ, clock=lambda: datetime.now(UTC)
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
                f"budget {budget_ms:g} ms: {doc['latency_class']}"
            )
        if admitted is not None:
            typer.echo(f"admission: {admitted}")
    if not sampled.green:
        raise VerdictError("the property lane is red: no timing freeze", ExitCode.BLOCKING)
    if admitted is not None and admitted != "timing_debt_opened":
        raise VerdictError(f"timing freeze refused: {admitted}", ExitCode.BLOCKING)


def register(app: typer.Typer) -> None:
    app.command("budget")(budget)
