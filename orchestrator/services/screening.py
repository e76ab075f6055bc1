"""Screening: every property K times per side first, then only the properties with
signal until they have N (:mod:`orchestrator.core.screening`), one ``run_sides`` call
per phase, each property's second phase on the engine of its first, in the first
phase's containers (:mod:`orchestrator.services.sides.warm`); the properties without signal
are decided while the others replay."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.adapters.helper_process import HelperProcess
from orchestrator.adapters.results import replay_file_name
from orchestrator.core.oracle import OracleChange
from orchestrator.core.pool import plan_batches_on
from orchestrator.core.replay_run import (
    BASE,
    PATCH,
    DecidedProperty,
    RunPlan,
    decide_each,
)
from orchestrator.core.schedule import (
    measured_durations,
    order_longest_first,
)
from orchestrator.core.screening import (
    RAW,
    SECOND_PHASE,
    RawLink,
    Screening,
    combine,
    extend,
    in_suite_order,
    raw_layout,
    replay_targets,
    screen,
    second_phase_dir,
)
from orchestrator.errors import Interrupted
from orchestrator.log import get_logger
from orchestrator.services.oracle import (
    HELPER_FROM,
    LazyOracle,
    OracleComparer,
    Sources,
    compare_inputs,
    oracle_inputs,
    same_files,
    unchanged_ahead,
)
from orchestrator.services.recording import write_outcomes
from orchestrator.services.replay_plan import sides_plan
from orchestrator.services.sides import (
    NO_TEST_REPORTED,
    SidesOutcome,
    SideSpec,
    run_sides,
)
from orchestrator.services.sides.pool import Pool
from orchestrator.services.sides.warm import WarmPool

if TYPE_CHECKING:
    from orchestrator.services.evidence_reuse import SideReuse
    from orchestrator.services.sides import Progress

log = get_logger(__name__)


def screen_and_replay(
    plan: RunPlan,
    sides: Sequence[SideSpec],
    *,
    pool: Pool,
    progress: Progress | None,
    warm: WarmPool,
    reuse: SideReuse | None = None,
) -> tuple[SidesOutcome, dict[str, OracleChange], Screening, tuple[DecidedProperty, ...]]:
    """Screen every property K times per side, then replay those with signal until they
    have N replays per side, each on the engine of its screening.

    Returns both phases as one outcome (K, or N replays per property; the engine of each
    property; its raw folder), every property's oracle, the screening, and the properties
    without signal already decided and written: their evidence is complete after
    screening, so they are settled (their oracle digests computed, decided, written) while
    the ones with signal replay. ``warm`` (the caller's, who closes it) keeps the
    screening's containers for the second phase; with its ``repark`` they are kept on for
    the rounds of evidence that may follow, else removed as soon as the phase is over.
    ``reuse`` gives the first phase a side's screening an earlier run stored (that side
    runs no container for it) and keeps the clean sides for storing; the second phase
    replays both sides fresh.
    """
    with HelperProcess() as helper:
        return _screen_and_replay(
            plan, sides, pool=pool, progress=progress, warm=warm, reuse=reuse, helper=helper
        )


def _screen_and_replay(
    plan: RunPlan,
    sides: Sequence[SideSpec],
    *,
    pool: Pool,
    progress: Progress | None,
    warm: WarmPool,
    reuse: SideReuse | None,
    helper: HelperProcess,
) -> tuple[SidesOutcome, dict[str, OracleChange], Screening, tuple[DecidedProperty, ...]]:
    options, pins = plan.options, plan.pins
    policy = plan.screen_policy
    first = run_sides(
        sides_plan(plan, replays=policy.screen),
        sides,
        progress=progress,
        run_id=plan.run_id,
        keep_raw=plan.run_dir / RAW,
        pool=pool,
        warm=warm,
        reuse=reuse,
    )
    screened = first.labelled
    started = time.perf_counter()
    if len(screened[BASE]) >= HELPER_FROM:  # its interpreter starts while we screen
        helper.start()
    named = [property_id for property_id in screened[BASE] if property_id != NO_TEST_REPORTED]
    inputs = oracle_inputs(options.repo, pins.base_rev, pins.patch_rev, named, overlay=plan.overlay)
    # Only a property whose files differ between the sides can have a changed oracle: those
    # are sliced now, for the signal; the others only need their digests, later.
    oracle = compare_inputs({p: pair for p, pair in inputs.items() if not same_files(pair)})
    screening = screen(policy, screened, oracle, base=BASE, patch=PATCH)
    unchanged = {p: pair for p, pair in inputs.items() if same_files(pair)}
    quiet = [property_id for property_id in screened[BASE] if property_id not in screening.signals]
    log.debug(
        "screening.screened",
        properties=len(screened[BASE]),
        signals=len(screening.signals),
        seconds=round(time.perf_counter() - started, 3),
    )
    settler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="settle")
    try:
        settling = settler.submit(
            settle,
            plan,
            screened=first,
            unchanged=unchanged,
            oracle=oracle,
            screening=screening,
            quiet=quiet,
            helper=helper,
        )
        outcome = replay_signals(
            plan, screening, first, sides, pool=pool, progress=progress, warm=warm
        )
        # Nothing left to run in them (unless rounds of evidence may follow): not kept
        # while the last ones settle.
        if not warm.repark and warm.close():
            raise Interrupted("interrupted; containers and sources removed")
        digests, settled = settling.result()
    finally:
        settler.shutdown(wait=False, cancel_futures=True)
    # The settled properties' oracles are in their evidence: only those still to decide.
    pending = {p: change for p, change in digests.items() if p in screening.signals}
    return outcome, {**pending, **oracle}, screening, settled


def settle(
    plan: RunPlan,
    *,
    screened: SidesOutcome,
    unchanged: Mapping[str, tuple[Sources, Sources]],
    oracle: Mapping[str, OracleChange],
    screening: Screening,
    quiet: Sequence[str],
    helper: HelperProcess | None = None,
) -> tuple[dict[str, OracleChange], tuple[DecidedProperty, ...]]:
    """The oracle digests of the properties with signal whose files are the same on both
    sides, and the properties without signal decided on their screening replays, their
    files written. A quiet property's oracle is compared when it is decided, and not kept;
    with a started ``helper`` the unchanged ones are sliced there, ahead of the decisions
    (the slices are the larger half of this work)."""
    started = time.perf_counter()
    comparer = OracleComparer()
    try:
        digests = {
            property_id: comparer.change(property_id, pair)
            for property_id, pair in unchanged.items()
            if property_id in screening.signals
        }
        ahead = None
        if helper is not None and helper.started:
            ahead = unchanged_ahead(quiet, unchanged, comparer, helper)
        settled = write_outcomes(  # into the run's store, one at a time: little is kept
            plan,
            decide_each(
                plan,
                screened.labelled,
                LazyOracle({**digests, **oracle}, unchanged, comparer, ahead),
                screening,
                only=quiet,
                runners=screened.runners,
                raw_dirs=screened.raw_dirs,
            ),
        )
    finally:
        comparer.close()
    log.debug(
        "screening.settled",
        properties=len(settled),
        seconds=round(time.perf_counter() - started, 3),
    )
    return digests, settled


def replay_signals(
    plan: RunPlan,
    screening: Screening,
    first: SidesOutcome,
    sides: Sequence[SideSpec],
    *,
    pool: Pool,
    progress: Progress | None,
    warm: WarmPool | None = None,
) -> SidesOutcome:
    """The second phase: N - K replays of the properties with signal (:func:`replay_more`,
    in containers the screening kept with ``warm``), after their K."""
    screened = first.labelled
    if not screening.signals or screening.more == 0:
        return replace(first, labelled=combine(screened, {}, screening))
    return replay_more(
        plan,
        list(screening.signals),
        replays=screening.more,
        offset=screening.policy.screen,
        previous=first,
        phase=SECOND_PHASE,
        via=Replaying(sides=sides, pool=pool, progress=progress, warm=warm),
    )


@dataclass(frozen=True, kw_only=True)
class Replaying:
    """What a later phase replays with: the sides, the pool of engines, the live progress
    and the containers an earlier phase kept (None: fresh ones)."""

    sides: Sequence[SideSpec]
    pool: Pool
    progress: Progress | None
    warm: WarmPool | None = None


def replay_more(
    plan: RunPlan,
    property_ids: Sequence[str],
    *,
    replays: int,
    offset: int,
    previous: SidesOutcome,
    phase: str,
    via: Replaying,
) -> SidesOutcome:
    """``replays`` more replays per side of ``property_ids``, which have ``offset`` each in
    ``previous``: longest first (their replays so far and the recorded durations say how
    long), each on the engine that ran it before (in a container kept there, with
    ``warm``). Their raw files join the earlier ones (:func:`raw_layout`) from the
    phase's folder ``raw/<phase>``; the replays are appended to theirs."""
    sides, pool, warm = via.sides, via.pool, via.warm
    screened = previous.labelled
    # Only the properties replayed now need their measurements (a whole suite's: seconds).
    wanted = set(property_ids)
    known = {
        **plan.scheduling.durations,
        **measured_durations(
            {side: {p: per[p] for p in wanted if p in per} for side, per in screened.items()}
        ),
    }
    # Longest first cuts the batches evenly; pytest is still handed each batch in the
    # suite's own order (the order screening ran it), so that a test leaning on what an
    # earlier test left behind meets the same predecessors as in the first phase.
    ordered = order_longest_first(list(property_ids), known)
    suite = in_suite_order(ordered, [screened[side.name] for side in sides])
    rank = {property_id: index for index, property_id in enumerate(suite)}
    targeted = tuple(
        replace(side, targets=replay_targets(suite, screened[side.name])) for side in sides
    )
    engine_of_runner: dict[str, int] = {}
    for engine in pool.engines:
        engine_of_runner.setdefault(engine.runner_id, engine.index)
    engine_of = {p: engine_of_runner.get(previous.runners.get(p, ""), 0) for p in ordered}
    slots = [engine.slots for engine in pool.engines]
    second = run_sides(
        sides_plan(plan, replays=replays, property_ids=suite),
        targeted,
        progress=via.progress,
        run_id=plan.run_id,
        keep_raw=plan.run_dir / RAW / phase,
        pool=replace(pool, durations=known),
        batches=tuple(
            replace(batch, property_ids=tuple(sorted(batch.property_ids, key=rank.__getitem__)))
            for batch in plan_batches_on(ordered, slots, known, engine_of)
        ),
        warm=warm,
    )
    attempts = tuple(
        replace(attempt, raw_dir=second_phase_dir(attempt.raw_dir, phase))
        for attempt in second.attempts
    )
    later = {p: second_phase_dir(raw_dir, phase) for p, raw_dir in second.raw_dirs.items()}
    dirs, links = raw_layout(
        {p: previous.raw_dirs.get(p, RAW) for p in later}, later, screen=offset
    )
    link_raw(plan.run_dir, links, sides=[side.name for side in sides])
    drop_second_phase(plan.run_dir, keep=[attempt.raw_dir for attempt in attempts], phase=phase)
    return SidesOutcome(
        labelled=extend(screened, second.labelled, property_ids),
        runners=previous.runners,
        raw_dirs={**previous.raw_dirs, **dirs},
        attempts=(*previous.attempts, *attempts),
        engines=combined_engines(previous.engines, second.engines, phase=phase),
        neutralised=tuple(dict.fromkeys((*previous.neutralised, *second.neutralised))),
    )


def link_raw(run_dir: Path, links: Sequence[RawLink], *, sides: Sequence[str]) -> None:
    """Give each link's replay files their place in its target folder (hard links: the
    bytes are not copied; a copy where the file system refuses). Never overwrites."""
    for link in links:
        for side in sides:
            source = run_dir / link.source / side
            if not source.is_dir():
                continue
            target = run_dir / link.target / side
            target.mkdir(parents=True, exist_ok=True)
            for path in sorted(source.iterdir()):
                number = _replay_number(path.name)
                if number is None or (link.upto is not None and number > link.upto):
                    continue
                dest = target / replay_file_name(number + link.offset)
                if dest.exists():
                    continue
                try:
                    os.link(path, dest)
                except OSError:
                    shutil.copyfile(path, dest)


def drop_second_phase(run_dir: Path, *, keep: Sequence[str], phase: str = SECOND_PHASE) -> None:
    """Remove ``raw/replays`` (``raw/<phase>``) once its files were linked where they
    belong, but for the folders of attempts (an engine that went away) that the run folder
    names."""
    root = run_dir / RAW / phase
    if not root.is_dir():
        return
    kept = {(run_dir / folder).resolve() for folder in keep}
    if not kept:
        shutil.rmtree(root, ignore_errors=True)
        return
    for entry in root.iterdir():
        if entry.resolve() not in kept:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def combined_engines(
    first: Sequence[Mapping[str, Any]],
    second: Sequence[Mapping[str, Any]],
    *,
    phase: str = SECOND_PHASE,
) -> tuple[Mapping[str, Any], ...]:
    """Each engine as both phases saw it: its batches of both (the second's under
    ``replays/``), the first phase's properties (it decided them), and the second phase's
    status when that went wrong."""
    later = {entry.get("url"): entry for entry in second}
    engines = []
    for entry in first:
        merged = dict(entry)
        again = later.get(entry.get("url"))
        if again is not None:
            merged["batches"] = [
                *(entry.get("batches") or ()),
                *(f"{phase}/{key}" for key in again.get("batches") or ()),
            ]
            if merged.get("status") == "ok" and again.get("status") != "ok":
                merged["status"], merged["detail"] = again.get("status"), again.get("detail")
            merged["image_shipped"] = entry.get("image_shipped") or again.get("image_shipped")
        engines.append(merged)
    return tuple(engines)


def _replay_number(name: str) -> int | None:
    stem = name.removeprefix("replay-").removesuffix(".json")
    if name.startswith("replay-") and name.endswith(".json") and re.fullmatch(r"[0-9]+", stem):
        return int(stem)
    return None
