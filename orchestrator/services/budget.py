"""The latency probe of seed 004 (lanes.md section 4), separate from the property replay.

Sample one check at least 5 times on one revision, same input, same image; report the
samples, their median and spread and ``classify_latency``. With an admission request
(``budget --admit``), and only after sampling, run seed 004's ``admit`` and record its
code (and the timing freeze it opens) in the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.errors import InputError
from orchestrator.services.thaw import BudgetSamples


@dataclass(frozen=True, kw_only=True)
class BudgetOptions:
    """What to sample: one check, one revision, one image, ``samples`` times."""

    repo: Path
    rev: str  # any git revision; pinned to its SHA
    image: str  # tag or ID; pinned to its ID, never pulled
    property_id: str
    budget_ms: float
    samples: int
    command: str
    timeout_s: float
    runner_id: str
    fixture: Path | None


@dataclass(frozen=True, kw_only=True)
class AdmissionOptions:
    """``--admit``: who owns the timing freeze, how long it may live, which ledger."""

    owner: str
    max_age: timedelta
    oracle_keys: tuple[str, ...]
    locked_digest: str | None  # None: the fixture's own oracle digest
    ledger_url: str


@dataclass(frozen=True, kw_only=True)
class BudgetOutcome:
    sampled: BudgetSamples
    report: dict[str, Any]  # the budget-report/1 document
    admitted: str | None  # with --admit: the admission code, or the ledger's refusal code


def run_budget(
    options: BudgetOptions,
    *,
    admission: AdmissionOptions | None,
    env: Mapping[str, str],
    clock: Callable[[], datetime],
) -> BudgetOutcome:
    """Sample the check in the replay engine, then (with ``admission``) admit and record.

    The freeze opens when the samples are in: ``clock`` is read after sampling.
    """
    from orchestrator.adapters.git import resolve_rev
    from orchestrator.core.bounds import MAX_REPLAYS, count_problem
    from orchestrator.files import parse_json, read_bytes
    from orchestrator.services.sides.pool import open_backend
    from orchestrator.services.thaw import Probe, run_check

    problem = count_problem("--samples", options.samples, maximum=MAX_REPLAYS, minimum=5)
    if problem is not None:
        raise InputError(problem)
    payload = None
    fixture_bytes = None
    if options.fixture is not None:
        fixture_bytes = read_bytes(options.fixture, name=f"--fixture {options.fixture}")
        payload = parse_json(fixture_bytes, str(options.fixture))
    repo = options.repo.resolve()
    sha = resolve_rev(repo, options.rev)
    with open_backend(env) as backend:
        image_id = backend.resolve_image(options.image).id
        probe = Probe(
            repo=repo,
            rev=sha,
            image_id=image_id,
            replays=options.samples,
            timeout_s=options.timeout_s,
            runner_id=options.runner_id,
        )
        replays = run_check(
            probe,
            property_id=options.property_id,
            command=options.command,
            fixture_bytes=fixture_bytes,
            seed=0,
            backend=backend,
        )
    sampled = BudgetSamples(
        property_id=options.property_id,
        rev=sha,
        image_id=image_id,
        budget_ms=options.budget_ms,
        labels=tuple(r.label for r in replays),
        samples_ms=tuple(float(r.duration_ms) for r in replays if r.duration_ms is not None),
    )
    report = sampled.to_json()
    if admission is None:
        return BudgetOutcome(sampled=sampled, report=report, admitted=None)
    admitted, report["admission"] = _admit(sampled, payload, admission, now=clock())
    return BudgetOutcome(sampled=sampled, report=report, admitted=admitted)


def _admit(
    sampled: BudgetSamples, payload: Any, admission: AdmissionOptions, *, now: datetime
) -> tuple[str, dict[str, Any]]:
    """Seed 004's admission over the samples, recorded in the ledger."""
    from orchestrator.adapters.ledger import Ledger
    from orchestrator.core.admission import AdmissionRequest, evaluate
    from orchestrator.core.digest import oracle_digest
    from orchestrator.core.timing import FreezeRequest
    from orchestrator.services.ledger_jobs import record_admission
    from orchestrator.services.thaw import budget_checks

    spread = sampled.summary()["spread_ms"] or 0.0
    request = AdmissionRequest(
        freeze=FreezeRequest(
            test_name=sampled.property_id,
            owner=admission.owner,
            opened_at=now,
            max_age_hours=admission.max_age.total_seconds() / 3600,
            sample_runs=len(sampled.samples_ms),
            spread_ms=spread,
            budget_ms=sampled.budget_ms,
        ),
        samples=sampled.samples_ms,
        checks=tuple(budget_checks(sampled)),
        payload=payload,
        oracle_keys=admission.oracle_keys,
        locked_oracle_digest=admission.locked_digest
        or oracle_digest(payload, admission.oracle_keys),
        now=now,
    )
    outcome = evaluate(request, now)
    with Ledger.open(admission.ledger_url) as store:
        recorded = record_admission(
            store,
            admission_code=outcome.admission.code,
            record=outcome.freeze,
            now=now,
            detail={
                "rev": sampled.rev,
                "image_id": sampled.image_id,
                "labels": list(sampled.labels),
            },
        )
    admitted = outcome.admission.code
    if recorded.freeze is not None and not recorded.freeze.written:
        admitted = recorded.freeze.codes[0]
    return admitted, outcome.to_json() | {"ledger": recorded.to_json()}
