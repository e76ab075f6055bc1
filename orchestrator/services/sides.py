"""Run a test command on several sides (revisions) in hermetic containers, concurrently.

Used by ``replay``, ``thaw``, ``budget`` and ``accept``. Each side's revision is
exported into its own temporary folder, mounted read-only into a container made
from the pinned image ID (with ``writable_tree``, mounted read-only elsewhere and copied
by the driver into a private tmpfs at /src before each replay); the container runs the
probe's driver (``<interpreter> -m orchestrator.probe.replay``: a project image's venv
python, named by its label, else ``python3``), N fresh replays per container start
(``isolation="side"``; each replay a process forked from a driver that imported
pytest once, see ``orchestrator/probe/driver.py``) or one container per replay
(``isolation="container"``).
Labels come from the result files and the engine's facts
(:mod:`orchestrator.adapters.results`). Containers, volumes and folders are always
removed, also on a second Ctrl-C.

A run may use a pool of engines (:mod:`orchestrator.services.engines`): the
properties are cut into batches (:func:`orchestrator.core.pool.plan_batches`), both
sides of a batch run on one engine, and :mod:`orchestrator.services.dispatch` runs the
batches on the engines' lanes and queues again, once, what an engine that went away
did not finish. Without a pool the run is one batch on one engine, as before.

The engine is reached through :mod:`orchestrator.adapters.docker` only, and its
failures arrive as :class:`~orchestrator.errors.EngineError`: they become the
labels of the replays they cost (``harness_error`` with the error's reason). Any
other failure of a side is the tool's own fault: its replays are labelled
``harness_error`` / ``internal_error``, its traceback is kept, and the run ends in
:class:`~orchestrator.errors.InternalError` (exit 3) once everything is removed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from orchestrator import interrupts
from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.input_file import read_input
from orchestrator.adapters.results import (
    ResultsRead,
    read_results_stream,
    reader_command,
    replay_file_name,
    replay_files_from,
)
from orchestrator.core import replay_env
from orchestrator.core.labels import (
    ContainerFacts,
    ReplayFile,
    label_replays,
    mark_image_mismatch,
    nodeids_seen,
)
from orchestrator.core.pool import RAW, Batch, narrow_targets, plan_batches
from orchestrator.core.progress import (
    SideProgress,
    parse_replay_line,
    parse_test_line,
    with_replays,
    with_test,
)
from orchestrator.core.pytest_command import expand_parametrized
from orchestrator.core.reproduce import IDLE_COMMAND
from orchestrator.errors import (
    EngineError,
    InputError,
    InternalError,
    Interrupted,
    OrchestratorError,
    one_line,
)
from orchestrator.log import get_logger
from orchestrator.model import Replay
from orchestrator.services.dispatch import Dispatched, Dispatcher, SideResults, engine_gone_in
from orchestrator.services.engines import (
    DURATIONS,
    FIXTURE,
    OUT,
    PROBE_ROOT,
    RESULTS_TMPFS,
    SRC,
    TREE,
    DockerEngine,
    Inputs,
    Pool,
    Staging,
    probe_package,
    single_pool,
    write_tar,
)

if TYPE_CHECKING:
    from docker import DockerClient

    from orchestrator.core.test_files import SideOverlay

log = get_logger(__name__)

ISOLATIONS = ("side", "container")
NO_TEST_REPORTED = "<no test reported>"
INTERNAL_ERROR = "internal_error"  # the harness sub-reason of a side the tool itself broke
DISK_FULL = "disk_full"  # ... or of a side whose files found no space (ENOSPC, EDQUOT)
INTERNAL_ERROR_FILE = "internal-error.txt"  # its traceback, under keep_raw/<side>/
# Time for a container to start and the driver to import, on top of N x --timeout.
STARTUP_SLACK_S = 15.0
PER_REPLAY_SLACK_S = 2.0

# The container's paths live in services.engines; kept importable from here.
__all__ = ["DURATIONS", "FIXTURE", "OUT", "PROBE_ROOT", "RESULTS_TMPFS", "SRC", "TREE"]

# Called with a side's counts after each of its finished tests and replays, from the
# threads that read the containers' output.
Progress = Callable[[SideProgress], None]


@dataclass(frozen=True, kw_only=True)
class SideSpec:
    """One side of a replay: a revision of a repository, optionally with a mutant applied."""

    name: str
    repo: Path
    rev: str  # full SHA
    mutant: Path | None = None
    # Import roots of the side's tree (relative to it, or absolute in the image), before the
    # probe on PYTHONPATH; None: found in the exported tree (core.replay_env.side_pythonpath).
    pythonpath: tuple[str, ...] | None = None
    # --tests-from: another revision's test files laid over the exported tree.
    tests: SideOverlay | None = None
    # What pytest is handed on this side instead of the plan's property ids (empty: those):
    # the selected node ids this side has (one node id pytest cannot find stops the whole
    # run; the missing ones are labelled not_found), or whole modules.
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ReplayPlan:
    """How every side is replayed: same image ID, same command, same fixture, same seed."""

    image_id: str
    pytest_args: tuple[str, ...]
    property_ids: tuple[str, ...]
    fixture: Path | None
    replays: int
    timeout_s: float
    seed: int
    runner_id: str
    isolation: str = "side"
    # The properties are the node ids reported for each selected id: a function's id
    # stands for its parametrizations (core.pytest_command.expand_parametrized).
    expand_parametrized: bool = False
    memory: str = "512m"
    pids: int = 256
    cpus: float = 1.0
    tmp_size: str = "64m"  # the /tmp tmpfs
    # pytest workers per replay (the driver's --workers), and the recorded durations they
    # split the tests by (core.schedule); limits are the caller's to scale with jobs.
    jobs: int = 1
    durations: Path | None = None
    # The interpreter that runs the driver; None: the image's label says (else python3).
    interpreter: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # --env KEY=VALUE, after the replay's own
    extra_pythonpath: tuple[str, ...] = ()  # --pythonpath, for sides found in their tree
    writable_tree: bool = False


def pytest_arguments(pytest_args: Sequence[str], property_ids: Sequence[str]) -> tuple[str, ...]:
    """What follows ``--`` on the driver's command line. Pure.

    The cache provider is off (the sources are read-only); a module that does not import
    on one side (the fix's tests naming what only the fix adds) is a property of its own,
    and the other modules still run there (pytest would stop the whole session); the
    property node ids are appended.
    """
    return (
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        *pytest_args,
        *property_ids,
    )


def side_targets(plan: ReplayPlan, side: SideSpec) -> tuple[str, ...]:
    """The node ids (or paths) handed to pytest on one side. Pure."""
    return side.targets or plan.property_ids


def driver_command(
    plan: ReplayPlan,
    replays: int,
    property_ids: Sequence[str] | None = None,
    *,
    out: str = OUT,
    tree: str = TREE,
) -> list[str]:
    """The container's command: the probe driver, N replays of the pytest arguments
    (``property_ids``: the side's own, default the plan's; ``out``: where the results go
    in the container; ``tree``: where the read-only tree is mounted), HOME made in the
    tmpfs (and, with ``writable_tree``, a fresh copy of the tree before each replay).
    Pure."""
    made = [arg for folder in replay_env.MADE_DIRS for arg in ("--make-dir", folder)]
    copy = ["--copy-tree", f"{tree}:{SRC}"] if plan.writable_tree else []
    return [
        plan.interpreter or "python3",
        "-m",
        "orchestrator.probe.replay",
        "--replays",
        str(replays),
        "--timeout",
        f"{plan.timeout_s:g}",
        "--out",
        out,
        "--seed",
        str(plan.seed),
        *(("--workers", str(plan.jobs)) if plan.jobs > 1 else ()),
        *made,
        *copy,
        "--",
        *pytest_arguments(
            plan.pytest_args, plan.property_ids if property_ids is None else property_ids
        ),
    ]


def replay_variables(plan: ReplayPlan) -> dict[str, str]:
    """Every variable a replay gets but PYTHONPATH (recorded as pins). Pure."""
    return replay_env.replay_variables(
        seed=plan.seed,
        fixture=FIXTURE if plan.fixture is not None else None,
        extra=plan.env,
    )


def side_pythonpath(paths: Sequence[str]) -> tuple[str, ...]:
    """A side's PYTHONPATH entries in the container: its import roots, then the probe."""
    return (*replay_env.SidePath(entries=tuple(paths)).container_paths(SRC), PROBE_ROOT)


def replay_environment(plan: ReplayPlan, pythonpath: Sequence[str] = ()) -> dict[str, str]:
    """The container's whole environment: only the replay's own variables. Pure."""
    env = {**replay_variables(plan), "PYTHONPATH": ":".join(side_pythonpath(pythonpath))}
    if plan.jobs > 1 and plan.durations is not None:
        env["REPLAY_DURATIONS"] = DURATIONS  # a scheduling hint: where the workers split
    return env


def tree_pythonpath(tree: Path, extra: Sequence[str] = ()) -> replay_env.SidePath:
    """A side's import roots, found in its exported tree."""
    files: dict[str, bytes | None] = {}
    for name in replay_env.INI_FILES:
        path = tree / name
        files[name] = path.read_bytes() if path.is_file() else None
    src = tree / replay_env.SRC
    src_paths: list[str] = []
    if src.is_dir():
        for entry in sorted(src.iterdir()):
            if entry.is_file():
                src_paths.append(f"{replay_env.SRC}/{entry.name}")
            elif (entry / "__init__.py").is_file():
                src_paths.append(f"{replay_env.SRC}/{entry.name}/__init__.py")
    return replay_env.side_pythonpath(files, src_paths, extra)


def planned_pythonpath(repo: Path, rev: str, extra: Sequence[str] = ()) -> replay_env.SidePath:
    """A side's import roots, read at its revision (before anything is exported)."""
    files = git_adapter.read_blobs(repo, rev, replay_env.INI_FILES)
    src_paths = git_adapter.list_paths(repo, rev, replay_env.SRC)
    return replay_env.side_pythonpath(files, src_paths, extra)


def interpreter_of(client: DockerClient, image_id: str) -> str:
    """The driver's interpreter for an image: its label's venv python, else python3. An
    image the engine cannot show is left to the containers to report (as their labels)."""
    from orchestrator.core.replay_env import interpreter_from_labels

    try:
        labels = docker_adapter.resolve_image(client, image_id).labels
    except EngineError:
        labels = {}
    return interpreter_from_labels(labels)


def writable_tree_tmpfs(tree: Path) -> str:
    """Options of the tmpfs the tree is copied into: room for two copies, owned by the
    runner user (uid 1000), executable (suites run scripts of their tree)."""
    size = 0  # from blocks, not st_size: what the files really take
    for folder, _dirs, names in os.walk(tree):
        for name in names:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(folder, name)).st_blocks * 512
    megabytes = max(64, (2 * size) // (1024 * 1024) + 32)
    return f"rw,nosuid,nodev,exec,size={megabytes}m,uid=1000,gid=1000,mode=0755"


def side_mounts(
    tree: Path,
    fixture_copy: Path | None,
    *,
    writable_tree: bool = False,
    durations_copy: Path | None = None,
) -> list[docker_adapter.Mount]:
    """What a side's container sees, all read-only: its tree at SRC (with
    ``writable_tree`` at TREE, copied to SRC per replay), the probe beside it, the
    fixture and the recorded durations. Results go to a tmpfs (:data:`OUT`)."""
    mounts = [
        docker_adapter.Mount(source=tree, target=TREE if writable_tree else SRC),
        docker_adapter.Mount(source=probe_package(), target=f"{PROBE_ROOT}/orchestrator"),
    ]
    if fixture_copy is not None:
        mounts.append(docker_adapter.Mount(source=fixture_copy, target=FIXTURE))
    if durations_copy is not None:
        mounts.append(docker_adapter.Mount(source=durations_copy, target=DURATIONS))
    return mounts


def side_tmpfs(plan: ReplayPlan, tree: Path) -> dict[str, str]:
    """The container's writable places besides /tmp: the results folder, and with
    ``writable_tree`` the tmpfs the tree is copied into. Both are capped."""
    tmpfs = {OUT: RESULTS_TMPFS}
    if plan.writable_tree:
        tmpfs[SRC] = writable_tree_tmpfs(tree)
    return tmpfs


def side_container_config(
    plan: ReplayPlan,
    side: str,
    *,
    tree: Path,
    fixture_copy: Path | None,
    pythonpath: Sequence[str],
    name: str,
    labels: Mapping[str, str],
    staging: Staging | None = None,
    durations_copy: Path | None = None,
) -> dict[str, Any]:
    """The one builder of a side's container (``replay``, collection and ``reproduce``
    use it): the pinned image, the mounts, only the replay's environment
    (``pythonpath``: the side's import roots), the limits, the capped tmpfs folders,
    no network. Its own process only idles: the driver runs in it with ``docker exec``
    (:func:`run_and_read`), so that the container outlives the driver and its results
    can be read back from the tmpfs."""
    if staging is None:  # bind mounts of this machine's folders
        mounts = side_mounts(
            tree,
            fixture_copy,
            writable_tree=plan.writable_tree,
            durations_copy=durations_copy,
        )
    else:  # the engine's own way in: bind mounts, or volumes on an engine elsewhere
        tree_target = staging.tree_path if plan.writable_tree else SRC
        mounts = staging.mounts(side, tree_target=tree_target)
    return docker_adapter.container_config(
        image_id=plan.image_id,
        name=name,
        command=IDLE_COMMAND,
        mounts=mounts,
        environment=replay_environment(plan, pythonpath),
        labels=labels,
        limits=plan_limits(plan),
        tmpfs=side_tmpfs(plan, tree),
    )


def side_driver_command(
    plan: ReplayPlan,
    side: SideSpec,
    *,
    replays: int,
    targets: Sequence[str] | None = None,
    staging: Staging | None = None,
) -> list[str]:
    """The driver's command for one of the side's containers (``targets``: what pytest
    is handed, default the side's own). Pure."""
    selected = side_targets(plan, side) if targets is None else targets
    tree_path = TREE if staging is None else staging.tree_path
    return driver_command(plan, replays, selected, out=OUT, tree=tree_path)


def plan_limits(plan: ReplayPlan) -> docker_adapter.Limits:
    return docker_adapter.Limits(
        memory=plan.memory, pids=plan.pids, cpus=plan.cpus, tmp_size=plan.tmp_size
    )


def private_fixture(folder: Path, data: bytes) -> Path:
    """The fixture's bytes as one world-readable file in ``folder`` (a private scratch
    folder): the container's user reads it whatever the original's mode."""
    copy = folder / "fixture.json"
    copy.write_bytes(data)
    copy.chmod(0o644)
    return copy


def side_deadline_s(plan: ReplayPlan, replays: int) -> float:
    """Our own bound on one container: its replays x --timeout plus start-up slack. Pure."""
    return replays * (plan.timeout_s + PER_REPLAY_SLACK_S) + STARTUP_SLACK_S


def container_units(plan: ReplayPlan) -> tuple[tuple[int, ...], ...]:
    """Which replay numbers each container runs, in order. Pure."""
    numbers = tuple(range(1, plan.replays + 1))
    if plan.isolation == "container":
        return tuple((k,) for k in numbers)
    return (numbers,)


def container_name(run_id: str, side: str, unit: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{run_id}-{side}-{unit}")
    return f"orchestrator-{safe}"


def validate_plan(plan: ReplayPlan, sides: Sequence[SideSpec]) -> None:
    if plan.isolation not in ISOLATIONS:
        raise InputError(f"--isolation must be one of {', '.join(ISOLATIONS)}")
    if plan.replays < 1:
        raise InputError("--replays must be at least 1")
    if plan.timeout_s <= 0:
        raise InputError("--timeout must be positive")
    if plan.jobs < 1:
        raise InputError("--jobs must be at least 1")
    names = [side.name for side in sides]
    if not names or len(set(names)) != len(names):
        raise InputError("sides must have distinct names")
    if plan.fixture is not None and not plan.fixture.is_file():
        raise InputError(f"{plan.fixture}: no such fixture file")


class _DeferredSignals:
    """While cleaning up, Ctrl-C (or SIGTERM) is noted instead of interrupting the cleanup."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, *, interrupted: bool = False) -> None:
        self.hits = 0
        # An interrupted run ends in Interrupted (exit 130) right after this cleanup: a
        # further Ctrl-C or SIGTERM would only turn that exit into death by signal.
        self.interrupted = interrupted
        self._previous: dict[int, Any] = {}

    def _note(self, signum: int, frame: FrameType | None) -> None:
        # Nothing that takes a lock here (no logging): the main thread may hold it.
        self.hits += 1
        interrupts.note(signum)  # the command line names it in its one line

    def __enter__(self) -> _DeferredSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._note)
            if interrupts.take_pending():  # one that came in where raising was unsafe
                self.hits += 1
        return self

    def __exit__(self, *exc: object) -> None:
        leaving = self.interrupted or self.hits > 0
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if leaving else previous)
        if self.hits:
            log.warning("interrupt.deferred", signals=self.hits, detail="noted during cleanup")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While sides run (or a replay is reproduced), SIGTERM (a CI cancelling the job) cleans
    up like Ctrl-C.

    The command line's own handlers (``orchestrator.interrupts``) already do so, once."""
    if threading.current_thread() is not threading.main_thread() or interrupts.installed():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True, kw_only=True)
class SidesOutcome:
    """What :func:`run_sides` produced: the labels (as :func:`replay_sides` returns them),
    which engine decided each property, the attempts that are not results, the pool."""

    labelled: dict[str, dict[str, tuple[Replay, ...]]]
    runners: Mapping[str, str]  # property id -> runner id of the engine that ran it
    raw_dirs: Mapping[str, str]  # property id -> its raw folder in the run folder
    attempts: tuple[AttemptRecord, ...] = ()
    engines: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class AttemptRecord:
    """A batch's attempt on an engine that stopped answering, labelled, for the run folder."""

    batch: str
    engine: str  # its URL
    runner_id: str
    raw_dir: str
    labelled: Mapping[str, Mapping[str, tuple[Replay, ...]]]  # side -> property -> replays

    def to_json(self) -> dict[str, Any]:
        properties = sorted({p for per_side in self.labelled.values() for p in per_side})
        return {
            "batch": self.batch,
            "engine": self.engine,
            "runner_id": self.runner_id,
            "raw_dir": self.raw_dir,
            "properties": [
                {
                    "property_id": property_id,
                    **{
                        f"{side}_labels": [r.label for r in per_side.get(property_id, ())]
                        for side, per_side in self.labelled.items()
                    },
                    **{
                        f"{side}_reasons": [r.reason for r in per_side.get(property_id, ())]
                        for side, per_side in self.labelled.items()
                    },
                }
                for property_id in properties
            ],
        }


@dataclass
class _Run:
    """Shared state of one replay_sides call."""

    plan: ReplayPlan
    sides: tuple[SideSpec, ...]
    pool: Pool
    owner: docker_adapter.Owner
    progress: Progress | None
    keep_raw: Path | None
    single: bool  # one batch: raw files and container names as before pools
    cancelled: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)  # exports may go
    live: docker_adapter.LiveContainers = field(default_factory=docker_adapter.LiveContainers)
    fixture_copy: Path | None = None
    durations_copy: Path | None = None
    scratch: list[Path] = field(default_factory=list)
    # Written by the export and engine threads, read after they finished.
    trees: dict[str, Path] = field(default_factory=dict)
    tars: dict[str, Path] = field(default_factory=dict)
    probe_tar: Path | None = None
    failures: dict[str, OrchestratorError] = field(default_factory=dict)
    internal_errors: dict[str, tuple[str, str | None, str]] = field(default_factory=dict)
    scratch_lock: threading.Lock = field(default_factory=threading.Lock)
    progress_lock: threading.Lock = field(default_factory=threading.Lock)
    side_progress: dict[str, SideProgress] = field(default_factory=dict)
    started_s: float = field(default_factory=time.monotonic)
    batches: int = 1

    def make_scratch(self, purpose: str) -> Path:
        # Created and registered as one step: a Ctrl-C between the two would leave a
        # folder that nothing removes (until the next run's sweep).
        with interrupts.shielded(), self.scratch_lock:
            folder = git_adapter.make_scratch(purpose)
            self.scratch.append(folder)
        return folder

    def drop_scratch(self, folder: Path) -> None:
        git_adapter.remove_scratch(folder)
        with self.scratch_lock:
            if folder in self.scratch:
                self.scratch.remove(folder)

    def raw_root(self, batch: Batch) -> Path | None:
        """Where a batch's raw replay files are kept (``keep_raw`` itself for one batch)."""
        if self.keep_raw is None:
            return None
        return (
            self.keep_raw if batch.raw_dir(single=self.single) == RAW else self.keep_raw / batch.key
        )

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


def _run_container(
    run: _Run,
    *,
    engine: DockerEngine,
    staging: Staging,
    batch: Batch,
    side: SideSpec,
    unit_index: int,
    numbers: tuple[int, ...],
    pythonpath: Sequence[str],
) -> list[tuple[ReplayFile, ContainerFacts]]:
    """One container's life: create, start, run the driver to its end (or our deadline),
    read its results back, remove."""
    plan = replace(run.plan, property_ids=batch.property_ids) if batch.property_ids else run.plan
    config = side_container_config(
        plan,
        side.name,
        tree=run.trees[side.name],
        fixture_copy=run.fixture_copy,
        pythonpath=pythonpath,
        name=container_name(run.owner.run_id, _unit_side(run, batch, side), unit_index),
        labels=run.owner.labels(side.name),
        staging=staging,
    )
    command = side_driver_command(
        plan,
        side,
        replays=len(numbers),
        targets=_batch_targets(run, batch, side),
        staging=staging,
    )
    tail = LineTail()
    read = ResultsRead()
    try:
        facts, read = _observe(
            run,
            engine=engine,
            side=side.name,
            config=config,
            command=command,
            numbers=numbers,
            tail=tail,
        )
    except docker_adapter.Cancelled:
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
    raw_root = run.raw_root(batch)
    if raw_root is not None:
        _keep_raw(read, raw_root / side.name, numbers)
    # Renumber: with one container per replay, each writes its own replay-001.json.
    return [
        (replace(replay_file, replay=number), facts)
        for replay_file, number in zip(files, numbers, strict=True)
    ]


def _batch_targets(run: _Run, batch: Batch, side: SideSpec) -> tuple[str, ...]:
    """What pytest is handed on one side of one batch: the side's own targets for a run
    of one batch, else those of the batch's properties. Pure."""
    if not batch.property_ids or batch.property_ids == run.plan.property_ids:
        return side_targets(run.plan, side)
    return narrow_targets(side.targets, batch.property_ids) or batch.property_ids


def _unit_side(run: _Run, batch: Batch, side: SideSpec) -> str:
    """The side's part of a container name: the side, after the batch when there are several."""
    return side.name if run.single and batch.attempt == 1 else f"{batch.key}-{side.name}"


def _observe(
    run: _Run,
    *,
    engine: DockerEngine,
    side: str,
    config: Mapping[str, Any],
    command: Sequence[str],
    numbers: tuple[int, ...],
    tail: Callable[[str], None],
) -> tuple[ContainerFacts, ResultsRead]:
    """Run the driver in one container to its end (or our deadline), read back what it
    left, and return the engine's facts with it."""
    entered = time.monotonic()
    with docker_adapter.Container(
        engine.client, config, live=run.live, cancelled=run.cancelled
    ) as container:
        started = time.monotonic()
        facts, read = run_and_read(
            container,
            command=command,
            on_line=_line_handler(run, side, tail),
            deadline=started + side_deadline_s(run.plan, len(numbers)),
            interpreter=run.plan.interpreter or "python3",
        )
        log.debug(
            "container.timing",
            side=side,
            create_start_ms=round((started - entered) * 1000),
            run_ms=round((time.monotonic() - started) * 1000),
        )
    return facts, read


# Reading a results folder back: a tmpfs of a few MiB, one small process.
READ_BACK_S = 60.0


def run_and_read(
    container: docker_adapter.Container,
    *,
    command: Sequence[str],
    on_line: Callable[[str], None],
    deadline: float,
    interpreter: str,
) -> tuple[ContainerFacts, ResultsRead]:
    """The one way a side's command runs: ``docker exec`` in the idling container, its
    output line by line (each line capped) to ``on_line``; then, while the container
    still runs (also past the deadline, before it is killed), the results folder read
    back through :mod:`orchestrator.adapters.results`. The facts: the command's exit
    code, our deadline, a cancellation, and an OOM kill seen by the engine or counted
    in the container's memory cgroup."""
    lines = docker_adapter.BoundedLines(on_line)
    exit_ = container.exec_stream(
        command,
        environment={},
        on_output=lines.feed,
        deadline=deadline,
        kill_at_deadline=False,
    )
    lines.close()
    facts = container.facts(exit_)
    read = ResultsRead()
    if not exit_.cancelled and facts.running:
        chunks, _ = container.exec_chunks(
            reader_command(interpreter, OUT), deadline=time.monotonic() + READ_BACK_S
        )
        read = read_results_stream(chunks)
    else:  # the container itself ended (its init killed from inside, or OOM): use its code
        exit_ = replace(exit_, status_code=facts.exit_code)
    oom = facts.oom_killed or bool(read.oom_kill)
    return replace(facts, exit_code=exit_.status_code, oom_killed=oom, running=False), read


class LineTail:
    """The last lines a container printed, for diagnostics on a harness error."""

    def __init__(self, keep: int = 40) -> None:
        self.lines: deque[str] = deque(maxlen=keep)

    def __call__(self, line: str) -> None:
        self.lines.append(line)


def _line_handler(run: _Run, side: str, tail: Callable[[str], None]) -> Callable[[str], None]:
    def handle(line: str) -> None:
        if not run.note_line(side, line):
            tail(line)  # the per-test lines would push a failure's own lines out

    return handle


def _keep_raw(read: ResultsRead, dest: Path, numbers: tuple[int, ...]) -> None:
    """The result files as they came back (capped, regular files only) under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for index, number in enumerate(numbers, start=1):
        data = read.files.get(replay_file_name(index))
        if data is not None:
            (dest / replay_file_name(number)).write_bytes(data)


def _export_side(
    run: _Run, side: SideSpec, ready: threading.Event, finished: threading.Event
) -> None:
    """Export the side's sources (in parallel with the other sides) and keep them until
    the run is done; for the volume path also as a tar."""
    try:
        with git_adapter.checkout(
            side.repo, side.rev, mutant=side.mutant, tests=side.tests
        ) as tree:
            run.trees[side.name] = tree
            if run.pool.volumes:
                run.tars[side.name] = write_tar(tree, run.make_scratch("tar") / "src.tar")
            ready.set()
            while not run.done.wait(timeout=0.5):
                pass
    except OrchestratorError as error:
        # Bad input (a mutant that does not apply: exit 2) or git failing on good input
        # (exit 3): no label, the run ends with this error once everything is removed.
        run.failures[side.name] = error
        run.cancelled.set()
    except Exception as error:  # the tool's own fault: never an engine label, never silent
        _internal_error(run, side.name, error, run.keep_raw)
    finally:
        ready.set()
        finished.set()  # only after the sources are removed


def _internal_error(run: _Run, side: str, error: BaseException, raw_root: Path | None) -> None:
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
    run: _Run, engine: DockerEngine, staging: Staging, batch: Batch, side: SideSpec
) -> list[tuple[ReplayFile, ContainerFacts]]:
    """One side of one batch on one engine: its containers, one after another; every
    replay gets a (file, facts) pair whatever happens."""
    observed: list[tuple[ReplayFile, ContainerFacts]] = []
    try:
        pythonpath = side.pythonpath
        if pythonpath is None:
            pythonpath = tree_pythonpath(run.trees[side.name], run.plan.extra_pythonpath).entries
        for unit_index, numbers in enumerate(container_units(run.plan), start=1):
            if run.cancelled.is_set():
                facts = ContainerFacts(cancelled=True, message="interrupted before start")
                observed.extend((ReplayFile(replay=n, state="missing"), facts) for n in numbers)
                continue
            observed.extend(
                _run_container(
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
    return observed


def _run_batch(run: _Run, engine: DockerEngine, batch: Batch, staging: Staging) -> SideResults:
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


def _missing(run: _Run, facts: ContainerFacts) -> list[tuple[ReplayFile, ContainerFacts]]:
    return [(ReplayFile(replay=n, state="missing"), facts) for n in range(1, run.plan.replays + 1)]


def _fill_missing(
    run: _Run, observed: list[tuple[ReplayFile, ContainerFacts]], facts: ContainerFacts
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


def local_fault_reason(error: BaseException) -> str:
    """``disk_full`` for a write that found no space, else ``internal_error``. Pure."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return DISK_FULL
    return INTERNAL_ERROR


def internal_error_message(
    side: str, what: str, kept: str | None, reason: str = INTERNAL_ERROR
) -> str:
    """The one line a run ends with when the tool itself broke one of its sides. Pure."""
    if reason == DISK_FULL:
        return f"disk full in side {side}: {what} ({DISK_FULL})"
    where = f"traceback in {kept}" if kept is not None else "traceback in the log"
    return (
        f"internal error in side {side}: {what} - a fault of orchestrator itself, "
        f"not of the Docker engine or the tested code ({INTERNAL_ERROR}; {where})"
    )


class SideInternalError(InternalError):
    """A side failed in the tool itself. ``labelled`` holds the labels replay_sides had
    (that side's unfinished replays are ``harness_error`` / ``internal_error``)."""

    def __init__(
        self, message: str, labelled: Mapping[str, Mapping[str, tuple[Replay, ...]]]
    ) -> None:
        super().__init__(message)
        self.labelled = labelled


def _copy_fixture(run: _Run, fixture: Path) -> Path:
    """One private, world-readable copy for every side: the user's file may be private
    (0600) or change while the run goes on, and both sides must read the same bytes."""
    # A regular file under the input cap, never followed, never blocking (a FIFO).
    data = read_input(fixture)
    return private_fixture(run.make_scratch("fixture"), data)


def _copy_durations(run: _Run, durations: Path) -> Path | None:
    """A world-readable copy of the recorded durations; None when there is none to read
    (the workers then split by count: durations never decide a label)."""
    copy = run.make_scratch("durations") / "durations.json"
    try:
        shutil.copyfile(durations, copy)
    except OSError:
        return None
    copy.chmod(0o644)
    return copy


def replay_sides(
    plan: ReplayPlan,
    sides: Sequence[SideSpec],
    *,
    client: DockerClient | None = None,
    progress: Progress | None = None,
    run_id: str | None = None,
    keep_raw: Path | None = None,
    pool: Pool | None = None,
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """Side name -> property id -> one :class:`Replay` per replay.

    All sides run at the same time, each in hermetic containers from
    ``plan.image_id`` (never pulled). With no ``property_ids`` every test node id
    any replay reported is a property. ``keep_raw`` keeps a copy of each side's
    raw ``replay-<k>.json`` files under ``keep_raw/<side>/`` (``keep_raw/<batch>/<side>/``
    when the run is cut into batches). Containers, volumes and exported sources are
    always removed; a Ctrl-C raises :class:`Interrupted` after cleanup (a second Ctrl-C
    during cleanup is deferred, and from then on SIGINT and SIGTERM are ignored: the
    caller is on its way out).

    ``pool`` spreads the properties over several engines (:func:`run_sides`); without
    it the run is one batch on ``client`` (or the engine at ``DOCKER_HOST``).

    Engine failures are labels (``harness_error`` with the engine's reason). After
    cleanup, a side's bad input raises its :class:`InputError` (exit 2), git failing
    on good input its :class:`~orchestrator.errors.GitError` (exit 3), and any other
    failure of a side :class:`SideInternalError` (exit 3), its traceback kept under
    ``keep_raw/<side>/internal-error.txt``.
    """
    return run_sides(
        plan,
        sides,
        client=client,
        progress=progress,
        run_id=run_id,
        keep_raw=keep_raw,
        pool=pool,
    ).labelled


def run_sides(
    plan: ReplayPlan,
    sides: Sequence[SideSpec],
    *,
    client: DockerClient | None = None,
    progress: Progress | None = None,
    run_id: str | None = None,
    keep_raw: Path | None = None,
    pool: Pool | None = None,
    batches: Sequence[Batch] | None = None,
) -> SidesOutcome:
    """:func:`replay_sides`, with what a pool adds: which engine ran each property, the
    attempts of engines that went away, and how each engine fared. ``batches`` are the
    plan's properties already cut (default: :func:`~orchestrator.core.pool.plan_batches`
    by the pool's durations)."""
    validate_plan(plan, sides)
    if pool is None:
        if client is None:
            client = docker_adapter.connect(os.environ)
        pool = single_pool(
            client, url=docker_adapter.engine_url(os.environ), runner_id=plan.runner_id
        )
    if plan.interpreter is None:
        plan = replace(plan, interpreter=interpreter_of(pool.first.client, plan.image_id))
    run_id = run_id or new_run_id()
    owner = docker_adapter.Owner.current(run_id)
    # Every engine's leftovers (containers, volumes) of this host's dead runs, by host
    # id and process; another host's only once they are a day old.
    for engine in pool.engines:
        try:
            engine.sweep(owner.host)
        except EngineError:
            if engine.index == 0:
                raise
            log.warning("engine.sweep_failed", engine=engine.url)
    git_adapter.sweep_scratch()

    if batches is None:
        batches = plan_batches(
            plan.property_ids, [engine.slots for engine in pool.engines], pool.durations
        )
    if not batches:
        raise ValueError("run_sides needs at least one batch")
    run = _Run(
        plan=plan,
        sides=tuple(sides),
        pool=pool,
        owner=owner,
        progress=progress,
        keep_raw=keep_raw,
        single=len(batches) == 1,
        batches=len(batches),
    )
    interrupted = False
    exported = {side.name: (threading.Event(), threading.Event()) for side in sides}
    started: list[threading.Event] = []  # only threads that run can finish
    dispatcher: Dispatcher[DockerEngine] | None = None
    try:
        if plan.fixture is not None:
            run.fixture_copy = _copy_fixture(run, plan.fixture)
        if plan.jobs > 1 and plan.durations is not None:
            run.durations_copy = _copy_durations(run, plan.durations)
        if pool.volumes:
            run.probe_tar = write_tar(
                probe_package(), run.make_scratch("probe") / "probe.tar", arcname="orchestrator"
            )
        with terminate_as_interrupt():
            for side in sides:
                ready, finished = exported[side.name]
                thread = threading.Thread(
                    target=_export_side, args=(run, side, ready, finished), name=f"src-{side.name}"
                )
                # Started and counted as one step: a thread left out of `started` would
                # run on unwaited after the cleanup (and recreate what it removed).
                with interrupts.shielded():
                    thread.start()
                    started.append(finished)
            for ready, _ in exported.values():
                while not ready.wait(timeout=0.5):  # short waits: Ctrl-C acted on between
                    interrupts.checkpoint()
            dispatcher = _dispatcher(run, batches)
            if not run.cancelled.is_set():
                with interrupts.shielded():  # each engine thread started with its event
                    dispatcher.start()
                    started.extend(dispatcher.finished)
            for event in dispatcher.finished:
                while not event.wait(timeout=0.5):
                    interrupts.checkpoint()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        with _DeferredSignals(interrupted=interrupted) as deferred:
            engines_done = dispatcher.finished if dispatcher is not None else []
            if not all(event.is_set() for event in engines_done):
                run.cancelled.set()
                run.live.kill_all()
                for event in engines_done:
                    event.wait(timeout=60)
            run.done.set()
            for _, finished in exported.values():
                if finished in started:
                    finished.wait(timeout=60)
            run.live.remove_all()
            for folder in list(run.scratch):
                run.drop_scratch(folder)
        interrupted = interrupted or deferred.hits > 0
    if interrupted:
        raise Interrupted("interrupted; containers and sources removed")
    for side in sides:
        if side.name in run.failures:
            raise run.failures[side.name]
    assert dispatcher is not None
    dispatched = dispatcher.outcome() if dispatcher.finished else _not_dispatched(run, batches)
    outcome = _outcome(run, dispatched)
    broken = [side.name for side in sides if side.name in run.internal_errors]
    broken += [name for name in run.internal_errors if name not in broken]
    if broken:
        what, kept, reason = run.internal_errors[broken[0]]
        raise SideInternalError(
            internal_error_message(broken[0], what, kept, reason), outcome.labelled
        )
    return outcome


def _not_dispatched(run: _Run, batches: Sequence[Batch]) -> Dispatched:
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


def _dispatcher(run: _Run, batches: Sequence[Batch]) -> Dispatcher[DockerEngine]:
    pool = run.pool
    inputs = Inputs(
        trees=dict(run.trees),
        probe=probe_package(),
        fixture=run.fixture_copy,
        durations=run.durations_copy,
        tars=dict(run.tars),
        probe_tar=run.probe_tar,
    )

    @contextlib.contextmanager
    def prepare(engine: DockerEngine) -> Iterator[Staging]:
        if engine.index > 0:
            engine.hold_image(run.plan.image_id, pool.image_ref or run.plan.image_id, pool.first)
        with engine.staging(
            inputs, volumes=pool.volumes, owner=run.owner, image_id=run.plan.image_id
        ) as staging:
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


def _outcome(run: _Run, dispatched: Dispatched) -> SidesOutcome:
    """Labels per side and property in the selection's order, from every batch."""
    engines = run.pool.engines
    labelled: dict[str, dict[str, tuple[Replay, ...]]] = {side.name: {} for side in run.sides}
    runners: dict[str, str] = {}
    raw_dirs: dict[str, str] = {}
    decided_by: dict[int, int] = {}  # engine index -> properties it gave the labels of
    finals = sorted(dispatched.finals, key=lambda item: item[0].key)
    for batch, results in finals:
        engine = engines[batch.engine]
        batch_plan = replace(run.plan, property_ids=batch.property_ids, runner_id=engine.runner_id)
        per_side = _label_sides(batch_plan, run.sides, results)
        for side in run.sides:
            labelled[side.name].update(per_side[side.name])
        for property_id in per_side[run.sides[0].name]:
            runners[property_id] = engine.runner_id
            raw_dirs[property_id] = batch.raw_dir(single=run.single)
        decided_by[batch.engine] = decided_by.get(batch.engine, 0) + len(
            per_side[run.sides[0].name]
        )
    if run.plan.property_ids and len(finals) > 1:
        # The selection's order, whichever batch ran a property; a parametrization goes
        # where the function's id was named.
        position = {p: index for index, p in enumerate(run.plan.property_ids)}

        def rank(property_id: str) -> int:
            named = position.get(property_id, position.get(property_id.split("[", 1)[0]))
            return len(position) if named is None else named

        labelled = {
            side: {p: per_property[p] for p in sorted(per_property, key=rank)}
            for side, per_property in labelled.items()
        }
    attempts = tuple(
        AttemptRecord(
            batch=attempt.batch.key,
            engine=engines[attempt.batch.engine].url,
            runner_id=engines[attempt.batch.engine].runner_id,
            raw_dir=attempt.batch.raw_dir(single=run.single),
            labelled=_label_sides(
                replace(
                    run.plan,
                    property_ids=attempt.batch.property_ids,
                    runner_id=engines[attempt.batch.engine].runner_id,
                ),
                run.sides,
                attempt.results,
            ),
        )
        for attempt in dispatched.attempts
    )
    described = [
        {
            "url": engines[item.index].url,
            "runner_id": engines[item.index].runner_id,
            "slots": engines[item.index].slots,
            "status": item.status,
            "detail": item.detail,
            "batches": list(item.batches),
            "properties": decided_by.get(item.index, 0),
            "image_shipped": _shipped(engines[item.index]),
        }
        for item in dispatched.engines
    ]
    return SidesOutcome(
        labelled=labelled,
        runners=runners,
        raw_dirs=raw_dirs,
        attempts=attempts,
        engines=tuple(described),
    )


def _shipped(engine: DockerEngine) -> dict[str, Any] | None:
    shipped = engine.shipped
    if shipped is None:
        return None
    return {"bytes": shipped.bytes, "seconds": round(shipped.seconds, 3)}


def _label_sides(
    plan: ReplayPlan,
    sides: Sequence[SideSpec],
    results: Mapping[str, Sequence[tuple[ReplayFile, ContainerFacts]]],
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """Labels per side and property, with the image check across sides. Pure."""
    property_ids = plan.property_ids
    if not property_ids or plan.expand_parametrized:
        seen: dict[str, None] = {}
        for side in sides:
            for nodeid in nodeids_seen(replay_file for replay_file, _ in results[side.name]):
                seen.setdefault(nodeid, None)
        if property_ids:
            property_ids = expand_parametrized(property_ids, tuple(seen))
        else:
            property_ids = tuple(seen) or (NO_TEST_REPORTED,)
    observed_images = {
        facts.image_id
        for side in sides
        for _, facts in results[side.name]
        if facts.image_id is not None
    }
    mismatch = bool(observed_images) and observed_images != {plan.image_id}
    labelled: dict[str, dict[str, tuple[Replay, ...]]] = {}
    for side in sides:
        per_property = label_replays(results[side.name], property_ids, runner_id=plan.runner_id)
        if mismatch:
            per_property = mark_image_mismatch(per_property, plan.image_id, observed_images)
        labelled[side.name] = per_property
    return labelled


def new_run_id(now: float | None = None) -> str:
    """``YYYYmmddTHHMMSSZ-<6 hex>``: sortable, unique, safe in container names and paths."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return f"{stamp}-{os.urandom(3).hex()}"


# ---------------------------------------------------------------- collection

COLLECT_FILE = "collected.json"
COLLECT_PLUGIN = "orchestrator.probe.collect"


def collect_command(plan: ReplayPlan) -> list[str]:
    """``pytest --collect-only`` with the plugin that writes the node ids it found. Pure."""
    return [
        plan.interpreter or "python3",
        "-m",
        "pytest",
        "--collect-only",
        "-p",
        COLLECT_PLUGIN,
        *pytest_arguments(plan.pytest_args, ()),
    ]


def collected_selection(found: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The node ids to replay from each side's ``replay-collect/1`` document, first side
    first. A collector that failed on every side it appears on (a module that does not
    import), or skipped itself, is a property of its own, so that its failure (or skip) is
    decided, not lost. Pure."""
    items: dict[str, None] = {}
    for doc in found:
        for item in doc.get("items") or ():
            if isinstance(item, str):
                items.setdefault(item, None)
    for doc in found:
        # A module that skips itself on import has no items: it is a property of its own,
        # so that the skip is shown, not lost.
        for error in (*(doc.get("errors") or ()), *(doc.get("skipped") or ())):
            if not isinstance(error, str) or error in items:
                continue
            prefix = error.rstrip("/") + ("/" if not error.endswith(".py") else "::")
            if error and not any(item.startswith(prefix) for item in items):
                items.setdefault(error, None)
    return tuple(items)


def collect_tests(
    plan: ReplayPlan, sides: Sequence[SideSpec], *, pool: Pool, run_id: str
) -> tuple[str, ...]:
    """Every test the command collects on any side, in one container per side (both at
    once) on the pool's first engine (``pytest --collect-only``: nothing runs). What a
    run is cut from when no ``--property`` names its tests."""
    validate_plan(plan, sides)
    engine = pool.first
    if plan.interpreter is None:
        plan = replace(plan, interpreter=interpreter_of(engine.client, plan.image_id))
    # Only the first engine collects: bind mounts when it is this machine's.
    volumes = pool.volumes and not engine.url.startswith("unix://")
    owner = docker_adapter.Owner.current(run_id)
    cancelled = threading.Event()
    live = docker_adapter.LiveContainers()
    with contextlib.ExitStack() as stack:
        with interrupts.shielded():  # made and registered for removal as one step
            scratch = git_adapter.make_scratch("collect")
            stack.callback(git_adapter.remove_scratch, scratch)
        trees = {
            side.name: stack.enter_context(
                git_adapter.checkout(side.repo, side.rev, mutant=side.mutant, tests=side.tests)
            )
            for side in sides
        }
        fixture = None
        if plan.fixture is not None:
            fixture = private_fixture(scratch, read_input(plan.fixture))
        tars: dict[str, Path] = {}
        probe_tar = None
        if volumes:
            tars = {name: write_tar(tree, scratch / f"{name}.tar") for name, tree in trees.items()}
            probe_tar = write_tar(probe_package(), scratch / "probe.tar", arcname="orchestrator")
        inputs = Inputs(
            trees=trees, probe=probe_package(), fixture=fixture, tars=tars, probe_tar=probe_tar
        )
        staging = stack.enter_context(
            engine.staging(inputs, volumes=volumes, owner=owner, image_id=plan.image_id)
        )

        def collect(side: SideSpec) -> Mapping[str, Any] | None:
            pythonpath = side.pythonpath
            if pythonpath is None:
                pythonpath = tree_pythonpath(trees[side.name], plan.extra_pythonpath).entries
            environment = {
                **replay_environment(plan, pythonpath),
                # No driver makes HOME here: the tmpfs itself serves collection.
                "HOME": "/tmp",
                "TMPDIR": "/tmp",
                "REPLAY_COLLECT_OUT": f"{OUT}/{COLLECT_FILE}",
            }
            config = docker_adapter.container_config(
                image_id=plan.image_id,
                name=container_name(run_id, f"collect-{side.name}", 1),
                command=IDLE_COMMAND,
                mounts=staging.mounts(side.name),
                environment=environment,
                labels=owner.labels(side.name),
                limits=docker_adapter.Limits(memory=plan.memory, pids=plan.pids, cpus=plan.cpus),
                tmpfs={OUT: RESULTS_TMPFS},
            )
            tail = LineTail()
            with docker_adapter.Container(
                engine.client, config, live=live, cancelled=cancelled
            ) as container:
                facts, read = run_and_read(
                    container,
                    command=collect_command(plan),
                    on_line=tail,
                    deadline=time.monotonic() + side_deadline_s(plan, 1),
                    interpreter=plan.interpreter or "python3",
                )
            doc = _collected_doc(read)
            if doc is None:
                log.warning(
                    "collect.failed",
                    side=side.name,
                    exit_code=facts.exit_code,
                    results_problem=read.problem or read.unsafe.get(COLLECT_FILE),
                    output_tail=list(tail.lines)[-10:],
                )
            return doc

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
                found = [future.result() for future in running]
            except BaseException:
                cancelled.set()  # Ctrl-C or a failure: the other side stops at once
                live.kill_all()  # and a running collection ends now, not at its deadline
                raise
    return collected_selection([doc for doc in found if doc is not None])


def _collected_doc(read: ResultsRead) -> Mapping[str, Any] | None:
    """The ``replay-collect/1`` document that came back, if it is one."""
    raw = read.files.get(COLLECT_FILE)
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("items"), list) else None
