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
(:mod:`orchestrator.adapters.results`). Containers and folders are always
removed, also on a second Ctrl-C.

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
import re
import shutil
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import orchestrator
from orchestrator.adapters import docker as docker_adapter
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters.results import read_replay_files, replay_file_name
from orchestrator.core import replay_env
from orchestrator.core.labels import (
    ContainerFacts,
    ReplayFile,
    label_replays,
    mark_image_mismatch,
    nodeids_seen,
)
from orchestrator.core.pytest_command import expand_parametrized
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

if TYPE_CHECKING:
    from docker import DockerClient

    from orchestrator.core.test_files import SideOverlay

log = get_logger(__name__)

ISOLATIONS = ("side", "container")
NO_TEST_REPORTED = "<no test reported>"
INTERNAL_ERROR = "internal_error"  # the harness sub-reason of a side the tool itself broke
INTERNAL_ERROR_FILE = "internal-error.txt"  # its traceback, under keep_raw/<side>/
# Time for a container to start and the driver to import, on top of N x --timeout.
STARTUP_SLACK_S = 15.0
PER_REPLAY_SLACK_S = 2.0

SRC = "/src"
TREE = "/replay/tree"  # the read-only export, with writable_tree (copied to SRC per replay)
OUT = "/replay/out"
FIXTURE = "/replay/fixture.json"
DURATIONS = "/replay/durations.json"  # recorded durations, for splitting across workers
PROBE_ROOT = "/opt/orchestrator"

Progress = Callable[[str, int, int], None]

# The driver's progress line on the container's output (orchestrator/probe/driver.py).
PROGRESS_LINE = re.compile(r"^replay (\d+)/(\d+) (\S+)")


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

    The cache provider is off (the sources are read-only); the property node ids
    are appended.
    """
    return ("-p", "no:cacheprovider", *pytest_args, *property_ids)


def side_targets(plan: ReplayPlan, side: SideSpec) -> tuple[str, ...]:
    """The node ids (or paths) handed to pytest on one side. Pure."""
    return side.targets or plan.property_ids


def driver_command(
    plan: ReplayPlan, replays: int, property_ids: Sequence[str] | None = None
) -> list[str]:
    """The container's command: the probe driver, N replays of the pytest arguments
    (``property_ids``: the side's own, default the plan's), HOME made in the tmpfs (and,
    with ``writable_tree``, a fresh copy of the tree before each replay). Pure."""
    made = [arg for folder in replay_env.MADE_DIRS for arg in ("--make-dir", folder)]
    copy = ["--copy-tree", f"{TREE}:{SRC}"] if plan.writable_tree else []
    return [
        plan.interpreter or "python3",
        "-m",
        "orchestrator.probe.replay",
        "--replays",
        str(replays),
        "--timeout",
        f"{plan.timeout_s:g}",
        "--out",
        OUT,
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
    from orchestrator.core.project_image import interpreter_from_labels

    try:
        labels = docker_adapter.resolve_image(client, image_id).labels
    except EngineError:
        labels = {}
    return interpreter_from_labels(labels)


def writable_tree_tmpfs(tree: Path) -> str:
    """Options of the tmpfs the tree is copied into: room for two copies, owned by the
    runner user (uid 1000), executable (suites run scripts of their tree)."""
    size = 0
    for folder, _dirs, names in os.walk(tree):
        for name in names:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(folder, name)).st_size
    megabytes = max(64, (2 * size) // (1024 * 1024) + 32)
    return f"rw,nosuid,nodev,exec,size={megabytes}m,uid=1000,gid=1000,mode=0755"


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
        self.hits += 1
        log.warning("interrupt.deferred", detail="removing containers and sources first")

    def __enter__(self) -> _DeferredSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        leaving = self.interrupted or self.hits > 0
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if leaving else previous)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While sides run, SIGTERM (a CI cancelling the job) cleans up like Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class _Run:
    """Shared state of one replay_sides call."""

    plan: ReplayPlan
    client: DockerClient
    owner: docker_adapter.Owner
    progress: Progress | None
    keep_raw: Path | None
    cancelled: threading.Event = field(default_factory=threading.Event)
    live: docker_adapter.LiveContainers = field(default_factory=docker_adapter.LiveContainers)
    fixture_copy: Path | None = None
    durations_copy: Path | None = None
    scratch: list[Path] = field(default_factory=list)
    # Written by the side threads, read after they finished.
    failures: dict[str, OrchestratorError] = field(default_factory=dict)
    internal_errors: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    scratch_lock: threading.Lock = field(default_factory=threading.Lock)

    def make_scratch(self, purpose: str) -> Path:
        folder = git_adapter.make_scratch(purpose)
        with self.scratch_lock:
            self.scratch.append(folder)
        return folder

    def drop_scratch(self, folder: Path) -> None:
        git_adapter.remove_scratch(folder)
        with self.scratch_lock:
            if folder in self.scratch:
                self.scratch.remove(folder)


def _run_container(
    run: _Run,
    side: SideSpec,
    tree: Path,
    unit_index: int,
    numbers: tuple[int, ...],
    *,
    pythonpath: Sequence[str],
) -> list[tuple[ReplayFile, ContainerFacts]]:
    """One container's life: create, start, follow, wait to our deadline, remove; then
    read the results it left."""
    plan = run.plan
    out_dir = run.make_scratch("out")
    try:
        out_dir.chmod(0o777)  # written by the container's uid 1000
        tmpfs = {SRC: writable_tree_tmpfs(tree)} if plan.writable_tree else {}
        mounts = [
            docker_adapter.Mount(source=tree, target=TREE if plan.writable_tree else SRC),
            docker_adapter.Mount(
                source=Path(orchestrator.__file__).parent, target=f"{PROBE_ROOT}/orchestrator"
            ),
            docker_adapter.Mount(source=out_dir, target=OUT, read_only=False),
        ]
        if run.fixture_copy is not None:
            mounts.append(docker_adapter.Mount(source=run.fixture_copy, target=FIXTURE))
        if run.durations_copy is not None:
            mounts.append(docker_adapter.Mount(source=run.durations_copy, target=DURATIONS))
        config = docker_adapter.container_config(
            image_id=plan.image_id,
            name=container_name(run.owner.run_id, side.name, unit_index),
            command=driver_command(plan, len(numbers), side_targets(plan, side)),
            mounts=mounts,
            environment=replay_environment(plan, pythonpath),
            labels=run.owner.labels(side.name),
            limits=docker_adapter.Limits(memory=plan.memory, pids=plan.pids, cpus=plan.cpus),
            tmpfs=tmpfs,
        )
        tail = LineTail()
        try:
            facts = _observe(run, side.name, config, numbers, tail)
        except docker_adapter.Cancelled:
            facts = ContainerFacts(cancelled=True, message="interrupted before start")
        except EngineError as error:
            facts = ContainerFacts(engine_error=error.reason, message=error.message)
        if facts.engine_error or facts.oom_killed or (facts.exit_code or 0) != 0:
            log.info(
                "container.facts",
                side=side.name,
                exit_code=facts.exit_code,
                oom_killed=facts.oom_killed,
                engine_error=facts.engine_error,
                killed_at_deadline=facts.killed_at_deadline,
                output_tail=list(tail.lines)[-10:],
            )
        files = read_replay_files(out_dir, len(numbers))
        if run.keep_raw is not None:
            _keep_raw(out_dir, run.keep_raw / side.name, numbers)
        # Renumber: with one container per replay, each writes its own replay-001.json.
        return [
            (replace(replay_file, replay=number), facts)
            for replay_file, number in zip(files, numbers, strict=True)
        ]
    finally:
        run.drop_scratch(out_dir)


def _observe(
    run: _Run,
    side: str,
    config: Mapping[str, Any],
    numbers: tuple[int, ...],
    tail: Callable[[str], None],
) -> ContainerFacts:
    """Run one container to its end (or our deadline) and return the engine's facts."""
    entered = time.monotonic()
    with docker_adapter.Container(
        run.client, config, live=run.live, cancelled=run.cancelled
    ) as container:
        started = time.monotonic()
        container.follow_logs(_line_handler(run, side, numbers, tail))
        exit_ = container.wait(deadline=started + side_deadline_s(run.plan, len(numbers)))
        exited = time.monotonic()
        facts = container.facts(exit_)
        log.debug(
            "container.timing",
            side=side,
            create_start_ms=round((started - entered) * 1000),
            run_ms=round((exited - started) * 1000),
            inspect_ms=round((time.monotonic() - exited) * 1000),
        )
    return facts


class LineTail:
    """The last lines a container printed, for diagnostics on a harness error."""

    def __init__(self, keep: int = 40) -> None:
        self.lines: deque[str] = deque(maxlen=keep)

    def __call__(self, line: str) -> None:
        self.lines.append(line)


def _line_handler(
    run: _Run, side: str, numbers: tuple[int, ...], tail: Callable[[str], None]
) -> Callable[[str], None]:
    def handle(line: str) -> None:
        tail(line)
        match = PROGRESS_LINE.match(line.strip())
        if match and run.progress is not None:
            done_in_unit = int(match.group(1))
            if 1 <= done_in_unit <= len(numbers):
                run.progress(side, numbers[done_in_unit - 1], run.plan.replays)

    return handle


def _keep_raw(out_dir: Path, dest: Path, numbers: tuple[int, ...]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for index, number in enumerate(numbers, start=1):
        source = out_dir / replay_file_name(index)
        if source.is_file():
            shutil.copyfile(source, dest / replay_file_name(number))


def _run_side(
    run: _Run,
    side: SideSpec,
    results: dict[str, list[tuple[ReplayFile, ContainerFacts]]],
    finished: threading.Event,
) -> None:
    """Export the side's sources (in parallel with the other sides), then run its containers."""
    try:
        _run_side_inner(run, side, results)
    finally:
        finished.set()  # only after the sources are removed


def _run_side_inner(
    run: _Run,
    side: SideSpec,
    results: dict[str, list[tuple[ReplayFile, ContainerFacts]]],
) -> None:
    observed: list[tuple[ReplayFile, ContainerFacts]] = []
    try:
        with git_adapter.checkout(
            side.repo, side.rev, mutant=side.mutant, tests=side.tests
        ) as tree:
            pythonpath = side.pythonpath
            if pythonpath is None:
                pythonpath = tree_pythonpath(tree, run.plan.extra_pythonpath).entries
            for unit_index, numbers in enumerate(container_units(run.plan), start=1):
                if run.cancelled.is_set():
                    facts = ContainerFacts(cancelled=True, message="interrupted before start")
                    observed.extend((ReplayFile(replay=n, state="missing"), facts) for n in numbers)
                    continue
                observed.extend(
                    _run_container(run, side, tree, unit_index, numbers, pythonpath=pythonpath)
                )
    except EngineError as error:  # the engine failed us outside a container's life
        log.error("side.failed", side=side.name, reason=error.reason, error=error.message)
        _fill_missing(
            run, observed, ContainerFacts(engine_error=error.reason, message=error.message)
        )
    except OrchestratorError as error:
        # Bad input (a mutant that does not apply: exit 2) or git failing on good input
        # (exit 3): no label, the run ends with this error once everything is removed.
        run.failures[side.name] = error
        run.cancelled.set()
    except Exception as error:  # the tool's own fault: never an engine label, never silent
        what = f"{type(error).__name__}: {one_line(error)}"
        kept = _keep_traceback(run, side.name, traceback.format_exc())
        log.error("side.internal_error", side=side.name, error=what, traceback_file=kept)
        run.internal_errors[side.name] = (what, kept)
        _fill_missing(run, observed, ContainerFacts(engine_error=INTERNAL_ERROR, message=what))
        run.cancelled.set()  # the run ends in InternalError: stop the other sides early
    results[side.name] = observed


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


def _keep_traceback(run: _Run, side: str, text: str) -> str | None:
    """Write a side's traceback to ``keep_raw/<side>/internal-error.txt``; where it went.

    Without ``keep_raw``, or when that write fails too (the disk that broke the side
    may be full), the traceback goes to the log instead and ``None`` is returned.
    """
    if run.keep_raw is not None:
        path = run.keep_raw / side / INTERNAL_ERROR_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as error:
            log.warning("side.traceback_not_kept", side=side, path=str(path), error=str(error))
        else:
            return str(path)
    log.error("side.traceback", side=side, traceback=text)
    return None


def internal_error_message(side: str, what: str, kept: str | None) -> str:
    """The one line a run ends with when the tool itself broke one of its sides. Pure."""
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
    copy = run.make_scratch("fixture") / "fixture.json"
    try:
        shutil.copyfile(fixture, copy)
    except OSError as error:
        raise InputError(f"{fixture}: cannot read the fixture ({error.strerror})") from None
    copy.chmod(0o644)
    return copy


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
) -> dict[str, dict[str, tuple[Replay, ...]]]:
    """Side name -> property id -> one :class:`Replay` per replay.

    All sides run at the same time, each in hermetic containers from
    ``plan.image_id`` (never pulled). With no ``property_ids`` every test node id
    any replay reported is a property. ``keep_raw`` keeps a copy of each side's
    raw ``replay-<k>.json`` files under ``keep_raw/<side>/``. Containers and
    exported sources are always removed; a Ctrl-C raises :class:`Interrupted`
    after cleanup (a second Ctrl-C during cleanup is deferred, and from then on SIGINT
    and SIGTERM are ignored: the caller is on its way out).

    Engine failures are labels (``harness_error`` with the engine's reason). After
    cleanup, a side's bad input raises its :class:`InputError` (exit 2), git failing
    on good input its :class:`~orchestrator.errors.GitError` (exit 3), and any other
    failure of a side :class:`SideInternalError` (exit 3), its traceback kept under
    ``keep_raw/<side>/internal-error.txt``.
    """
    validate_plan(plan, sides)
    if client is None:
        client = docker_adapter.connect(os.environ)
    if plan.interpreter is None:
        plan = replace(plan, interpreter=interpreter_of(client, plan.image_id))
    run_id = run_id or new_run_id()
    owner = docker_adapter.Owner.current(run_id)
    docker_adapter.sweep_leftovers(client, host=owner.host)
    git_adapter.sweep_scratch(docker_adapter.pid_alive)

    run = _Run(
        plan=plan,
        client=client,
        owner=owner,
        progress=progress,
        keep_raw=keep_raw,
    )
    results: dict[str, list[tuple[ReplayFile, ContainerFacts]]] = {}
    interrupted = False
    # Completion is tracked with events, not Thread.join: a join interrupted by Ctrl-C can
    # leave the thread looking finished while it still cleans up (CPython bpo-45274).
    finished = {side.name: threading.Event() for side in sides}
    started: list[threading.Event] = []  # only sides whose thread runs can finish
    try:
        if plan.fixture is not None:
            run.fixture_copy = _copy_fixture(run, plan.fixture)
        if plan.jobs > 1 and plan.durations is not None:
            run.durations_copy = _copy_durations(run, plan.durations)
        with _terminate_as_interrupt():
            for side in sides:
                threading.Thread(
                    target=_run_side,
                    args=(run, side, results, finished[side.name]),
                    name=f"side-{side.name}",
                ).start()
                started.append(finished[side.name])
            for event in started:
                while not event.wait(timeout=0.5):  # short waits keep Ctrl-C deliverable
                    pass
    except KeyboardInterrupt:
        interrupted = True
    finally:
        with _DeferredSignals(interrupted=interrupted) as deferred:
            if not all(event.is_set() for event in started):
                run.cancelled.set()
                run.live.kill_all()
                for event in started:
                    event.wait(timeout=60)
            run.live.remove_all()
            for folder in list(run.scratch):
                run.drop_scratch(folder)
        interrupted = interrupted or deferred.hits > 0
    if interrupted:
        raise Interrupted("interrupted; containers and sources removed")
    for side in sides:
        if side.name in run.failures:
            raise run.failures[side.name]
    labelled = _label_sides(plan, sides, results)
    for side in sides:
        if side.name in run.internal_errors:
            what, kept = run.internal_errors[side.name]
            raise SideInternalError(internal_error_message(side.name, what, kept), labelled)
    return labelled


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
