"""Run a test command on several sides (revisions) in hermetic containers, concurrently.

Used by ``replay``, ``thaw``, ``budget`` and ``accept``. Each side's revision is
exported once into its own temporary folder (an
:class:`~orchestrator.services.sides.exports.Exports` the run holds, or the screening's
warm pool across both phases), mounted read-only into a container made
from the pinned image ID (with ``writable_tree``, mounted read-only elsewhere and copied
by the driver into a private tmpfs at /src before each replay); the container runs the
probe's driver (``<interpreter> -m orchestrator.probe.replay``: a project image's venv
python, named by its label, else ``python3``), N fresh replays per container start
(``isolation="side"``; each replay a process forked from a driver that imported
pytest once, see ``orchestrator/probe/driver.py``) or one container per replay
(``isolation="container"``). Each container runs through the one seam of
:mod:`orchestrator.services.sides.side_run`; what it runs is planned in
:mod:`orchestrator.core.side_spec`.
Labels come from the result files and the engine's facts
(:mod:`orchestrator.adapters.results`). Containers, volumes and folders are always
removed, also on a second Ctrl-C; in a screening, the first phase's containers whose
driver ended well, and their inputs, are kept for the second phase in a
:class:`~orchestrator.services.sides.warm.WarmPool`, which removes them when it closes.

A run may use a pool of engines (:mod:`orchestrator.services.sides.pool`): the
properties are cut into batches (:func:`orchestrator.core.pool.plan_batches`), both
sides of a batch run on one engine, and :mod:`orchestrator.services.sides.dispatch` runs the
batches on the engines' lanes and queues again, once, what an engine that went away
did not finish. Without a pool the run is one batch on one engine.

The engine is reached through :mod:`orchestrator.adapters.docker` only, and its
failures arrive as :class:`~orchestrator.errors.EngineError`: they become the
labels of the replays they cost (``harness_error`` with the error's reason). Any
other failure of a side is the tool's own fault: its replays are labelled
``harness_error`` / ``internal_error``, its traceback is kept, and the run ends in
:class:`~orchestrator.errors.InternalError` (exit 3) once everything is removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator import interrupts
from orchestrator.adapters import host
from orchestrator.adapters.input_file import read_input
from orchestrator.adapters.owners import Owner
from orchestrator.core.backend import Backend, LiveContainers, Staging
from orchestrator.core.labels import ContainerFacts, ReplayFile
from orchestrator.core.pool import RAW, Batch, plan_batches
from orchestrator.core.progress import (
    SideProgress,
    parse_replay_line,
    parse_test_line,
    with_replays,
    with_test,
)
from orchestrator.core.side_spec import (
    DISK_FULL,
    FIXTURE,
    ISOLATIONS,
    NO_TEST_REPORTED,
    ReplayPlan,
    SideSpec,
    container_units,
    internal_error_message,
    local_fault_reason,
    pytest_arguments,
    side_pythonpath,
)
from orchestrator.errors import EngineError, InternalError, Interrupted, OrchestratorError, one_line
from orchestrator.log import get_logger
from orchestrator.services.interrupts import DeferredSignals, terminate_as_interrupt
from orchestrator.services.sides.collection import collect_tests
from orchestrator.services.sides.container import run_one_container
from orchestrator.services.sides.dispatch import Dispatched, Dispatcher, SideResults, engine_gone_in
from orchestrator.services.sides.exports import Exports, entered, private_fixture
from orchestrator.services.sides.outcome import AttemptRecord, SidesOutcome, outcome
from orchestrator.services.sides.pool import (
    Pool,
    open_backend,
    single_pool,
    sweep,
)
from orchestrator.services.sides.side_run import (
    import_roots,
    interpreter_of,
    plan_limits,
    planned_pythonpath,
    validate_plan,
)
from orchestrator.services.sides.warm import WarmPool

if TYPE_CHECKING:
    from orchestrator.services.evidence_reuse import SideReuse

log = get_logger(__name__)

INTERNAL_ERROR_FILE = "internal-error.txt"  # a broken side's traceback, under keep_raw/<side>/

# What the replay service imports from here.
__all__ = [
    "FIXTURE",
    "ISOLATIONS",
    "NO_TEST_REPORTED",
    "AttemptRecord",
    "Progress",
    "ReplayPlan",
    "SideInternalError",
    "SideSpec",
    "SidesOutcome",
    "collect_tests",
    "new_run_id",
    "plan_limits",
    "planned_pythonpath",
    "pytest_arguments",
    "run_sides",
    "side_pythonpath",
]

# Called with a side's counts after each of its finished tests and replays, from the
# threads that read the containers' output.
Progress = Callable[[SideProgress], None]


def new_run_id(now: float | None = None) -> str:
    """``YYYYmmddTHHMMSSZ-<6 hex>``: sortable, unique, safe in container names and paths."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return f"{stamp}-{os.urandom(3).hex()}"


class SideInternalError(InternalError):
    """A side failed in the tool itself (its unfinished replays were ``harness_error`` /
    ``internal_error``)."""


@dataclass
class SidesRun:
    """Shared state of one run_sides call (each of its containers is run by
    ``container.run_one_container`` with it)."""

    plan: ReplayPlan
    sides: tuple[SideSpec, ...]
    pool: Pool
    owner: Owner
    progress: Progress | None
    keep_raw: Path | None
    cancelled: threading.Event = field(default_factory=threading.Event)
    live: LiveContainers = field(default_factory=LiveContainers)
    # Screening's two phases: the first parks its containers there, the second runs in them.
    warm: WarmPool | None = None
    # A screening's first phase: sides whose screening an earlier run stored, and offers.
    reuse: SideReuse | None = None
    # The trees and copies the containers mount (the run's own, or the warm pool's).
    exports: Exports | None = None
    fixture_copy: Path | None = None
    durations_copy: Path | None = None
    # Written by the export and engine threads, read after they finished.
    failures: dict[str, OrchestratorError] = field(default_factory=dict)
    internal_errors: dict[str, tuple[str, str | None, str]] = field(default_factory=dict)
    progress_lock: threading.Lock = field(default_factory=threading.Lock)
    side_progress: dict[str, SideProgress] = field(default_factory=dict)
    started_s: float = field(default_factory=time.monotonic)
    batches: int = 1

    @property
    def parks(self) -> bool:
        """A container whose exec ended well is kept for the second phase."""
        return (
            self.warm is not None
            and self.warm.reuse
            and (not self.warm.serving or self.warm.repark)
            and self.plan.isolation != "container"
        )

    @property
    def serving(self) -> bool:
        """The second phase: its batches run in the first phase's kept containers."""
        return self.warm is not None and self.warm.serving

    @property
    def one_batch(self) -> bool:
        """The run was not cut: raw files and container names carry no batch key."""
        return self.batches == 1

    def tree(self, side: SideSpec) -> Path:
        """The side's exported tree (exported before any batch ran)."""
        if self.exports is None:
            raise RuntimeError("the run's exports are not open")
        return self.exports.tree(side)

    def raw_root(self, batch: Batch) -> Path | None:
        """Where a batch's raw replay files are kept (``keep_raw`` itself for one batch)."""
        if self.keep_raw is None:
            return None
        if batch.raw_dir(single=self.one_batch) == RAW:
            return self.keep_raw
        return self.keep_raw / batch.key

    def note_line(self, side: str, line: str) -> bool:
        """A line of a side's driver: a finished test or replay moves the side's counts.
        True when it was a test's progress line (nothing a diagnosis needs)."""
        test = parse_test_line(line)
        finished_replay = test is None and parse_replay_line(line) is not None
        if self.progress is None or (test is None and not finished_replay):
            return test is not None
        # Reported under the lock, so a side's counts never go back on screen or in a log.
        with self.progress_lock:
            current = self.side_progress.get(side) or SideProgress(
                side=side,
                started_s=self.started_s,
                replays_total=self.plan.replays * self.batches,
            )
            if test is not None:
                current = with_test(current, test)
            else:  # a batch run again counts once (with_replays caps at the total)
                current = with_replays(current, current.replays_done + 1)
            self.side_progress[side] = current
            self.progress(current)
        return test is not None


def _export_failed(run: SidesRun, side: SideSpec, error: Exception) -> None:
    """A side's export failed (called in its export thread, inside the ``except``)."""
    if isinstance(error, OrchestratorError):
        # Bad input (a mutant that does not apply: exit 2) or git failing on good input
        # (exit 3): no label, the run ends with this error once everything is removed.
        run.failures[side.name] = error
        run.cancelled.set()
    else:  # the tool's own fault: never an engine label, never silent
        _internal_error(run, side.name, error, run.keep_raw)


def _internal_error(run: SidesRun, side: str, error: BaseException, raw_root: Path | None) -> None:
    what = f"{type(error).__name__}: {one_line(error)}"
    reason = local_fault_reason(error)
    if reason == DISK_FULL:  # no bug to trace, and no room to keep a traceback
        log.debug("side.traceback", side=side, traceback=traceback.format_exc())
        kept = None
    else:
        kept = _keep_traceback(raw_root, side, traceback.format_exc())
    log.error("side.internal_error", side=side, error=what, reason=reason, traceback_file=kept)
    run.internal_errors.setdefault(side, (what, kept, reason))
    run.cancelled.set()  # the run ends in InternalError: stop the other sides early


def _run_side_job(
    run: SidesRun, engine: Backend, staging: Staging, batch: Batch, side: SideSpec
) -> list[tuple[ReplayFile, ContainerFacts]]:
    """One side of one batch on one engine: its containers, one after another; every
    replay gets a (file, facts) pair whatever happens."""
    observed: list[tuple[ReplayFile, ContainerFacts]] = []
    try:
        pythonpath = import_roots(run.plan, side, run.tree(side))
        if run.reuse is not None:  # an earlier run's screening of this very side
            reused = run.reuse.take(run, engine, batch, side, pythonpath)
            if reused is not None:
                return reused
        for unit_index, numbers in enumerate(container_units(run.plan), start=1):
            if run.cancelled.is_set():
                facts = ContainerFacts(cancelled=True, message="interrupted before start")
                observed.extend((ReplayFile(replay=n, state="missing"), facts) for n in numbers)
                continue
            observed.extend(
                run_one_container(
                    run,
                    engine=engine,
                    staging=staging,
                    batch=batch,
                    side=side,
                    unit_index=unit_index,
                    numbers=numbers,
                    pythonpath=pythonpath,
                )
            )
    except EngineError as error:  # the engine failed us outside a container's life
        log.error("side.failed", side=side.name, reason=error.reason, error=error.message)
        _fill_missing(
            run, observed, ContainerFacts(engine_error=error.reason, message=error.message)
        )
    except OrchestratorError as error:
        run.failures[side.name] = error
        run.cancelled.set()
        _fill_missing(run, observed, ContainerFacts(cancelled=True, message=error.message))
    except Exception as error:  # the tool's own fault: never an engine label, never silent
        _internal_error(run, side.name, error, run.raw_root(batch))
        what, _, reason = run.internal_errors[side.name]
        _fill_missing(run, observed, ContainerFacts(engine_error=reason, message=what))
    if run.reuse is not None:
        run.reuse.offer(run, batch, side, observed)
    return observed


def _run_batch(run: SidesRun, engine: Backend, batch: Batch, staging: Staging) -> SideResults:
    """Both (all) sides of a batch on one engine: at once when it has a slot for each,
    else one after another - and then a side whose engine went away ends the batch."""
    results: SideResults = {}
    if engine.slots >= 2 and len(run.sides) > 1:
        threads = [
            threading.Thread(
                target=lambda s=side: results.__setitem__(
                    s.name, _run_side_job(run, engine, staging, batch, s)
                ),
                name=f"{batch.key}-{side.name}",
            )
            for side in run.sides
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return results
    for side in run.sides:
        if engine_gone_in(results) and not engine.answers():
            facts = ContainerFacts(engine_error="engine_gone", message="the engine went away")
            results[side.name] = _missing(run, facts)
            continue
        results[side.name] = _run_side_job(run, engine, staging, batch, side)
    return results


def _missing(run: SidesRun, facts: ContainerFacts) -> list[tuple[ReplayFile, ContainerFacts]]:
    return [(ReplayFile(replay=n, state="missing"), facts) for n in range(1, run.plan.replays + 1)]


def _fill_missing(
    run: SidesRun, observed: list[tuple[ReplayFile, ContainerFacts]], facts: ContainerFacts
) -> None:
    """Every replay the side did not get to is missing, for the reason ``facts`` give."""
    done = {replay_file.replay for replay_file, _ in observed}
    observed.extend(
        (ReplayFile(replay=n, state="missing"), facts)
        for n in range(1, run.plan.replays + 1)
        if n not in done
    )


def _keep_traceback(raw_root: Path | None, side: str, text: str) -> str | None:
    """Write a side's traceback to ``<raw>/<side>/internal-error.txt``; where it went.

    Without a raw folder, or when that write fails too (the disk that broke the side
    may be full), the traceback goes to the log instead and ``None`` is returned.
    """
    if raw_root is not None:
        path = raw_root / side / INTERNAL_ERROR_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as error:
            log.warning("side.traceback_not_kept", side=side, path=str(path), error=str(error))
        else:
            return str(path)
    log.error("side.traceback", side=side, traceback=text)
    return None


def _copy_inputs(run: SidesRun, exports: Exports) -> None:
    """Private copies of what every side reads: the fixture (the user's file may be
    private, 0600, or change while the run goes on, and both sides, and both phases of a
    screening, must read the same bytes) and the recorded durations."""
    plan = run.plan
    if plan.fixture is not None:
        # A regular file under the input cap, never followed, never blocking (a FIFO).
        fixture = plan.fixture
        run.fixture_copy = exports.once(
            "fixture", lambda folder: private_fixture(folder, read_input(fixture))
        )
    if plan.jobs > 1 and plan.durations is not None:
        durations = plan.durations
        run.durations_copy = exports.once(
            "durations", lambda folder: _copy_durations(folder, durations)
        )


def _copy_durations(folder: Path, durations: Path) -> Path | None:
    """A world-readable copy of the recorded durations; None when there is none to read
    (the workers then split by count: durations never decide a label)."""
    copy = folder / "durations.json"
    try:
        shutil.copyfile(durations, copy)
    except OSError:
        return None
    copy.chmod(0o644)
    return copy


def run_sides(  # noqa: PLR0913 - one keyword per input of a run
    plan: ReplayPlan,
    sides: Sequence[SideSpec],
    *,
    backend: Backend | None = None,
    progress: Progress | None = None,
    run_id: str | None = None,
    keep_raw: Path | None = None,
    pool: Pool | None = None,
    batches: Sequence[Batch] | None = None,
    warm: WarmPool | None = None,
    reuse: SideReuse | None = None,
) -> SidesOutcome:
    """Side name -> property id -> one :class:`Replay` per replay (``labelled``), which
    engine ran each property, the attempts of engines that went away, and how each
    engine fared.

    All sides run at the same time, each in hermetic containers from ``plan.image_id``
    (never pulled). With no ``property_ids`` every test node id any replay reported is
    a property. ``keep_raw`` keeps a copy of each side's raw ``replay-<k>.json`` files
    under ``keep_raw/<side>/`` (``keep_raw/<batch>/<side>/`` when the run is cut into
    batches). Containers, volumes and exported sources are always removed; a Ctrl-C
    raises :class:`Interrupted` after cleanup (a second Ctrl-C during cleanup is
    deferred, and from then on SIGINT and SIGTERM are ignored: the caller is on its way
    out).

    ``pool`` spreads the properties over several engines; without it the run is one
    batch on ``backend`` (or the engine at ``DOCKER_HOST``). ``batches`` are the plan's
    properties already cut (default: :func:`~orchestrator.core.pool.plan_batches` by the
    pool's durations).

    ``warm`` joins the two phases of a screening (:mod:`orchestrator.services.sides.warm`): the
    first call keeps its inputs there, and its containers whose exec ended well; the
    second runs its batches in those of the same side and engine (fresh ones where there
    is none, or it no longer runs) and exports and stages nothing again. The pool removes
    what it holds when it closes. ``reuse`` (a screening's first phase) gives a side the
    screening an earlier run of it stored, instead of its containers, and keeps every
    side that screened cleanly for storing (:mod:`orchestrator.services.evidence_reuse`).

    Engine failures are labels (``harness_error`` with the engine's reason). After
    cleanup, a side's bad input raises its :class:`InputError` (exit 2), git failing
    on good input its :class:`~orchestrator.errors.GitError` (exit 3), and any other
    failure of a side :class:`SideInternalError` (exit 3), its traceback kept under
    ``keep_raw/<side>/internal-error.txt``.
    """
    validate_plan(plan, sides)
    host.give_back_large_buffers()  # results of whole suites are read and freed here
    if pool is None:
        one = contextlib.nullcontext(backend) if backend is not None else open_backend(os.environ)
        with one as opened:
            return run_sides(
                plan,
                sides,
                progress=progress,
                run_id=run_id,
                keep_raw=keep_raw,
                pool=single_pool(opened, runner_id=plan.runner_id),
                batches=batches,
                warm=warm,
                reuse=reuse,
            )
    if plan.interpreter is None:  # found once per screening: its second phase asks no more
        known = warm.interpreter if warm is not None else None
        plan = replace(plan, interpreter=known or interpreter_of(pool.first, plan.image_id))
        if warm is not None:
            warm.interpreter = plan.interpreter
    owner = Owner.current(run_id or new_run_id())
    # Every engine's leftovers (containers, volumes) of this host's dead runs, by host
    # id and process; another host's only once they are a day old. A screening's second
    # phase does not sweep again: its first did, moments ago, in this same process.
    if warm is None or not warm.screened:
        sweep(pool.engines, owner.host)

    if batches is None:
        batches = plan_batches(
            plan.property_ids, [engine.slots for engine in pool.engines], pool.durations
        )
    if not batches:
        raise ValueError("run_sides needs at least one batch")
    run = SidesRun(
        plan=plan,
        sides=tuple(sides),
        pool=pool,
        owner=owner,
        progress=progress,
        keep_raw=keep_raw,
        batches=len(batches),
        reuse=reuse,
    )
    if warm is not None:
        run.warm, run.cancelled, run.live = warm, warm.cancelled, warm.live
        if warm.screened:  # the second phase: one kept container per batch and side
            warm.serve(Counter((batch.engine, side.name) for batch in batches for side in sides))
    dispatcher = _carry_out(run, batches)
    for side in sides:
        if side.name in run.failures:
            raise run.failures[side.name]
    dispatched = dispatcher.outcome() if dispatcher.finished else _not_dispatched(run, batches)
    result = outcome(plan, run.sides, pool.engines, dispatched, one_batch=run.one_batch)
    broken = [side.name for side in sides if side.name in run.internal_errors]
    broken += [name for name in run.internal_errors if name not in broken]
    if broken:
        what, kept, reason = run.internal_errors[broken[0]]
        raise SideInternalError(internal_error_message(broken[0], what, kept, reason))
    return result


def _carry_out(run: SidesRun, batches: Sequence[Batch]) -> Dispatcher[Backend]:
    """Export the sides, run the batches on the engines, and remove everything, also on
    Ctrl-C (then :class:`Interrupted`, after the cleanup). In a screening the warm pool
    holds the trees and copies for both phases (the second finds them exported)."""
    interrupted = False
    dispatcher: Dispatcher[Backend] | None = None
    own = contextlib.ExitStack()  # the run's own exports (none in a screening)
    try:
        with terminate_as_interrupt():
            if run.warm is not None:
                run.exports = run.warm.exports()
            else:
                run.exports = entered(own, Exports("run"))
            _copy_inputs(run, run.exports)
            run.exports.export_all(
                run.sides,
                tars=run.pool.volumes,
                on_failure=lambda side, error: _export_failed(run, side, error),
            )
            dispatcher = _dispatcher(run, batches)
            if not run.cancelled.is_set():
                with interrupts.shielded():  # each engine thread started with its event
                    dispatcher.start()
            for event in dispatcher.finished:
                while not event.wait(timeout=0.5):
                    interrupts.checkpoint()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        with DeferredSignals(interrupted=interrupted) as deferred:
            _release(run, dispatcher, own)
        interrupted = interrupted or deferred.hits > 0
    if interrupted:
        raise Interrupted("interrupted; containers and sources removed")
    assert dispatcher is not None
    return dispatcher


def _release(
    run: SidesRun, dispatcher: Dispatcher[Backend] | None, own: contextlib.ExitStack
) -> None:
    """Stop the engines' threads still running, then remove the containers left and the
    run's trees and copies; in a screening the warm pool removes them when it closes."""
    engines_done = dispatcher.finished if dispatcher is not None else []
    if not all(event.is_set() for event in engines_done):
        run.cancelled.set()
        run.live.kill_all()
        for event in engines_done:
            event.wait(timeout=60)
    if run.warm is None:
        run.live.remove_all()
        own.close()
    else:
        run.warm.screened = True


def _not_dispatched(run: SidesRun, batches: Sequence[Batch]) -> Dispatched:
    """No batch ran (an export failed in the tool): its side's replays are internal errors."""
    finals = []
    for batch in batches:
        results: SideResults = {}
        for side in run.sides:
            if side.name in run.internal_errors:
                what, _, reason = run.internal_errors[side.name]
                facts = ContainerFacts(engine_error=reason, message=what)
            else:
                facts = ContainerFacts(cancelled=True, message="interrupted before start")
            results[side.name] = _missing(run, facts)
        finals.append((batch, results))
    return Dispatched(finals=tuple(finals), attempts=(), engines=())


def _dispatcher(run: SidesRun, batches: Sequence[Batch]) -> Dispatcher[Backend]:
    pool = run.pool
    exports = run.exports
    assert exports is not None

    @contextlib.contextmanager
    def staged(engine: Backend) -> Iterator[Staging]:
        # Every tree (and tar) is there already: export_all made them before any engine.
        inputs = exports.inputs(
            run.sides, volumes=pool.volumes, fixture=run.fixture_copy, durations=run.durations_copy
        )
        if engine.index > 0:
            engine.hold_image(run.plan.image_id, pool.image_ref or run.plan.image_id, pool.first)
        with engine.staging(
            inputs, volumes=pool.volumes, owner=run.owner, image_id=run.plan.image_id
        ) as staging:
            yield staging

    @contextlib.contextmanager
    def prepare(engine: Backend) -> Iterator[Staging]:
        if run.warm is not None:  # staged once for both phases (their kept containers mount it)
            yield run.warm.staging(engine.index, lambda: staged(engine))
            return
        with staged(engine) as staging:
            yield staging

    def on_internal_error(error: BaseException) -> None:
        _internal_error(run, "engines", error, run.keep_raw)

    return Dispatcher(
        engines=pool.engines,
        batches=batches,
        prepare=prepare,
        run_batch=lambda engine, batch, staging: _run_batch(run, engine, batch, staging),
        unrun=lambda batch, facts: {side.name: _missing(run, facts) for side in run.sides},
        cancelled=run.cancelled,
        on_internal_error=on_internal_error,
    )
