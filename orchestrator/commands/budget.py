"""``orchestrator budget``: the latency probe of seed 004, separate from the property replay."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.commands._options import (
    DEFAULT_TIMEOUT_S,
    INPUT_FILE_RULE,
    MAX_REPLAYS,
    ImageOption,
    LedgerOption,
    TimeoutOption,
)


def budget(  # noqa: PLR0913 - a Typer command's options are its parameters
    *,
    repo: Annotated[Path, typer.Option("--repo", help="The repository to sample.")],
    rev: Annotated[str, typer.Option("--rev", help="The one revision sampled.")],
    image: ImageOption,
    property_id: Annotated[
        str, typer.Option("--property", metavar="NODEID", help="The check to time (a node id).")
    ],
    budget_ms: Annotated[
        float, typer.Option("--budget-ms", min=0.0, help="The written latency budget, in ms.")
    ],
    samples: Annotated[
        int,
        typer.Option(
            "--samples", min=5, max=MAX_REPLAYS, help=f"How many samples (5 to {MAX_REPLAYS})."
        ),
    ] = 5,
    fixture: Annotated[
        Path | None,
        typer.Option("--fixture", help=f"JSON fixture given to every sample ({INPUT_FILE_RULE})."),
    ] = None,
    command: Annotated[
        str, typer.Option("--command", help="The pytest command whose options are used.")
    ] = "pytest -q",
    timeout: TimeoutOption = DEFAULT_TIMEOUT_S,
    admit: Annotated[
        bool,
        typer.Option(
            "--admit",
            help="Run the timing admission (docs/lanes.md section 4) and record its code "
            "(and a timing freeze on timing_debt_opened) in the ledger.",
        ),
    ] = False,
    owner: Annotated[
        str | None, typer.Option("--owner", help="Who owns the timing freeze (with --admit).")
    ] = None,
    max_age: Annotated[
        str, typer.Option("--max-age", help="The freeze's age, 1h..72h (with --admit).")
    ] = "24h",
    oracle_keys: Annotated[
        str,
        typer.Option("--oracle-keys", help="Comma-separated oracle keys of the fixture."),
    ] = "",
    locked_digest: Annotated[
        str | None,
        typer.Option(
            "--locked-digest",
            help="The fixture's locked oracle digest (sha256:...). Default: the fixture's "
            "own oracle digest, i.e. no lock beyond the file given.",
        ),
    ] = None,
    runner_id: Annotated[str, typer.Option("--runner-id", help="Label of this runner.")] = "local",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a budget-report/1 document.")
    ] = False,
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
    from orchestrator.core.durations import parse_duration
    from orchestrator.errors import ExitCode, InputError, VerdictError
    from orchestrator.files import dumps
    from orchestrator.services.budget import AdmissionOptions, BudgetOptions, run_budget

    age = parse_duration(max_age, option="--max-age")
    if admit and owner is None:
        raise InputError("--admit needs --owner NAME")
    options = BudgetOptions(
        repo=repo,
        rev=rev,
        image=image,
        property_id=property_id,
        budget_ms=budget_ms,
        samples=samples,
        command=command,
        timeout_s=timeout,
        runner_id=runner_id,
        fixture=fixture,
    )
    admission = None
    if admit:
        admission = AdmissionOptions(
            owner=owner or "",
            max_age=age,
            oracle_keys=tuple(k.strip() for k in oracle_keys.split(",") if k.strip()),
            locked_digest=locked_digest,
            ledger_url=ledger,
        )
    outcome = run_budget(
        options, admission=admission, env=os.environ, clock=lambda: datetime.now(UTC)
    )
    doc, sampled, admitted = outcome.report, outcome.sampled, outcome.admitted
    if as_json:
        typer.echo(dumps(doc))
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
