"""Collect the tests a command would run on every side, without running one.

``pytest --collect-only`` with the probe's collection plugin, in one container per side
(both at once) on the pool's first engine: what a run is cut from when no
``--property`` names its tests (docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator import interrupts
from orchestrator.adapters.input_file import read_input
from orchestrator.adapters.owners import Owner
from orchestrator.adapters.results import ResultsRead, host_caps
from orchestrator.core import bounded_json
from orchestrator.core.backend import Backend, LiveContainers, Staging
from orchestrator.core.run_limits import too_many_tests
from orchestrator.core.side_spec import (
    COLLECT_FILE,
    ReplayPlan,
    SideSpec,
    collect_command,
    collect_environment,
    collected_selection,
    container_name,
    refused_collected,
    side_deadline_s,
)
from orchestrator.errors import CapError
from orchestrator.log import get_logger
from orchestrator.services.sides.exports import Exports, entered
from orchestrator.services.sides.pool import Pool
from orchestrator.services.sides.side_run import (
    LineTail,
    SideRun,
    import_roots,
    interpreter_of,
    side_job,
    validate_plan,
)

log = get_logger(__name__)


def collect_tests(
    plan: ReplayPlan, sides: Sequence[SideSpec], *, pool: Pool, run_id: str
) -> tuple[str, ...]:
    """Every test the command collects on any side, in the selection's order (first side
    first; see :func:`~orchestrator.core.side_spec.collected_selection`)."""
    validate_plan(plan, sides)
    engine = pool.first
    if plan.interpreter is None:
        plan = replace(plan, interpreter=interpreter_of(engine, plan.image_id))
    # Only the first engine collects: bind mounts when it is this machine's.
    volumes = pool.volumes and not engine.local
    owner = Owner.current(run_id)
    cancelled = threading.Event()
    live = LiveContainers()
    with contextlib.ExitStack() as stack:
        exports = entered(stack, Exports("collect"))
        fixture = None
        if plan.fixture is not None:
            fixture = exports.fixture(read_input(plan.fixture))
        inputs = exports.inputs(sides, volumes=volumes, fixture=fixture)
        staging = stack.enter_context(
            engine.staging(inputs, volumes=volumes, owner=owner, image_id=plan.image_id)
        )

        def collect(side: SideSpec) -> Mapping[str, Any] | None:
            return _collect_side(
                plan,
                side,
                engine=engine,
                staging=staging,
                tree=exports.tree(side),
                owner=owner,
                live=live,
                cancelled=cancelled,
            )

        found = _each_side(sides, collect, cancelled=cancelled, live=live)
    docs = [doc for doc in found if doc is not None]
    caps = host_caps()
    for side, doc in zip(sides, found, strict=True):
        items = doc.get("items") if doc is not None else None
        over = too_many_tests(len(items or ()), caps, what=f"the {side.name} side's collection")
        if over is not None:
            raise CapError(over)
    refused = refused_collected(docs)
    if refused:  # ids pytest would read as options: never handed to it
        first, why = next(iter(refused.items()))
        log.warning("collect.refused_ids", ids=len(refused), first=first, reason=why)
    return collected_selection(docs)


def _each_side(
    sides: Sequence[SideSpec],
    collect: Callable[[SideSpec], Mapping[str, Any] | None],
    *,
    cancelled: threading.Event,
    live: LiveContainers,
) -> list[Mapping[str, Any] | None]:
    """Every side's collection at once; a failure or Ctrl-C stops the others at once."""
    with ThreadPoolExecutor(max_workers=len(sides)) as workers:
        running = [workers.submit(collect, side) for side in sides]
        try:
            # Short waits: a Ctrl-C is acted on between them (orchestrator.interrupts).
            waiting = set(running)
            while waiting:
                interrupts.checkpoint()
                _, waiting = futures_wait(waiting, timeout=0.5, return_when=FIRST_EXCEPTION)
                for future in running:
                    if future.done() and future.exception() is not None:
                        future.result()  # raises it; the other side is stopped below
            return [future.result() for future in running]
        except BaseException:
            cancelled.set()  # Ctrl-C or a failure: the other side stops at once
            live.kill_all()  # and a running collection ends now, not at its deadline
            raise


def _collect_side(
    plan: ReplayPlan,
    side: SideSpec,
    *,
    engine: Backend,
    staging: Staging,
    tree: Path,
    owner: Owner,
    live: LiveContainers,
    cancelled: threading.Event,
) -> Mapping[str, Any] | None:
    """One side's collection: the ``replay-collect/1`` document it wrote, if any."""
    pythonpath = import_roots(plan, side, tree)
    job = side_job(
        # The tree is collected where it is mounted: nothing is copied, nothing written.
        replace(plan, writable_tree=False),
        name=container_name(owner.run_id, f"collect-{side.name}", 1),
        labels=owner.labels(side.name),
        mounts=staging.mounts(side.name),
        tree=tree,
        pythonpath=pythonpath,
        environment=collect_environment(plan, pythonpath),
    )
    tail = LineTail()
    with SideRun(engine, job, live=live, cancelled=cancelled) as side_run:
        facts, read = side_run.drive(
            collect_command(plan),
            on_line=tail,
            deadline=time.monotonic() + side_deadline_s(plan, 1),
            interpreter=plan.interpreter or "python3",
        )
    doc, corrupt = _collected_doc(read)
    if doc is None:
        log.warning(
            "collect.failed",
            side=side.name,
            exit_code=facts.exit_code,
            results_problem=read.problem or read.unsafe.get(COLLECT_FILE) or corrupt,
            output_tail=list(tail.lines)[-10:],
        )
    return doc


def _collected_doc(read: ResultsRead) -> tuple[Mapping[str, Any] | None, str | None]:
    """The ``replay-collect/1`` document that came back, if it is one; else why it is
    not (``corrupt_result: ...``), None when nothing came back."""
    raw = read.files.get(COLLECT_FILE)
    if raw is None:
        return None, None
    try:
        doc = bounded_json.loads(raw)
    except bounded_json.JsonRefused as error:
        return None, f"corrupt_result: {error}"
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        return doc, None
    return None, "corrupt_result: not a collection document"
