"""One job (a batch replay, or a serve-mode job) run to its replay-run/1 document.

:func:`run_job` starts the job's pytest sessions (one, or ``workers`` of a split replay,
`orchestrator/probe/workers.py`) with a spawner (`orchestrator/probe/spawn.py`), waits for
them under one deadline, kills their process groups and reads what their probes wrote.
Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

from orchestrator.probe import PROBE_VERSION, RUN_SCHEMA, SPLIT_ENV, WORKER_ENV
from orchestrator.probe.deadline import Deadline, kill_groups
from orchestrator.probe.jobs import COMPLETED, TIMEOUT, Job, child_environment, read_result
from orchestrator.probe.spawn import Spawner, take_terminal
from orchestrator.probe.spool import spool_path
from orchestrator.probe.workers import (
    WorkerOutcome,
    merge_results,
    merged_exit_code,
    read_split,
    worker_files,
    worker_summary,
)
from orchestrator.probe.workspace import Workspace


@dataclass(frozen=True, kw_only=True)
class Runner:
    """What every job of one driver shares."""

    spawners: Mapping[str, Spawner]  # by a job's spawn mode
    workspace: Workspace
    out: Path  # the logs and a split replay's files
    result_dir: Path  # where a single session's probe writes its result
    progress_fd: int | None = None  # the probes' per-test lines (batch mode)
    attach: bool = False
    workers: int = 1  # pytest sessions per job
    private_fds: tuple[int, ...] = ()  # closed in every session (the serve-mode streams)
    running: list[int] = field(default_factory=list)  # the process groups now running


@dataclass(frozen=True, kw_only=True)
class _Session:
    worker: int  # 1..workers
    result: Path
    split: Path | None  # a worker's split file (None: the job is one session)
    log: Path


@dataclass(frozen=True, kw_only=True)
class _Ended:
    session: _Session
    status: str
    exit_code: int | None
    raw: bytes | None  # the probe's validated result
    wall_ms: float
    cpu_ms: float


def run_job(runner: Runner, job: Job, log_path: Path) -> tuple[dict[str, Any], bytes | None]:
    """Run ``job``; its run document and its probe result (as bytes, or None)."""
    sessions = _sessions(runner, job, log_path)
    for session in sessions:
        _remove(session)
    runner.workspace.reset()  # once per job: a split replay's workers share HOME and tree
    started = perf_counter()
    pids = {_start(runner, job, session): session for session in sessions}
    with Deadline(pids, job.timeout_s) as deadline:
        reaped = _wait_for(pids)
    # Kill every group either way: a test's background processes die with it.
    kill_groups(pids)
    runner.running.clear()
    if runner.attach:
        take_terminal()
    wall_ms = _ms_since(started)
    ended = []
    for pid, session in pids.items():
        wait_status, at, cpu_s = reaped.get(pid, (0, perf_counter(), 0.0))
        exit_code: int | None = os.waitstatus_to_exitcode(wait_status)
        # A session that exited on its own just as the deadline fired still completed.
        timed_out = deadline.expired and exit_code == -signal.SIGKILL
        status, raw = (TIMEOUT, None) if timed_out else read_result(session.result)
        ended.append(
            _Ended(
                session=session,
                status=status,
                exit_code=None if timed_out else exit_code,
                raw=raw,
                wall_ms=round((at - started) * 1000.0, 3),
                cpu_ms=round(cpu_s * 1000.0, 3),
            )
        )
    if runner.workers == 1:
        _remove(sessions[0])
        run = _run_head(job, ended[0].status, ended[0].exit_code, wall_ms)
        run["cpu_ms"] = ended[0].cpu_ms
        _explain(run, ended)
        return run, ended[0].raw
    return _split_run(job, ended, runner.workers, started)


# What the end of a session's output may hold (pytest's usage error, a crash's traceback).
TAIL_BYTES = 4096
TAIL_LINES = 8
TAIL_CHARS = 2000


def output_tail(log: Path) -> str | None:
    """The last lines a session printed (at most :data:`TAIL_LINES` non-blank ones and
    :data:`TAIL_CHARS` characters), None when it printed nothing or the log is gone."""
    try:
        with log.open("rb") as stream:
            stream.seek(max(0, log.stat().st_size - TAIL_BYTES))
            data = stream.read(TAIL_BYTES)
    except OSError:
        return None
    lines = [line.rstrip() for line in data.decode("utf-8", "replace").splitlines()]
    kept = [line for line in lines if line.strip()][-TAIL_LINES:]
    return "\n".join(kept)[-TAIL_CHARS:] or None


def _explain(run: dict[str, Any], ended: Sequence[_Ended]) -> None:
    """A replay that wrote no usable result says why as pytest printed it: the end of
    the output of its first session that wrote none (``output_tail``)."""
    if run["status"] in (TIMEOUT, COMPLETED):
        return
    for one in ended:
        if one.status not in (TIMEOUT, COMPLETED):
            tail = output_tail(one.session.log)
            if tail is not None:
                run["output_tail"] = tail
            return


def _sessions(runner: Runner, job: Job, log_path: Path) -> list[_Session]:
    if runner.workers == 1:
        result = runner.result_dir / f".probe-{job.number:03d}.json"
        return [_Session(worker=1, result=result, split=None, log=log_path)]
    sessions = []
    for worker in range(1, runner.workers + 1):
        result, split, log = worker_files(runner.out, job.number, worker)
        sessions.append(_Session(worker=worker, result=result, split=split, log=log))
    return sessions


def _remove(session: _Session) -> None:
    session.result.unlink(missing_ok=True)
    Path(spool_path(str(session.result))).unlink(missing_ok=True)  # a session killed mid-way
    if session.split is not None:
        session.split.unlink(missing_ok=True)


def _start(runner: Runner, job: Job, session: _Session) -> int:
    env = child_environment(
        dict(os.environ),
        result_path=session.result,
        seed=job.seed,
        fixture=job.fixture,
        progress_fd=runner.progress_fd,
    )
    if session.split is not None:
        env[WORKER_ENV] = f"{session.worker}/{runner.workers}"
        env[SPLIT_ENV] = str(session.split)
    spawner = runner.spawners[job.spawn]
    return spawner.start(
        job, env, session.log, running=runner.running, private_fds=runner.private_fds
    )


def _wait_for(pids: Mapping[int, _Session]) -> dict[int, tuple[int, float, float]]:
    """Reap every session: pid -> (wait status, when, its own CPU seconds)."""
    reaped: dict[int, tuple[int, float, float]] = {}
    while len(reaped) < len(pids):
        try:
            pid, wait_status, usage = os.wait4(-1, 0)
        except ChildProcessError:  # nothing left to reap (cannot happen; never hang)
            break
        if pid in pids:
            # The session process's own CPU time (not its children's): what a replay
            # costs apart from waiting for a core on a busy machine.
            reaped[pid] = (wait_status, perf_counter(), usage.ru_utime + usage.ru_stime)
    return reaped


def _ms_since(started: float) -> float:
    return round((perf_counter() - started) * 1000.0, 3)


def _run_head(job: Job, status: str, exit_code: int | None, wall_ms: float) -> dict[str, Any]:
    run: dict[str, Any] = {
        "schema": RUN_SCHEMA,
        "probe_version": PROBE_VERSION,
        "replay": job.number,
        "status": status,
        "exit_code": exit_code,
        "wall_ms": wall_ms,
        "seed": job.seed,
        "timeout_s": job.timeout_s,
        "spawn": job.spawn,
    }
    if job.job_id is not None:
        run["job"] = job.job_id
    return run


def _split_run(
    job: Job, ended: Sequence[_Ended], count: int, started: float
) -> tuple[dict[str, Any], bytes | None]:
    """The run document of a split replay, with the merge of its workers' results."""
    outcomes = []
    for one in ended:
        outcomes.append(
            WorkerOutcome(
                worker=one.session.worker,
                status=one.status,
                exit_code=one.exit_code,
                wall_ms=one.wall_ms,
                result=json.loads(one.raw) if one.raw is not None else None,
                bins=read_split(one.session.split, count) if one.session.split else None,
            )
        )
        _remove(one.session)
    status, merged = merge_results(outcomes, count)
    run = _run_head(job, status, merged_exit_code(outcomes), _ms_since(started))
    run["workers"] = count
    run["worker_runs"] = [worker_summary(outcome) for outcome in outcomes]
    _explain(run, ended)
    if merged is None:
        return run, None
    data = json.dumps(merged, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return run, data.encode("utf-8")
