"""The scheduled thaw (lanes.md section 6) and the budget probe (section 4), over the engine.

``thaw``: claim every due freeze atomically (two jobs never take the same row), re-probe
it in the replay engine at the revision under test, and either thaw it (the live row is
deleted, the THAWED event kept) or leave it ``overdue`` (an OVERDUE event; the job exits
1). A freeze is never renewed.

``budget``: sample one check at least 5 times on one revision, same input, same image;
report median, spread and ``classify_latency``; with an admission request, run seed 004's
``admit`` and record the code (and the timing freeze it opens) in the ledger.

The verdicts are pure and live in :mod:`orchestrator.core.thaw`.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator import interrupts, model
from orchestrator.adapters.ledger import FreezeRow, Ledger
from orchestrator.core.owners import ProcessOwner, claim_token, local_owner, owner_from_token
from orchestrator.core.pytest_command import pytest_args
from orchestrator.core.records import fixture_to_mount
from orchestrator.core.thaw import Verdict, flake_thaw_verdict, timing_thaw_verdict
from orchestrator.core.timing import MIN_SAMPLES, classify_latency, latency_summary
from orchestrator.errors import ImageNotFoundError, InputError
from orchestrator.log import get_logger

if TYPE_CHECKING:
    from orchestrator.core.backend import Backend

log = get_logger(__name__)

THAW_SCHEMA = "thaw-report/1"
BUDGET_SCHEMA = "budget-report/1"
DEFAULT_THAW_REPLAYS = 5


# --- sampling in the replay engine --------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Probe:
    """How to re-run one check: where, which image, how many times, how long."""

    repo: Path
    rev: str  # full SHA
    image_id: str
    replays: int
    timeout_s: float
    runner_id: str = "local"


def run_check(
    probe: Probe,
    *,
    property_id: str,
    command: str,
    fixture_bytes: bytes | None,
    seed: int,
    backend: Backend,
) -> tuple[model.Replay, ...]:
    """Replay one property ``probe.replays`` times on one revision; returns its replays."""
    from orchestrator.adapters import git as git_adapter
    from orchestrator.services.sides import ReplayPlan, SideSpec, run_sides

    with contextlib.ExitStack() as cleanup:
        # Named after this process, so a killed thaw's folder is swept by the next run; the
        # shield keeps a Ctrl-C from landing between its creation and its cleanup.
        with interrupts.shielded():
            scratch = git_adapter.make_scratch("fixture", prefix=git_adapter.THAW_SCRATCH_PREFIX)
            cleanup.callback(git_adapter.remove_scratch, scratch)
        fixture: Path | None = None
        if fixture_bytes is not None:
            fixture = scratch / "fixture.json"
            fixture.write_bytes(fixture_bytes)
            fixture.chmod(0o644)
        plan = ReplayPlan(
            image_id=probe.image_id,
            pytest_args=pytest_args(command, [property_id]),
            property_ids=(property_id,),
            fixture=fixture,
            replays=probe.replays,
            timeout_s=probe.timeout_s,
            seed=seed,
            runner_id=probe.runner_id,
        )
        side = SideSpec(name="probe", repo=probe.repo, rev=probe.rev)
        result = run_sides(plan, [side], backend=backend).labelled
    return result["probe"].get(property_id, ())


# --- the thaw job -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ThawResult:
    freeze: FreezeRow
    verdict: Verdict
    labels: tuple[str, ...] = ()
    samples_ms: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "freeze_id": self.freeze.id,
            "kind": self.freeze.kind.value,
            "subject": self.freeze.subject,
            "owner": self.freeze.owner,
            "expires_at": self.freeze.expires_at.isoformat(),
            "outcome": "thawed" if self.verdict.thawed else "overdue",
            "code": self.verdict.code,
            "reasons": list(self.verdict.reasons),
            "labels": list(self.labels),
            "samples_ms": list(self.samples_ms),
        }


@dataclass(frozen=True, kw_only=True)
class ThawReport:
    rev: str
    now: datetime
    due_within: timedelta
    results: tuple[ThawResult, ...] = field(default_factory=tuple)

    @property
    def overdue(self) -> int:
        return sum(not r.verdict.thawed for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": THAW_SCHEMA,
            "rev": self.rev,
            "now": self.now.isoformat(),
            "due_within_s": self.due_within.total_seconds(),
            "thawed": len(self.results) - self.overdue,
            "overdue": self.overdue,
            "results": [r.to_json() for r in self.results],
        }


@dataclass(frozen=True, kw_only=True)
class ThawOptions:
    repo: Path
    rev: str  # full SHA
    replays: int = DEFAULT_THAW_REPLAYS
    timeout_s: float = 60.0
    image: str | None = None  # overrides a flake freeze's pinned image; timing freezes need it
    runner_id: str = "local"
    timing_command: str = "pytest -q"


def _probe_one(
    row: FreezeRow, options: ThawOptions, backend: Backend
) -> tuple[Verdict, tuple[str, ...], tuple[float, ...]]:
    from orchestrator.services.image import RUNNER_IMAGE

    record = row.record
    if row.kind is model.FreezeKind.FLAKE:
        image_ref = options.image or str(record["image_digest"])
    else:
        image_ref = options.image or RUNNER_IMAGE
    try:
        image_id = backend.resolve_image(image_ref).id
    except ImageNotFoundError as error:
        return Verdict(thawed=False, code="image_not_found", reasons=(str(error),)), (), ()
    probe = Probe(
        repo=options.repo,
        rev=options.rev,
        image_id=image_id,
        replays=options.replays
        if row.kind is model.FreezeKind.FLAKE
        else max(options.replays, MIN_SAMPLES),
        timeout_s=options.timeout_s,
        runner_id=options.runner_id,
    )
    if row.kind is model.FreezeKind.FLAKE:
        replays = run_check(
            probe,
            property_id=row.subject,
            command=str(record["command"]),
            fixture_bytes=fixture_to_mount(record.get("fixture_digest"), row.fixture_bytes),
            seed=int(record["seed"]),
            backend=backend,
        )
        labels = tuple(r.label for r in replays)
        return flake_thaw_verdict(replays, probe.replays), labels, ()
    replays = run_check(
        probe,
        property_id=row.subject,
        command=options.timing_command,
        fixture_bytes=None,
        seed=0,
        backend=backend,
    )
    labels = tuple(r.label for r in replays)
    samples = tuple(float(r.duration_ms) for r in replays if r.duration_ms is not None)
    verdict = timing_thaw_verdict(labels, samples, float(record["budget_ms"]))
    return verdict, labels, samples


def run_thaw(
    ledger: Ledger,
    options: ThawOptions,
    *,
    now: datetime,
    due_within: timedelta,
    backend: Backend | None,
) -> ThawReport:
    """Claim the due freezes, re-probe each, thaw or mark overdue. Never renews a freeze.

    Claims held by a thaw job of this host whose process is gone are given back first
    (a SIGKILLed job must not hold its freezes until the claims go stale)."""
    from orchestrator.adapters.host import current_owner
    from orchestrator.core.bounds import MAX_REPLAYS, count_problem

    problem = count_problem("--replays", options.replays, maximum=MAX_REPLAYS)
    if problem is not None:  # before any freeze is claimed
        raise InputError(problem)
    release_dead_claims(ledger)
    claimant = claim_token(current_owner(), uuid.uuid4().hex[:12])
    token, rows = ledger.claim_due(now, within=due_within, claimant=claimant)
    log.info("thaw.claimed", count=len(rows), rev=options.rev)
    results: list[ThawResult] = []
    pending = {row.id for row in rows}
    try:
        with contextlib.ExitStack() as stack:  # the engine, once a freeze needs it
            if rows and backend is None:
                from orchestrator.services.sides.pool import open_backend

                backend = stack.enter_context(open_backend(os.environ))
            for row in rows:
                assert backend is not None
                verdict, labels, samples = _probe_one(row, options, backend)
                detail: Mapping[str, Any] = {
                    "rev": options.rev,
                    "labels": list(labels),
                    "samples_ms": list(samples),
                    "reasons": list(verdict.reasons),
                    "verdict": verdict.code,
                }
                if verdict.thawed:
                    ledger.thaw(row.id, token=token, now=now, detail=detail)
                else:
                    ledger.mark_overdue(
                        row.id, token=token, now=now, code=verdict.code, detail=detail
                    )
                pending.discard(row.id)
                log.info("thaw.result", freeze=row.id, outcome=verdict.code, thawed=verdict.thawed)
                results.append(
                    ThawResult(freeze=row, verdict=verdict, labels=labels, samples_ms=samples)
                )
    finally:
        for freeze_id in pending:  # not probed (an error or Ctrl-C): give the row back
            ledger.release(freeze_id, token=token)
    return ThawReport(rev=options.rev, now=now, due_within=due_within, results=tuple(results))


def thaw_due(
    ledger_url: str, options: ThawOptions, *, now: datetime, due_within: timedelta
) -> ThawReport:
    """:func:`run_thaw` at ``options.rev`` (any revision, pinned here to its full SHA) on
    the ledger at ``ledger_url``, opened and closed here; the engine is connected only
    when a freeze is actually claimed."""
    from orchestrator.adapters.git import resolve_rev

    repo = options.repo.resolve()
    options = replace(options, repo=repo, rev=resolve_rev(repo, options.rev))
    with Ledger.open(ledger_url) as store:
        return run_thaw(store, options, now=now, due_within=due_within, backend=None)


def release_dead_claims(
    ledger: Ledger,
    *,
    host: str | None = None,
    is_alive: Callable[[ProcessOwner], bool] | None = None,
) -> int:
    """Release the claims of this host's thaw jobs that died; another host's claims are
    left to the claim lifetime (their pids mean nothing here). How many rows came back."""
    from orchestrator.adapters.host import host_id, owner_alive

    host = host or host_id()
    alive = is_alive or owner_alive
    dead = []
    for token in ledger.claimants():
        owner = owner_from_token(token)
        if owner is not None and local_owner(owner, host) and not alive(owner):
            dead.append(token)
    released = ledger.release_claims(dead)
    if released:
        log.info("thaw.released_dead_claims", rows=released, jobs=len(dead))
    return released


# --- the budget probe -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BudgetSamples:
    property_id: str
    rev: str
    image_id: str
    budget_ms: float
    labels: tuple[str, ...]
    samples_ms: tuple[float, ...]

    @property
    def green(self) -> bool:
        """The property lane: every sample's property passed."""
        return bool(self.labels) and all(label == model.Label.ASSERT_PASS for label in self.labels)

    def summary(self) -> dict[str, Any]:
        if not self.samples_ms:
            return {"median_ms": None, "spread_ms": None, "latency_class": None}
        median, spread = latency_summary(self.samples_ms)
        return {
            "median_ms": median,
            "spread_ms": spread,
            "latency_class": classify_latency(median, self.budget_ms, spread).value,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": BUDGET_SCHEMA,
            "property_id": self.property_id,
            "rev": self.rev,
            "image_id": self.image_id,
            "budget_ms": self.budget_ms,
            "labels": list(self.labels),
            "samples_ms": list(self.samples_ms),
            "green": self.green,
            **self.summary(),
        }


def budget_checks(sampled: BudgetSamples) -> list[Any]:
    """The check results seed 004's ``admit`` reads, from the samples. Pure.

    The property lane (every replay passed) is a property check; the latency check is
    the timing check of the named test, failing when the median is over budget.
    """
    from orchestrator.core.timing import Check, Kind

    median = sampled.summary()["median_ms"]
    return [
        Check(name=f"property:{sampled.property_id}", passed=sampled.green, kind=Kind.PROPERTY),
        Check(
            name=sampled.property_id,
            passed=median is not None and median <= sampled.budget_ms,
            kind=Kind.TIMING,
        ),
    ]
