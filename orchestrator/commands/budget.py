"""``orchestrator budget``: the latency probe of seed 004, separate from the property replay."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.commands.freeze import LEDGER_HELP


def budget(  # noqa: PLR0917 - one parameter per command-line option
    repo: Annotated[Path, typer.Option("--repo", help="The repository to sample.")],
    rev: Annotated[str, typer.Option("--rev", help="The one revision sampled.")],
    image: Annotated[str, typer.Option("--image", help="Runner image (tag or ID; never pulled).")],
    property_id: Annotated[
        str, typer.Option("--property", metavar="NODEID", help="The check to time (a node id).")
    ],
    budget_ms: Annotated[
        float, typer.Option("--budget-ms", min=0.0, help="The written latency budget, in ms.")
    ],
    samples: Annotated[
        int, typer.Option("--samples", min=5, help="How many samples (at least 5).")
    ] = 5,
    fixture: Annotated[
        Path | None, typer.Option("--fixture", help="JSON fixture given to every sample.")
    ] = None,
    command: Annotated[
        str, typer.Option("--command", help="The pytest command whose options are used.")
    ] = "pytest -q",
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds allowed per sample.")
    ] = 60.0,
    admit: Annotated[
        bool,
        typer.Option(
            "--admit",
            help="Run seed 004's admission and record its code (and a timing freeze on "
            "timing_debt_opened) in the ledger.",
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
    ledger: Annotated[str | None, typer.Option("--ledger", help=LEDGER_HELP)] = None,
) -> None:
    """Sample one check >= 5 times (one revision, same input, same image) and classify it.

    Prints the samples (the test body's duration in each replay), their median and
    spread, and classify_latency: unknown (within budget), timing (wide spread) or
    property (a stable overrun is a contract miss). Latency never enters a replay
    label. With --admit --owner NAME --max-age 24h, and only if every sample's
    property passed, seed 004's admit runs and its code is stored in the ledger's
    event log; timing_debt_opened also writes the timing freeze. Exit 0 when the
    property lane is green (and, with --admit, the freeze was opened), 1 otherwise.
    """
    from orchestrator.adapters.docker import connect, resolve_image
    from orchestrator.adapters.git import resolve_rev
    from orchestrator.core.admission import AdmissionRequest, evaluate
    from orchestrator.core.digest import oracle_digest
    from orchestrator.core.durations import parse_duration
    from orchestrator.core.timing import FreezeRequest
    from orchestrator.errors import ExitCode, InputError, VerdictError
    from orchestrator.files import dumps, read_json
    from orchestrator.services.ledger_jobs import open_ledger, record_admission
    from orchestrator.services.thaw import (
        BudgetSamples,
        Probe,
        budget_checks,
        run_check,
    )

    age = parse_duration(max_age, option="--max-age")
    keys = tuple(k.strip() for k in oracle_keys.split(",") if k.strip())
    payload = None
    fixture_bytes = None
    if fixture is not None:
        payload = read_json(str(fixture))
        fixture_bytes = fixture.read_bytes()
    if admit and owner is None:
        raise InputError("--admit needs --owner NAME")
    repo = repo.resolve()
    sha = resolve_rev(repo, rev)
    client = connect(os.environ)
    image_id = resolve_image(client, image).id
    probe = Probe(
        repo=repo, rev=sha, image_id=image_id, replays=samples, timeout_s=timeout,
        runner_id=runner_id,
    )  # fmt: skip
    replays = run_check(
        probe,
        property_id=property_id,
        command=command,
        fixture_bytes=fixture_bytes,
        seed=0,
        client=client,
    )
    sampled = BudgetSamples(
        property_id=property_id,
        rev=sha,
        image_id=image_id,
        budget_ms=budget_ms,
        labels=tuple(r.label for r in replays),
        samples_ms=tuple(float(r.duration_ms) for r in replays if r.duration_ms is not None),
    )
    doc = sampled.to_json()
    admitted = None
    if admit:
        now = datetime.now(UTC)
        _, spread = (doc["median_ms"], doc["spread_ms"] or 0.0)
        request = AdmissionRequest(
            freeze=FreezeRequest(
                test_name=property_id,
                owner=owner or "",
                opened_at=now,
                max_age_hours=age.total_seconds() / 3600,
                sample_runs=len(sampled.samples_ms),
                spread_ms=spread,
                budget_ms=budget_ms,
            ),
            samples=sampled.samples_ms,
            checks=tuple(budget_checks(sampled)),
            payload=payload,
            oracle_keys=keys,
            locked_oracle_digest=locked_digest or oracle_digest(payload, keys),
            now=now,
        )
        outcome = evaluate(request, now)
        with open_ledger(ledger, os.environ, Path.cwd()) as store:
            recorded = record_admission(
                store,
                admission_code=outcome.admission.code,
                record=outcome.freeze,
                now=now,
                detail={"rev": sha, "image_id": image_id, "labels": list(sampled.labels)},
            )
        admitted = outcome.admission.code
        doc["admission"] = outcome.to_json() | {"ledger": recorded.to_json()}
        if recorded.freeze is not None and not recorded.freeze.written:
            admitted = recorded.freeze.codes[0]
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
