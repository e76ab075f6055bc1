"""One warm container that runs pytest jobs on demand: the probe driver's serve mode.

:class:`WarmContainer` exports one revision (read-only at ``/src``, as a replay's),
starts one hermetic container from the pinned image ID with the replay's environment,
import roots and limits (:func:`orchestrator.services.sides.side_run.side_job`), and runs
``<interpreter> -m orchestrator.probe.replay --serve`` in it (a project image's venv
python) (the side's ``--tests-from``
overlay and mutant applied to the tree as in a replay): the driver imports pytest once
and forks a fresh pytest session per job (``orchestrator/probe/driver.py`` documents the
``replay-job/1`` protocol). Jobs go in and ``replay-run/1`` results come back through
two FIFOs (:mod:`orchestrator.adapters.job_channel`) in a private folder of the host,
each mounted by itself under ``/replay/serve``, beside a read-only folder of each job's
fixture file.

Each job's result is labelled as a replay is (:mod:`orchestrator.core.labels`): a job
the driver killed at its deadline is ``timeout``; a driver or container that died (OOM,
a signal) makes that job, and every later one, ``harness_error``; a job with no answer
by its deadline plus slack has the container killed and is ``timeout`` (``deadline``).
The container, the exported tree and the channel folder are always removed, also on
Ctrl-C (which then ends in :class:`~orchestrator.errors.Interrupted`).

``orchestrator shrink --test`` runs its candidates here; screening several tests in one
container can too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from orchestrator import interrupts
from orchestrator.adapters.job_channel import CLOSED, FILES, TIMED_OUT, JobChannel, Received
from orchestrator.adapters.owners import Owner
from orchestrator.core import replay_env
from orchestrator.core.backend import NEVER_WAITED, Backend, Mount, SideContainer
from orchestrator.core.labels import (
    ContainerFacts,
    ReplayFile,
    label_replay,
    mark_image_mismatch,
    run_doc_problem,
    skipped_in,
)
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
from orchestrator.errors import Interrupted
from orchestrator.log import get_logger
from orchestrator.model import Replay
from orchestrator.probe import JOB_SCHEMA
from orchestrator.services.interrupts import DeferredSignals
from orchestrator.services.sides.pool import sweep
from orchestrator.services.sides.side_run import (
    LineTail,
    SideRun,
    SideWorkspace,
    entered,
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
        self._container: SideContainer | None = None
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
        workspace = entered(stack, SideWorkspace("serve"))
        tree = workspace.export(self.side)
        channel = JobChannel(workspace.scratch / "channel")
        stack.callback(channel.close)
        channel.open()
        self._channel = channel
        plan = self.plan
        pythonpath = import_roots(plan, self.side, tree)
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
            command=serve_command(
                plan.seed,
                interpreter=plan.interpreter or interpreter_of(self.backend, plan.image_id),
                writable_tree=plan.writable_tree,
            ),
        )
        with interrupts.shielded():  # its removal registered before a signal can land
            container = stack.enter_context(SideRun(self.backend, job)).container
        self._container = container
        follower = container.follow_logs(self._tail)

        def wake_when_stopped() -> None:
            follower.join()  # the log stream ends when the container stops
            channel.wake()

        threading.Thread(target=wake_when_stopped, name=f"wake-{self.name}", daemon=True).start()
        started = container.facts(NEVER_WAITED)
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
        if self._channel is None or self._container is None:
            return
        self._channel.end_input()
        with contextlib.suppress(Exception):  # the removal that follows kills it anyway
            self._container.wait(deadline=time.monotonic() + STOP_WAIT_S, poll_s=0.5)

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
        channel, container = self._channel, self._container
        if channel is None or container is None:
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
            return self._job_run(
                number, job_id, _result_file(received, number, job_id), round_trip_ms
            )
        if received is TIMED_OUT:
            container.kill()
            self._gone = ContainerFacts(
                image_id=self.image_id,
                killed_at_deadline=True,
                message=f"no result within {timeout_s:g} s + {slack:g} s slack",
            )
        elif received is CLOSED:
            exit_ = container.wait(deadline=time.monotonic() + STOP_WAIT_S, poll_s=0.5)
            self._gone = container.facts(exit_)
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


def _result_file(received: Received, number: int, job_id: str) -> ReplayFile:
    """A result line as a replay file: usable only when it is a valid run of this job."""
    document = received.document
    if document is None:
        return ReplayFile(replay=number, state="corrupt", problem=received.problem)
    problem = run_doc_problem(document)
    if problem is None and document.get("job") != job_id:
        problem = f"a result for job {document.get('job')!r} came back for job {job_id!r}"
    if problem is not None:
        return ReplayFile(replay=number, state="corrupt", problem=problem)
    return ReplayFile(replay=number, state="ok", doc=document)
