"""One warm container that runs pytest jobs on demand: the probe driver's serve mode.

:class:`WarmContainer` exports one revision (read-only at ``/src``, as a replay's),
starts one hermetic container from the pinned image ID with the replay's environment,
import roots and limits (:func:`orchestrator.services.sides.side_run.side_job`), idling
as a replay's does (:class:`~orchestrator.services.sides.side_run.SideRun`), and runs
``<interpreter> -m orchestrator.probe.replay --serve --result-files`` in it with an exec
(a project image's venv python; the side's ``--tests-from`` overlay and mutant applied
to the tree as in a replay): the driver imports pytest once and forks a fresh pytest
session per job (``orchestrator/probe/driver.py`` documents the ``replay-job/1``
protocol). Jobs go in through a FIFO of a private folder of the host
(:mod:`orchestrator.adapters.job_channel`), mounted by itself under ``/replay/serve``
beside a read-only folder of each job's fixture file; the driver answers each on a
second FIFO with a notice only: the job is done, and the SHA-256 of the
``replay-run/1`` file it wrote in the job's own folder of the results tmpfs. That
file comes back as a replay's does: through the guarded reader (an exec as another
user, capped, never following a link; :mod:`orchestrator.adapters.results`), taken
only when its bytes are the ones announced. Unlike a replay's, no reaper runs first
and live processes do not refuse the folder: the driver lives on between jobs.

Each job's result is labelled as a replay is (:mod:`orchestrator.core.labels`): a job
the driver killed at its deadline is ``timeout``; a driver or container that died (OOM,
a signal) makes that job, and every later one, ``harness_error`` (the driver's end read
back as a replay's: its exit code, an OOM kill of the container's memory cgroup); a job
with no answer by its deadline plus slack has the container killed and is ``timeout``
(``deadline``). The container, the exported tree and the channel folder are always
removed, also on Ctrl-C (which then ends in :class:`~orchestrator.errors.Interrupted`).

``orchestrator shrink --test`` runs its candidates here; screening several tests in one
container can too.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from orchestrator import interrupts
from orchestrator.adapters.job_channel import FILES, TIMED_OUT, JobChannel, Received
from orchestrator.adapters.owners import Owner
from orchestrator.adapters.results import replay_file_from
from orchestrator.core import replay_env
from orchestrator.core.backend import NEVER_WAITED, Backend, Exit, Mount, SideContainer
from orchestrator.core.bounded_lines import BoundedLines
from orchestrator.core.labels import (
    ContainerFacts,
    ReplayFile,
    label_replay,
    mark_image_mismatch,
    skipped_in,
)
from orchestrator.core.result_files import SERVED_RESULT, JobNotice, job_notice, served_folder
from orchestrator.core.side_spec import (
    OUT,
    SRC,
    STARTUP_SLACK_S,
    TREE,
    ReplayPlan,
    SideSpec,
    container_name,
    replay_environment,
)
from orchestrator.errors import EngineError, Interrupted, one_line
from orchestrator.log import get_logger
from orchestrator.model import Replay
from orchestrator.probe import JOB_SCHEMA
from orchestrator.services.interrupts import DeferredSignals
from orchestrator.services.sides.exports import Exports, entered
from orchestrator.services.sides.pool import sweep
from orchestrator.services.sides.side_run import (
    LineTail,
    SideRun,
    import_roots,
    interpreter_of,
    side_job,
    side_mounts,
)

log = get_logger(__name__)

SERVE = "/replay/serve"  # the channel folder in the container (read-only)
# On top of a job's own timeout (which the driver enforces): forking, writing the result,
# a busy machine. Only a driver that failed to answer ever waits this long.
PER_JOB_SLACK_S = 10.0
# A driver that was told its input ended writes driver.json and exits at once.
STOP_WAIT_S = 5.0


def serve_command(
    seed: int, *, interpreter: str = "python3", writable_tree: bool = False
) -> list[str]:
    """The container's command: the probe driver in serve mode (HOME made, and with
    ``writable_tree`` a fresh copy of the tree before each job, as in a replay). Pure."""
    made = [arg for folder in replay_env.MADE_DIRS for arg in ("--make-dir", folder)]
    # Hypothesis's example database, emptied before each job (core.neutralise).
    fresh = [arg for folder in replay_env.FRESH_DIRS for arg in ("--fresh-dir", folder)]
    copy = ["--copy-tree", f"{TREE}:{SRC}"] if writable_tree else []
    return [
        interpreter,
        "-m",
        "orchestrator.probe.replay",
        *made,
        *fresh,
        *copy,
        "--serve",
        "--jobs",
        f"{SERVE}/jobs",
        "--results",
        f"{SERVE}/results",
        "--out",
        OUT,
        "--seed",
        str(seed),
        "--result-files",
    ]


@dataclass(frozen=True, kw_only=True)
class JobRun:
    """One job as it came back: the result file the labels read, and the facts."""

    number: int
    job_id: str
    replay_file: ReplayFile
    facts: ContainerFacts
    round_trip_ms: float  # from sending the job to reading its result, on the host

    @property
    def wall_ms(self) -> float | None:
        """The driver's own measure of the job (fork to reaped), when it answered."""
        doc = self.replay_file.doc
        value = doc.get("wall_ms") if doc is not None else None
        return float(value) if isinstance(value, int | float) else None


class WarmContainer:
    """A container serving jobs on one side's tree (a context manager; see the module)."""

    def __init__(
        self,
        plan: ReplayPlan,
        side: SideSpec,
        *,
        backend: Backend,
        run_id: str,
        unit: int = 1,
    ) -> None:
        self.plan = plan
        self.side = side
        self.backend = backend
        self.owner = Owner.current(run_id)
        self.name = container_name(run_id, side.name, unit)
        self.jobs_run = 0
        self.image_id: str | None = None
        self._stack = contextlib.ExitStack()
        self._channel: JobChannel | None = None
        self._run: SideRun | None = None
        self._driver: _Driver | None = None
        self._interpreter = "python3"
        self._tail = LineTail()
        self._gone: ContainerFacts | None = None  # set once the driver can answer no more

    # -- life ------------------------------------------------------------------------------

    def __enter__(self) -> WarmContainer:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        sweep((self.backend,), self.owner.host)
        stack = self._stack
        exports = entered(stack, Exports("serve"))
        tree = exports.tree(self.side)
        channel = JobChannel(exports.scratch / "channel")
        stack.callback(channel.close)
        channel.open()
        self._channel = channel
        plan = self.plan
        pythonpath = import_roots(plan, self.side, tree)
        self._interpreter = plan.interpreter or interpreter_of(self.backend, plan.image_id)
        job = side_job(
            plan,
            name=self.name,
            labels=self.owner.labels(self.side.name),
            mounts=[
                *side_mounts(tree, None, writable_tree=plan.writable_tree),
                *(Mount(source=source, target=target) for source, target in channel.mounts(SERVE)),
            ],
            tree=tree,
            pythonpath=pythonpath,
            # Each job names its own fixture: the container has no REPLAY_FIXTURE.
            environment=replay_environment(replace(plan, fixture=None), pythonpath),
        )  # its own process idles: the driver is an exec, read back after each job
        side_run = stack.enter_context(SideRun(self.backend, job))
        self._run = side_run
        # A driver that ended (or never opened its results) sends no end of file: its
        # exec's end wakes the wait.
        self._driver = _Driver(
            side_run.container,
            serve_command(
                plan.seed, interpreter=self._interpreter, writable_tree=plan.writable_tree
            ),
            on_line=self._tail,
            on_end=channel.wake,
        )
        self._driver.start()
        started = side_run.container.facts(NEVER_WAITED)
        self.image_id = started.image_id

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        interrupted = isinstance(exc, KeyboardInterrupt)
        with DeferredSignals(interrupted=interrupted) as deferred:
            try:
                if not interrupted and self._gone is None:
                    self._stop_gracefully()
            finally:
                self._stack.close()
        if interrupted or deferred.hits:
            raise Interrupted("interrupted; container and sources removed") from None

    def _stop_gracefully(self) -> None:
        """End the driver's input and give it a moment to write driver.json and exit."""
        if self._channel is None or self._driver is None:
            return
        self._channel.end_input()
        self._driver.wait(STOP_WAIT_S)  # the container's removal that follows kills it anyway

    # -- jobs ------------------------------------------------------------------------------

    def run(
        self,
        *,
        pytest_args: tuple[str, ...],
        fixture: bytes | None,
        timeout_s: float,
        job_id: str,
        seed: int | None = None,
    ) -> JobRun:
        """Run one job and wait for its result (or the reason there is none)."""
        channel, side_run = self._channel, self._run
        if channel is None or side_run is None:
            raise RuntimeError("use the warm container as a context manager")
        self.jobs_run += 1
        number = self.jobs_run
        if self._gone is not None:
            return self._job_run(number, job_id, ReplayFile(replay=number, state="missing"))
        fixture_name = f"fixture-{number:06d}.json"
        job: dict[str, Any] = {
            "schema": JOB_SCHEMA,
            "id": job_id,
            "pytest_args": list(pytest_args),
            "seed": self.plan.seed if seed is None else seed,
            "fixture": None,
            "timeout_s": timeout_s,
        }
        fixture_path = None
        if fixture is not None:
            fixture_path = channel.put_file(fixture_name, fixture)
            job["fixture"] = f"{SERVE}/{FILES}/{fixture_name}"
        slack = PER_JOB_SLACK_S + (STARTUP_SLACK_S if number == 1 else 0.0)
        sent = time.monotonic()
        channel.send(job)
        received = channel.receive(sent + timeout_s + slack)
        round_trip_ms = (time.monotonic() - sent) * 1000.0
        if fixture_path is not None:
            fixture_path.unlink(missing_ok=True)
        if isinstance(received, Received):
            try:
                replay_file = self._read_job(side_run, received, number, job_id)
            except EngineError as error:  # the container went under the reader
                log.info("serve.read_failed", container=self.name, reason=error.reason)
                replay_file = None
            if replay_file is not None:
                round_trip_ms = (time.monotonic() - sent) * 1000.0
                return self._job_run(number, job_id, replay_file, round_trip_ms)
            self._gone = self._driver_gone(side_run.container)
        elif received is TIMED_OUT:
            side_run.container.kill()
            self._gone = ContainerFacts(
                image_id=self.image_id,
                killed_at_deadline=True,
                message=f"no result within {timeout_s:g} s + {slack:g} s slack",
            )
        else:  # CLOSED: the driver (or its container) is gone
            self._gone = self._driver_gone(side_run.container)
        log.info(
            "serve.gone",
            container=self.name,
            job=job_id,
            exit_code=self._gone.exit_code if self._gone else None,
            oom_killed=self._gone.oom_killed if self._gone else None,
            killed_at_deadline=self._gone.killed_at_deadline if self._gone else None,
            output_tail=list(self._tail.lines)[-10:],
        )
        return self._job_run(
            number, job_id, ReplayFile(replay=number, state="missing"), round_trip_ms
        )

    def _read_job(
        self, side_run: SideRun, received: Received, number: int, job_id: str
    ) -> ReplayFile | None:
        """The job's result as a replay's is read: the driver's notice says which file it
        wrote and the SHA-256 of its bytes; the file comes back through the guarded
        reader (:meth:`SideRun.read_announced`), taken only when its bytes are those.
        None when the container ended under the reader (its end is the job's result)."""
        notice = (
            job_notice(received.document, number=number, job_id=job_id)
            if received.document is not None
            else received.problem or "no notice"
        )
        if not isinstance(notice, JobNotice):
            return ReplayFile(replay=number, state="corrupt", problem=notice)
        read = side_run.read_announced(
            interpreter=self._interpreter,
            out=f"{OUT}/{served_folder(number)}",
            announced={SERVED_RESULT: {notice.digest}} if notice.digest is not None else {},
            full={SERVED_RESULT} if notice.full else frozenset(),
        )
        if read.problem is not None and not side_run.container.settled(NEVER_WAITED)[1]:
            return None
        if read.problem is not None or SERVED_RESULT in read.unsafe:
            log.info(
                "serve.result_refused",
                container=self.name,
                job=job_id,
                problem=read.problem or read.unsafe.get(SERVED_RESULT),
            )
        replay_file = replace(replay_file_from(read, 1), replay=number)
        said = replay_file.doc.get("job") if replay_file.doc is not None else job_id
        if said != job_id:
            problem = f"a result for job {said!r} came back for job {job_id!r}"
            return ReplayFile(replay=number, state="corrupt", problem=problem)
        return replay_file

    def _driver_gone(self, container: SideContainer) -> ContainerFacts:
        """Why the driver answers no more: its exec's end read back as a replay's (its
        exit code; an OOM kill the engine or the container's memory cgroup saw), or the
        container's own end when the engine lost the exec with it."""
        exit_ = self._driver.wait(STOP_WAIT_S) if self._driver is not None else None
        if exit_ is not None and self._run is not None:
            facts, _ = self._run.read(exit_, interpreter=self._interpreter)
            return facts
        ended = container.wait(deadline=time.monotonic() + STOP_WAIT_S, poll_s=0.5)
        return container.facts(ended)

    def _job_run(
        self, number: int, job_id: str, replay_file: ReplayFile, round_trip_ms: float = 0.0
    ) -> JobRun:
        facts = self._gone if self._gone is not None else ContainerFacts(image_id=self.image_id)
        return JobRun(
            number=number,
            job_id=job_id,
            replay_file=replay_file,
            facts=facts,
            round_trip_ms=round_trip_ms,
        )

    def label(self, run: JobRun, property_id: str) -> Replay:
        """The label of ``property_id`` in one job, stamped like a replay's."""
        replay = replace(
            label_replay(run.replay_file, run.facts, property_id),
            image_digest=run.facts.image_id,
            runner_id=self.plan.runner_id,
        )
        image = run.facts.image_id
        if image is not None and image != self.plan.image_id:
            return mark_image_mismatch({property_id: (replay,)}, self.plan.image_id, [image])[
                property_id
            ][0]
        return replay

    @staticmethod
    def skipped(run: JobRun, property_id: str) -> bool:
        return skipped_in(run.replay_file, property_id)


class _Driver:
    """The serving driver: an exec in the idling container, on a thread of its own (its
    output, line by line, to ``on_line``); ``on_end`` is called once it ends, however."""

    def __init__(
        self,
        container: SideContainer,
        command: Sequence[str],
        *,
        on_line: Callable[[str], None],
        on_end: Callable[[], None],
    ) -> None:
        self._container = container
        self._command = tuple(command)
        self._on_line = on_line
        self._on_end = on_end
        self._exit: Exit | None = None
        self._ended = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, name=f"serve-{container.name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        lines = BoundedLines(self._on_line)
        try:
            self._exit = self._container.exec_stream(
                self._command,
                environment={},
                on_output=lines.feed,
                deadline=math.inf,  # each job has its own deadline; the host's ends it
                kill_at_deadline=False,
            )
        except Exception as error:  # the engine lost the exec (or its container)
            log.info("serve.driver_lost", container=self._container.name, error=one_line(error))
        finally:
            lines.close()
            self._ended.set()
            self._on_end()

    def wait(self, seconds: float) -> Exit | None:
        """The driver's exit once it ended within ``seconds``; None when it runs on or the
        engine lost it. Short waits: a Ctrl-C is acted on between them."""
        until = time.monotonic() + seconds
        while not self._ended.is_set() and (left := until - time.monotonic()) > 0:
            self._ended.wait(timeout=min(0.5, left))
            interrupts.checkpoint()
        return self._exit if self._ended.is_set() else None
