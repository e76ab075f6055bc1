"""Bilateral replay, one entry point: :func:`run_replay` opens the pool of engines (and
the ledger, meanwhile), plans, replays, decides and records; with ``--shrink`` the
shrink phase (:mod:`orchestrator.services.replay_shrink`) follows the replay and decides
instead of it.

The steps live in their own modules: the plan (:mod:`orchestrator.services.replay_plan`:
both revisions pinned to SHAs, the image to one ID on the first engine, never pulled,
the fixture, the tests, the screening policy and the workers, ``run-log.json``), the
screening (:mod:`orchestrator.services.screening`: K replays of every property, then N
of those with signal) and the recording (:mod:`orchestrator.services.recording`:
evidence, decisions, durations, ``summary.json``, then the ledger). :func:`execute`
replays both sides at once (:func:`orchestrator.services.sides.run_sides`, spread over
the pool), compares each property's oracle slice on both revisions, decides with the
pure core (:mod:`orchestrator.core.replay_run`) and writes the run folder; its frozen
:class:`ReplayOutcome` is what the ledger and the shrink build on.

The run folder is checked before anything runs and marked ``INCOMPLETE`` until
``summary.json`` is written; a ``--property`` that names no test on either side is bad
input, before any replay when the sources tell, else after collection (never an infra
case); the ledger is written after the folder is complete, and a ledger that fails
leaves the report whole (``recording_error``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core.neutralise import neutralised_fields
from orchestrator.core.replay_run import (
    BASE,
    PATCH,
    DecidedProperty,
    Pins,
    ReplayOptions,
    RunPlan,
    decide_all,
    never_collected,
    report_document,
)
from orchestrator.core.screening import (
    RAW,
    Screening,
)
from orchestrator.errors import InputError, Interrupted
from orchestrator.log import get_logger
from orchestrator.model import Decision
from orchestrator.services.evidence_reuse import SideReuse, plan_reuse
from orchestrator.services.evidence_rounds import gather_evidence
from orchestrator.services.oracle import (
    property_oracles,
)
from orchestrator.services.recording import (
    LedgerRequest,
    complete_and_record,
    import_in_background,
    open_ledger_for_run,
    record_run_durations,
    write_outcomes,
)
from orchestrator.services.replay_plan import (
    plan_replay,
    run_folder,
    side_spec,
    sides_plan,
    unknown_message,
)
from orchestrator.services.run_writer import RUN_LOG, write_json
from orchestrator.services.screening import Replaying, screen_and_replay
from orchestrator.services.sides import (
    NO_TEST_REPORTED,
    SidesOutcome,
    run_sides,
)
from orchestrator.services.sides.pool import Pool, open_pool
from orchestrator.services.sides.warm import WarmPool

if TYPE_CHECKING:
    from orchestrator.services.replay_shrink import ShrinkingReplay
    from orchestrator.services.shrink import CandidateProgress
    from orchestrator.services.sides import Progress

log = get_logger(__name__)

# A shrink replays one property: its two sides at once on one engine.
SHRINK_SLOTS = 2


@dataclass(frozen=True, kw_only=True)
class ReplayRequest:
    """One ``replay`` run: its options, when it started, its id, where it records."""

    options: ReplayOptions
    now: datetime
    run_id: str
    # --runner-id as given: without it, each engine of a named pool is called by its URL.
    runner_id: str | None = None
    ledger: LedgerRequest | None = None
    shrink: bool = False  # shrink the fixture against the property failing on the patch

    @property
    def run_dir(self) -> Path:
        return run_folder(self.options, self.run_id)


@dataclass(frozen=True, kw_only=True)
class ReplayResult:
    """What ``replay`` produced: the run that decides and the report it printed."""

    deciding: ReplayOutcome
    report: Mapping[str, Any]
    # Recording was asked and failed: the one line the run ends with.
    recording_error: str | None = None
    shrink: ShrinkingReplay | None = None  # with --shrink: what the shrink did

    @property
    def run_dir(self) -> Path:
        return Path(self.report["run_dir"])

    @property
    def exit_status(self) -> int:
        return int(self.report["exit_status"])


@dataclass(frozen=True, kw_only=True)
class ReplayOutcome:
    """What a replay produced: the plan it ran, one evidence and decision per property."""

    plan: RunPlan
    properties: tuple[DecidedProperty, ...]  # their documents: the run's store
    report: Mapping[str, Any]
    exit_status: int
    # Recording was asked and failed (the run folder is complete, the ledger untouched).
    recording_error: str | None = None

    @property
    def run_id(self) -> str:
        return self.plan.run_id

    @property
    def pins(self) -> Pins:
        return self.plan.pins

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return tuple(item.decision for item in self.properties)


def execute(
    plan: RunPlan,
    *,
    pool: Pool,
    progress: Progress | None = None,
    ledger: LedgerRequest | None = None,
) -> ReplayOutcome:
    """Replay both sides at once, decide every property, write the run folder (and the
    ledger, when asked)."""
    options = plan.options
    if ledger is not None:
        import_in_background("orchestrator.services.ledger_jobs")
    # The base side's screening an earlier run stored (lanes.md section 10).
    reuse = plan_reuse(plan, ledger_url=None if ledger is None else ledger.url)
    properties: tuple[DecidedProperty, ...] = ()
    screening: Screening | None = None
    extra: dict[str, Any] = {}
    if not plan.nothing_selected:
        # Batches are cut and ordered by the run's one record of durations.
        pool = replace(pool, durations=plan.scheduling.durations)
        rule = plan.evidence_policy
        # A screening's containers serve its second phase, then the rounds of evidence.
        warm = (
            WarmPool(
                reuse=options.isolation != "container",
                repark=rule.enabled and len(rule.looks) > 1,
            )
            if plan.screen_policy.enabled
            else None
        )
        with warm if warm is not None else nullcontext():
            properties, screening, outcome, gathered = _replay_and_decide(
                plan, pool=pool, progress=progress, warm=warm, reuse=reuse
            )
        labelled = outcome.labelled
        extra["evidence"] = dict(gathered)
        extra["neutralised"] = list(outcome.neutralised)
        said = neutralised_fields(outcome.neutralised, plan.neutralise.asked())
        if said is not None:  # once per run: what its replays had, and what they did to it
            log.info("replay.neutralised", **said)
        if plan.engines:
            extra["engines"] = [dict(engine) for engine in outcome.engines]
        if outcome.attempts:
            extra["attempts"] = [attempt.to_json() for attempt in outcome.attempts]
        # --no-record writes the run folder only: durations go into the record with the
        # ledger. A shard keeps its own: its siblings must cut the selection from the same
        # record (``orchestrator merge`` folds the shards' durations in).
        record_run_durations(plan, labelled, keep=ledger is not None and plan.shard is None)
        # The run log says what the rounds spent, beside the rule it pinned.
        write_json(plan.run_dir, RUN_LOG, {**plan.run_log(), "evidence": extra["evidence"]})
    report = report_document(plan, properties, screening)
    report.update(extra)
    report, recording_error = complete_and_record(plan, properties, report, ledger)
    if reuse is not None:  # the run folder is complete: its clean sides may be stored
        reuse.flush()
        write_json(
            plan.run_dir,
            RUN_LOG,
            {**plan.run_log(), "evidence": extra.get("evidence"), "reuse": reuse.to_json()},
        )
    return ReplayOutcome(
        plan=plan,
        properties=properties,
        report=report,
        exit_status=report["exit_status"],
        recording_error=recording_error,
    )


def _replay_and_decide(
    plan: RunPlan,
    *,
    pool: Pool,
    progress: Progress | None,
    warm: WarmPool | None,
    reuse: SideReuse | None = None,
) -> tuple[tuple[DecidedProperty, ...], Screening | None, SidesOutcome, Mapping[str, Any]]:
    """Replay both sides (screened, with ``warm``), decide every property, replay more
    where a verdict on a mixed side lacks evidence (lanes.md section 3b), write each
    property's documents. Returns the decided properties, the screening, the replays and
    what the rounds of evidence did."""
    options, pins = plan.options, plan.pins
    sides = (side_spec(plan, BASE, pins.base_rev), side_spec(plan, PATCH, pins.patch_rev))
    settled: tuple[DecidedProperty, ...] = ()
    screening: Screening | None = None
    if warm is not None:
        outcome, oracle, screening, settled = screen_and_replay(
            plan, sides, pool=pool, progress=progress, warm=warm, reuse=reuse
        )
    else:
        outcome = run_sides(
            sides_plan(plan),
            sides,
            progress=progress,
            run_id=plan.run_id,
            keep_raw=plan.run_dir / RAW,
            pool=pool,
        )
        named = [p for p in outcome.labelled[BASE] if p != NO_TEST_REPORTED]
        oracle = property_oracles(
            options.repo, pins.base_rev, pins.patch_rev, named, overlay=plan.overlay
        )
    labelled = outcome.labelled
    never = never_collected(labelled)
    if never:  # the user's typo, not the runner's: no evidence, no infra row
        raise InputError(unknown_message(never))
    done = {item.property_id for item in settled}
    first_look = decide_all(
        plan,
        labelled,
        oracle,
        screening,
        only=[p for p in labelled[BASE] if p not in done],
        runners=outcome.runners,
        raw_dirs=outcome.raw_dirs,
    )
    gathered = gather_evidence(
        plan,
        first_look,
        outcome,
        oracle=oracle,
        screening=screening,
        via=Replaying(sides=sides, pool=pool, progress=progress, warm=warm),
    )
    if warm is not None and warm.close():  # nothing left to run in them
        raise Interrupted("interrupted; containers and sources removed")
    decided = write_outcomes(plan, gathered.properties)
    properties = tuple(sorted((*settled, *decided), key=lambda item: item.index))
    return properties, screening, gathered.outcome, gathered.summary


def run_replay(
    request: ReplayRequest,
    *,
    watch: Callable[[], AbstractContextManager[Progress | None]] = nullcontext,
    shrink_progress: CandidateProgress | None = None,
    on_planned: Callable[[RunPlan], object] | None = None,
) -> ReplayResult:
    """Open the pool (and the ledger, meanwhile), plan, replay, decide, record; with
    ``request.shrink``, the shrink phase follows the replay and decides instead of it.
    ``watch`` opens the live progress once the run is planned."""
    options = request.options
    if request.shrink:
        # Only a shrinking replay pays for the shrinker's modules (a replay's start-up).
        from orchestrator.services.replay_shrink import check_shrink_folder

        check_shrink_folder(request.run_dir)
        options = replace(options, out=request.run_dir)
    slots = (options.slots or SHRINK_SLOTS) if request.shrink else options.slots
    with contextlib.ExitStack() as resources:
        pending = None
        if request.ledger is not None:  # opened while the run plans, checked before it runs
            pending = open_ledger_for_run(request.ledger.url, store_needed=request.ledger.freeze)
            resources.callback(pending.close)
        pool = open_pool(options.engines, os.environ, runner_id=request.runner_id, slots=slots)
        resources.callback(pool.close)
        pool.image_ref = options.image
        plan = plan_replay(
            options,
            pool=pool,
            now=request.now,
            run_id=request.run_id,
            before_containers=pending.check if pending is not None else None,
            records_in_ledger=request.ledger is not None,
        )
        ledger = request.ledger
        if pending is not None and ledger is not None:
            ledger = replace(ledger, open_store=pending.result)
        if on_planned is not None:
            on_planned(plan)
        with watch() as progress:
            return _replay_planned(
                plan,
                pool=pool,
                ledger=ledger,
                shrink=request.shrink,
                progress=progress,
                shrink_progress=shrink_progress,
            )


def _replay_planned(
    plan: RunPlan,
    *,
    pool: Pool,
    ledger: LedgerRequest | None,
    shrink: bool,
    progress: Progress | None,
    shrink_progress: CandidateProgress | None,
) -> ReplayResult:
    """Replay the planned run; with ``shrink``, the shrink phase decides instead of it."""
    if not shrink:
        outcome = execute(plan, pool=pool, progress=progress, ledger=ledger)
        return ReplayResult(
            deciding=outcome, report=outcome.report, recording_error=outcome.recording_error
        )
    from orchestrator.services.replay_shrink import keep_origin, shrink_phase

    keep_origin(plan)
    wide = execute(plan, pool=pool, progress=progress)  # recorded once the shrink decides

    def replay_minimal(minimal: ReplayOptions, run_id: str) -> ReplayOutcome:
        minimal_plan = plan_replay(minimal, pool=pool, now=plan.started_at, run_id=run_id)
        return execute(minimal_plan, pool=pool, progress=progress, ledger=ledger)

    shrunk = shrink_phase(
        wide,
        backend=pool.first,
        ledger=ledger,
        replay=replay_minimal,
        progress=shrink_progress,
    )
    recorded = shrunk.report.get("ledger")
    error = None
    if recorded and recorded.get("recorded") is False:
        error = str(recorded.get("error"))
    return ReplayResult(
        deciding=shrunk.deciding, report=shrunk.report, recording_error=error, shrink=shrunk
    )
