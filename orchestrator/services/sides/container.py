"""One container of a run of sides (:mod:`orchestrator.services.sides`): create it (or
take the one the screening kept, :mod:`orchestrator.services.sides.warm`), run the driver in
it to its end or our deadline, read its results back, label what is missing, and say
whether it may serve the second phase."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.adapters.results import ResultsRead, replay_file_name, replay_files_from
from orchestrator.core.backend import (
    NEVER_WAITED,
    Backend,
    Cancelled,
    SideContainer,
    SideJob,
    Staging,
)
from orchestrator.core.labels import ContainerFacts, ReplayFile, without_result
from orchestrator.core.pool import Batch
from orchestrator.core.side_spec import (
    KEPT_AFTER_READ,
    OUT,
    REWRITE_CACHE,
    SRC,
    SideSpec,
    batch_targets,
    container_name,
    driver_command,
    driver_exec_environment,
    side_deadline_s,
)
from orchestrator.errors import EngineError
from orchestrator.log import get_logger
from orchestrator.services import run_writer
from orchestrator.services.sides.side_run import (
    LineTail,
    SideRun,
    run_and_read,
    side_job,
)
from orchestrator.services.sides.warm import Parked

if TYPE_CHECKING:
    from orchestrator.services.sides import SidesRun

log = get_logger("orchestrator.services.sides")  # its events stay those of a run of sides

SECOND_PHASE_NAME = "replays"  # in the names of a second phase's containers and results


def run_one_container(
    run: SidesRun,
    *,
    engine: Backend,
    staging: Staging,
    batch: Batch,
    side: SideSpec,
    unit_index: int,
    numbers: tuple[int, ...],
    pythonpath: Sequence[str],
) -> list[tuple[ReplayFile, ContainerFacts]]:
    """One container's life: create, start, run the driver to its end (or our deadline),
    read its results back, remove (or keep it for the second phase of a screening; a
    second phase runs in a kept one instead of a new one when it can)."""
    plan = replace(run.plan, property_ids=batch.property_ids) if batch.property_ids else run.plan
    job = side_job(
        plan,
        name=container_name(run.owner.run_id, _unit_side(run, batch, side), unit_index),
        labels=run.owner.labels(side.name),
        mounts=staging.mounts(
            side.name, tree_target=staging.tree_path if plan.writable_tree else SRC
        ),
        tree=run.tree(side),
        pythonpath=pythonpath,
    )
    targets = batch_targets(run.plan, batch, side)

    def command(out: str, warm: bool) -> list[str]:
        # Drivers of a container that serves both phases share one rewrite cache.
        cache = REWRITE_CACHE if warm else None
        return driver_command(
            plan, len(numbers), targets, out=out, tree=staging.tree_path, rewrite_cache=cache
        )

    tail = LineTail()
    read = ResultsRead()
    try:
        parked = run.warm.take(engine.index, side.name, job) if run.warm and run.serving else None
        warm = None
        if parked is not None:
            warm = _observe_parked(
                run, parked, side=side.name, command=command, numbers=numbers, tail=tail
            )
        if warm is not None:
            facts, read = warm
        else:
            facts, read = _observe(
                run,
                engine=engine,
                side=side.name,
                job=job,
                command=command(OUT, run.parks),
                numbers=numbers,
                tail=tail,
            )
    except Cancelled:
        facts = ContainerFacts(cancelled=True, message="interrupted before start")
    except EngineError as error:
        facts = ContainerFacts(engine_error=error.reason, message=error.message)
    if facts.engine_error or facts.oom_killed or (facts.exit_code or 0) != 0 or read.problem:
        log.info(
            "container.facts",
            side=side.name,
            engine=engine.url,
            exit_code=facts.exit_code,
            oom_killed=facts.oom_killed,
            engine_error=facts.engine_error,
            killed_at_deadline=facts.killed_at_deadline,
            results_problem=read.problem,
            output_tail=list(tail.lines)[-10:],
        )
    files = replay_files_from(read, len(numbers))
    _warn_without_result(side.name, files)
    raw_root = run.raw_root(batch)
    if raw_root is not None:
        _keep_raw(read, raw_root / side.name, numbers)
    if run.reuse is not None:  # the bytes a clean screening is stored with
        kept_in = None if raw_root is None else raw_root / side.name
        run.reuse.capture(batch, side.name, numbers, read.files, kept_in)
    # Renumber: with one container per replay, each writes its own replay-001.json.
    return [
        (replace(replay_file, replay=number), facts)
        for replay_file, number in zip(files, numbers, strict=True)
    ]


def _unit_side(run: SidesRun, batch: Batch, side: SideSpec) -> str:
    """The side's part of a container name: the side, after the batch when there are several
    (and after the phase in a second phase whose first kept its containers: the names of
    both live at once)."""
    part = side.name if run.one_batch and batch.attempt == 1 else f"{batch.key}-{side.name}"
    phase = run.warm.phase if run.warm is not None else SECOND_PHASE_NAME
    return f"{phase}-{part}" if run.serving else part


def _reusable(facts: ContainerFacts, read: ResultsRead) -> bool:
    """A container whose exec ended well, its results read back whole and its results
    folder then emptied by the reader: one the second phase may run in. Anything else
    (OOM, killed at the deadline, a harness error, a refused results folder, one the
    reader could not empty) is removed as usual."""
    return (
        facts.exit_code == 0
        and facts.engine_error is None
        and not facts.oom_killed
        and not facts.killed_at_deadline
        and not facts.cancelled
        and read.problem is None
        and not read.unsafe
        and read.emptied is True
    )


def _observe(
    run: SidesRun,
    *,
    engine: Backend,
    side: str,
    job: SideJob,
    command: Sequence[str],
    numbers: tuple[int, ...],
    tail: Callable[[str], None],
) -> tuple[ContainerFacts, ResultsRead]:
    """Run the driver in one container to its end (or our deadline), read back what it
    left, and return the engine's facts with it."""
    entered = time.monotonic()
    with SideRun(engine, job, live=run.live, cancelled=run.cancelled) as side_run:
        started = time.monotonic()
        facts, read = side_run.drive(
            command,
            on_line=_line_handler(run, side, tail),
            deadline=started + side_deadline_s(run.plan, len(numbers)),
            interpreter=run.plan.interpreter or "python3",
            environment=driver_exec_environment(run.plan),
            # A container that may serve the second phase is emptied as it is read.
            keep=KEPT_AFTER_READ if run.parks else None,
            announced=True,
        )
        log.debug(
            "container.timing",
            side=side,
            create_start_ms=round((started - entered) * 1000),
            run_ms=round((time.monotonic() - started) * 1000),
        )
        if run.warm is not None and run.parks and _reusable(facts, read):
            remove = side_run.detach()  # the pool removes it from here on
            kept = Parked(
                engine=engine.index,
                side=side,
                job=job,
                container=side_run.container,
                remove=remove,
            )
            if not run.warm.park(kept):
                remove()
    return facts, read


def _observe_parked(
    run: SidesRun,
    parked: Parked,
    *,
    side: str,
    command: Callable[[str, bool], Sequence[str]],
    numbers: tuple[int, ...],
    tail: Callable[[str], None],
) -> tuple[ContainerFacts, ResultsRead] | None:
    """Run the driver again in a container the first phase kept, then remove it (or park
    it again for the next round of evidence, when it ended well); None (and removed)
    when it no longer runs: the batch then gets a fresh container.

    The first phase's reader emptied the results folder once it had read it (all but the
    rewrite cache, :func:`_reusable`), and the results now go to a new folder of a random
    name in it, so nothing the first phase's replays left there can pass for the
    second's."""
    started = time.monotonic()
    kept = False
    try:
        out = f"{OUT}/{SECOND_PHASE_NAME}-{os.urandom(8).hex()}"
        try:
            facts, read = run_and_read(
                parked.container,
                command=command(out, True),
                on_line=_line_handler(run, side, tail),
                deadline=started + side_deadline_s(run.plan, len(numbers)),
                interpreter=run.plan.interpreter or "python3",
                out=out,
                environment=driver_exec_environment(run.plan),
                keep=KEPT_AFTER_READ if run.parks else None,
                announced=True,
            )
        except EngineError as error:
            if _still_runs(parked.container):
                raise
            # Killed or died while parked: a fresh one will do.
            log.info("container.gone", container=parked.container.name, reason=error.reason)
            return None
        log.debug(
            "container.timing",
            side=side,
            container=parked.container.name,
            reused=True,
            run_ms=round((time.monotonic() - started) * 1000),
        )
        if run.warm is not None and run.parks and _reusable(facts, read):
            kept = run.warm.park(parked)
        return facts, read
    finally:
        if not kept:
            parked.remove()


def _warn_without_result(side: str, files: Sequence[ReplayFile]) -> None:
    """One line for a container whose replays wrote no result, saying why as pytest did
    (its usage error, a crash): otherwise only the run folder's evidence would tell."""
    for replay_file in files:
        found = without_result(replay_file.doc) if replay_file.doc is not None else None
        if found is not None:
            message, hint = found
            log.warning(
                "replay.no_result", side=side, message=message, **({"hint": hint} if hint else {})
            )
            return


def _still_runs(container: SideContainer) -> bool:
    return container.settled(NEVER_WAITED)[1]


def _line_handler(run: SidesRun, side: str, tail: Callable[[str], None]) -> Callable[[str], None]:
    first = True

    def handle(line: str) -> None:
        nonlocal first
        if not run.note_line(side, line):
            tail(line)  # the per-test lines would push a failure's own lines out
        elif first:  # when a container's first result came (bench/scale.py reads it)
            first = False
            log.debug("side.first_test", side=side)

    return handle


def _keep_raw(read: ResultsRead, dest: Path, numbers: tuple[int, ...]) -> None:
    """The result files as they came back (capped, regular files only) under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for index, number in enumerate(numbers, start=1):
        data = read.files.get(replay_file_name(index))
        if data is not None:
            run_writer.write_raw(dest / replay_file_name(number), data)
