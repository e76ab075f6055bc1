"""The one way a side's container runs, on any engine: the seam between a side's plan
and the place its containers run.

- :class:`~orchestrator.services.sides.exports.Exports` holds what the containers mount
  from this machine (the exported trees, their tars, the inputs' private copies) for as
  long as they need it, each tree exported once, and always removes it (unless ``keep``).
- :class:`~orchestrator.core.backend.SideJob` is one container, described without
  naming an engine: the pinned image, the mounts, only the replay's environment, the
  limits, the capped tmpfs folders. :func:`side_job` is its one builder (replay,
  screening, collection, ``reproduce``, ``shrink`` and ``serve`` use it).
- :class:`SideRun` is a job's container run, on any backend: started on enter, removed
  on exit (also on Ctrl-C); :meth:`SideRun.drive` runs a command and reads its results
  back (:func:`run_and_read`: the driver's run, then :func:`read_back` through
  :mod:`orchestrator.adapters.results`, with the engine's facts);
  :meth:`SideRun.read_announced` reads the results of a command that still runs (serve's
  driver) through the same reader, taken only as announced. Every side's container goes
  through it; what varies is the command and the reader.

A backend is :class:`~orchestrator.core.backend.Backend` (the seam, with the values
that cross it); the pool hands them out (:mod:`orchestrator.services.sides.pool`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from orchestrator import interrupts
from orchestrator.adapters import git as git_adapter
from orchestrator.adapters import tree_files
from orchestrator.adapters.results import (
    READER_USER,
    REAP_S,
    ResultsRead,
    checked_against,
    emptier_command,
    read_results_stream,
    reader_command,
    reaper_command,
    status_line,
)
from orchestrator.core import replay_env
from orchestrator.core.backend import (
    Backend,
    Exit,
    Limits,
    LiveContainers,
    Mount,
    SideContainer,
    SideJob,
)
from orchestrator.core.bounded_lines import BoundedLines
from orchestrator.core.bounds import FileKind
from orchestrator.core.labels import ContainerFacts
from orchestrator.core.reproduce import IDLE_COMMAND
from orchestrator.core.result_files import announcement, full_announcement
from orchestrator.core.side_spec import (
    DURATIONS,
    FIXTURE,
    OUT,
    PROBE_ROOT,
    RESULTS_TMPFS,
    SRC,
    TREE,
    ReplayPlan,
    SideSpec,
    check_plan,
    replay_environment,
)
from orchestrator.core.tree_files import Refusal
from orchestrator.errors import EngineError, InputError
from orchestrator.log import get_logger
from orchestrator.services.sides.pool import probe_package

log = get_logger(__name__)

# Reading a results folder back: a tmpfs of a few MiB, one small process.
READ_BACK_S = 60.0
READ_ATTEMPTS = 3  # the reader's stream, asked for while the engine loses it


# ---------------------------------------------------------------- the seam


class SideRun:
    """One side's container, run (a context manager): the one way every side's container
    goes (a replay's batch, collection, ``reproduce``, ``serve``).

    On enter the container is made from ``job`` on ``backend`` and started (never once
    ``cancelled`` is set; listed in ``live`` meanwhile); on exit it is killed and removed,
    also on Ctrl-C, unless ``keep`` (``reproduce --keep``) or :meth:`detach` (a container
    kept for the second phase). In between, what varies is the command and the reader:
    :meth:`drive` runs a command and reads its results back through the guarded reader;
    a caller that runs its own reads back with :meth:`read` (a terminal, once it ended)
    or :meth:`read_announced` (the serve driver's results, after each job, while it runs).
    """

    def __init__(
        self,
        backend: Backend,
        job: SideJob,
        *,
        live: LiveContainers | None = None,
        cancelled: threading.Event | None = None,
        keep: bool = False,
    ) -> None:
        self.job = job
        self._made = backend.container(job, live=live, cancelled=cancelled, keep=keep)
        self._stack = contextlib.ExitStack()
        self._container: SideContainer | None = None

    def __enter__(self) -> SideRun:
        # Started and registered for removal as one step (as a ``with`` statement does):
        # a signal in between would leave a running container nothing removes until the
        # next run's sweep. One that came meanwhile is raised here, and removes it.
        try:
            with interrupts.shielded():
                self._container = self._stack.enter_context(self._made)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stack.close()

    @property
    def container(self) -> SideContainer:
        if self._container is None:
            raise RuntimeError("use the side's run as a context manager")
        return self._container

    def drive(
        self,
        command: Sequence[str],
        *,
        on_line: Callable[[str], None],
        deadline: float,
        interpreter: str,
        out: str = OUT,
        environment: Mapping[str, str] | None = None,
        keep: str | None = None,
        announced: bool = False,
    ) -> tuple[ContainerFacts, ResultsRead]:
        """``command`` run in the container and its results read back (:func:`run_and_read`)."""
        return run_and_read(
            self.container,
            command=command,
            on_line=on_line,
            deadline=deadline,
            interpreter=interpreter,
            out=out,
            environment=environment,
            keep=keep,
            announced=announced,
        )

    def read(
        self, exit_: Exit, *, interpreter: str, out: str = OUT
    ) -> tuple[ContainerFacts, ResultsRead]:
        """The results a command the caller ran left, read back (:func:`read_back`)."""
        return read_back(self.container, exit_, interpreter=interpreter, out=out)

    def read_announced(
        self,
        *,
        interpreter: str,
        out: str,
        announced: Mapping[str, AbstractSet[str]],
        full: AbstractSet[str] = frozenset(),
    ) -> ResultsRead:
        """The announced results of a command that still runs (:func:`read_announced`)."""
        return read_announced(
            self.container, interpreter=interpreter, out=out, announced=announced, full=full
        )

    def detach(self) -> Callable[[], None]:
        """The container outlives the block: the caller owns its removal from here (the
        returned call, idempotent)."""
        removal = self._stack.pop_all()
        return removal.close


def read_back(
    container: SideContainer,
    exit_: Exit,
    *,
    interpreter: str,
    out: str = OUT,
    keep: str | None = None,
) -> tuple[ContainerFacts, ResultsRead]:
    """The engine's facts about the container and the results its command left.

    While the container still runs (also past our deadline, before it is killed) the
    results folder is read back in it, in two steps (three for a kept container): a
    reaper, as the container's user, kills every process but the container's init and
    idle process (what the tree left behind, and a driver still running at the
    deadline); then the reader, as another user (:data:`READER_USER`: no process of the
    tree could reach its output even if one survived), checks that none did and
    streams the results (:mod:`orchestrator.adapters.results`); with ``keep`` (a pattern
    of names) an emptier, as the container's user, then empties the folder but for
    those. A container that ended by itself (its init killed from inside, or OOM) has
    nothing to read and its own exit code is the command's. An OOM kill counts whether
    the engine saw it or the container's memory cgroup did. ``out``: the results folder
    the command wrote to."""
    facts, running = container.settled(exit_)
    read = ResultsRead()
    status = exit_.status_code
    if not exit_.cancelled and running:
        chunks, _ = container.exec_chunks(
            reaper_command(interpreter),
            deadline=time.monotonic() + REAP_S + READ_BACK_S,
            workdir="/",
        )
        reaped = status_line(chunks)  # the reader checks for itself; this is for the log
        read = read_stream_back(container, interpreter=interpreter, out=out)
        if read.problem:  # the container may have ended under the reader: why counts
            log.info(
                "results.refused", container=container.name, problem=read.problem, reaper=reaped
            )
            after = container.ended(exit_)
            if after.engine_error:  # its end, not the stream it cut short, is the result
                facts, read = after, ResultsRead()
        elif keep is not None:
            chunks, _ = container.exec_chunks(
                emptier_command(interpreter, out, keep),
                deadline=time.monotonic() + READ_BACK_S,
                workdir="/",
            )
            read = replace(read, emptied=status_line(chunks) == "emptied")
    else:
        status = facts.exit_code
    oom = facts.oom_killed or bool(read.oom_kill)
    return replace(facts, exit_code=status, oom_killed=oom), read


def read_announced(
    container: SideContainer,
    *,
    interpreter: str,
    out: str,
    announced: Mapping[str, AbstractSet[str]],
    full: AbstractSet[str] = frozenset(),
) -> ResultsRead:
    """The result files a command that still runs (the serve driver, between its jobs)
    left in ``out`` and announced (name -> digests; ``full``: the names it had no room
    for): the reader's stream of that folder, as :data:`READER_USER`, each replay file
    taken only when its bytes are the one version announced
    (:func:`~orchestrator.adapters.results.checked_against`). No reaper runs, and live
    processes do not make the reader refuse the folder (the driver lives on): the
    announcement is what tells the driver's bytes from another process's."""
    read = read_stream_back(container, interpreter=interpreter, out=out, processes=False)
    return checked_against(read, announced, full)


def read_stream_back(
    container: SideContainer, *, interpreter: str, out: str, processes: bool = True
) -> ResultsRead:
    """The reader's stream of the results folder, asked for again (up to
    ``READ_ATTEMPTS`` times) while it comes back as no tar at all: the engine sometimes
    loses a short exec's output (moby/moby#27289), and the reader only reads, so asking
    again changes nothing in the container. With ``processes`` the folder is refused
    when a process other than the container's init and idle one is alive."""
    read = ResultsRead()
    for attempt in range(1, READ_ATTEMPTS + 1):
        chunks, exit_code = container.exec_chunks(
            reader_command(interpreter, out, processes=processes),
            deadline=time.monotonic() + READ_BACK_S,
            user=READER_USER,
            workdir="/",
        )
        read = read_results_stream(chunks)
        if not read.unreadable:
            return read
        try:
            code = exit_code()
        except EngineError:  # the container ended under the reader: the caller asks why
            return read
        log.info(
            "results.reread", container=container.name, problem=read.problem,
            reader_exit_code=code, attempt=attempt,
        )  # fmt: skip
    return read


def run_and_read(  # noqa: PLR0913 - one keyword per part of a side's run
    container: SideContainer,
    *,
    command: Sequence[str],
    on_line: Callable[[str], None],
    deadline: float,
    interpreter: str,
    out: str = OUT,
    environment: Mapping[str, str] | None = None,
    keep: str | None = None,
    announced: bool = False,
) -> tuple[ContainerFacts, ResultsRead]:
    """The one way a side's command runs: an exec in the idling container (``environment``
    added to the container's), its output line by line (each line capped) to ``on_line``,
    left running at ``deadline`` so that :func:`read_back` still finds its results (in
    ``out``, where the command wrote them; ``keep``: see there). With ``announced`` (the
    command is the replay driver) a replay file is taken only when the driver's output
    announced exactly its bytes (:func:`~orchestrator.core.result_files.announcement`):
    one a leftover process rewrote after the driver is refused."""
    lines = BoundedLines(_announcements(on_line, said := Announced()))
    exit_ = container.exec_stream(
        command,
        environment=environment or {},
        on_output=lines.feed,
        deadline=deadline,
        kill_at_deadline=False,
    )
    lines.close()
    facts, read = read_back(container, exit_, interpreter=interpreter, out=out, keep=keep)
    if not announced:
        return facts, read
    return facts, checked_against(read, said.snapshot(), said.full())


class Announced:
    """The digests a driver announced for each result file (several threads feed it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._said: dict[str, set[str]] = {}
        self._full: set[str] = set()

    def add_full(self, name: str) -> None:
        with self._lock:
            self._full.add(name)

    def full(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._full)

    def add(self, name: str, digest: str) -> None:
        with self._lock:
            said = self._said.setdefault(name, set())
            if len(said) < 2:  # two already make the file refused
                said.add(digest)

    def snapshot(self) -> dict[str, frozenset[str]]:
        with self._lock:
            return {name: frozenset(digests) for name, digests in self._said.items()}


def _announcements(on_line: Callable[[str], None], said: Announced) -> Callable[[str], None]:
    def take(line: str) -> None:
        found = announcement(line)
        full = full_announcement(line) if found is None else None
        if found is not None:
            said.add(*found)
        elif full is not None:
            said.add_full(full)
        else:
            on_line(line)

    return take


class LineTail:
    """The last lines a container printed, for diagnostics on a harness error."""

    def __init__(self, keep: int = 40) -> None:
        self.lines: deque[str] = deque(maxlen=keep)

    def __call__(self, line: str) -> None:
        self.lines.append(line)


# ---------------------------------------------------------------- the job


def plan_limits(plan: ReplayPlan) -> Limits:
    return Limits(memory=plan.memory, pids=plan.pids, cpus=plan.cpus, tmp_size=plan.tmp_size)


def writable_tree_tmpfs(tree: Path) -> str:
    """Options of the tmpfs the tree is copied into: room for two copies, writable by the
    container's user (sticky and world-writable rather than ``uid=1000``: Podman refuses a
    tmpfs uid option, and a project image may run as another user), executable (suites
    run scripts of their tree)."""
    # From blocks, not st_size: what the files really take (walked without following).
    size = tree_files.tree_usage(tree).disk_bytes
    megabytes = max(64, (2 * size) // (1024 * 1024) + 32)
    return f"rw,nosuid,nodev,exec,size={megabytes}m,mode=1777"


def side_mounts(
    tree: Path,
    fixture_copy: Path | None,
    *,
    writable_tree: bool = False,
    durations_copy: Path | None = None,
) -> list[Mount]:
    """What a side's container sees through bind mounts, all read-only: its tree at SRC
    (with ``writable_tree`` at TREE, copied to SRC per replay), the probe beside it, the
    fixture and the recorded durations. Results go to a tmpfs (:data:`OUT`)."""
    mounts = [
        Mount(source=tree, target=TREE if writable_tree else SRC),
        Mount(source=probe_package(), target=f"{PROBE_ROOT}/orchestrator"),
    ]
    if fixture_copy is not None:
        mounts.append(Mount(source=fixture_copy, target=FIXTURE))
    if durations_copy is not None:
        mounts.append(Mount(source=durations_copy, target=DURATIONS))
    return mounts


def side_job(
    plan: ReplayPlan,
    *,
    name: str,
    labels: Mapping[str, str],
    mounts: Sequence[Mount],
    tree: Path,
    pythonpath: Sequence[str],
    environment: Mapping[str, str] | None = None,
    command: Sequence[str] = IDLE_COMMAND,
) -> SideJob:
    """The one builder of a side's container: the pinned image, ``mounts``, only the
    replay's environment (``pythonpath``: the side's import roots; ``environment``: the
    whole of it instead), the plan's limits, no network, and capped tmpfs folders: the
    results folder and, with ``writable_tree``, the one ``tree`` is copied into."""
    tmpfs = {OUT: RESULTS_TMPFS}
    if plan.writable_tree:
        tmpfs[SRC] = writable_tree_tmpfs(tree)
    return SideJob(
        name=name,
        image_id=plan.image_id,
        mounts=tuple(mounts),
        environment=dict(
            replay_environment(plan, pythonpath) if environment is None else environment
        ),
        labels=dict(labels),
        limits=plan_limits(plan),
        tmpfs=tmpfs,
        command=tuple(command),
    )


def validate_plan(plan: ReplayPlan, sides: Sequence[SideSpec]) -> None:
    check_plan(plan, sides)
    if plan.fixture is not None and not plan.fixture.is_file():
        raise InputError(f"{plan.fixture}: no such fixture file")


def interpreter_of(backend: Backend, image_id: str) -> str:
    """The driver's interpreter for an image: its label's venv python, else python3. An
    image the engine cannot show is left to the containers to report (as their labels)."""
    try:
        labels = backend.resolve_image(image_id).labels
    except EngineError:
        labels = {}
    return replay_env.interpreter_from_labels(labels)


def tree_pythonpath(tree: Path, extra: Sequence[str] = ()) -> replay_env.SidePath:
    """A side's import roots, found in its exported tree through the guarded reader
    (:mod:`orchestrator.adapters.tree_files`): a configuration file or a ``src/`` entry
    that is a symbolic link (or on the way through one), a FIFO, a device or a folder is
    absent here, with a warning; one over the read cap is exit 2. The same rule as
    :func:`planned_pythonpath`, which reads the revision instead."""
    files: dict[str, bytes | None] = {}
    for name in replay_env.INI_FILES:
        files[name] = _tree_file(tree, name)
    src_paths: list[str] = []
    for entry in _tree_dir(tree, replay_env.SRC):
        path = f"{replay_env.SRC}/{entry.name}"
        if entry.kind is FileKind.REGULAR:
            src_paths.append(path)
        elif entry.kind is FileKind.DIRECTORY and _is_regular(tree, f"{path}/__init__.py"):
            src_paths.append(f"{path}/__init__.py")
        elif entry.kind is FileKind.SYMLINK:
            _refused(path, f"{path}: {Refusal.LINK}")
    return replay_env.side_pythonpath(files, src_paths, extra)


def _tree_file(tree: Path, path: str) -> bytes | None:
    try:
        return tree_files.read_tree_file(tree, path)
    except tree_files.TreeFileRefused as refused:
        if refused.refusal in (Refusal.SIZE, Refusal.PATH):
            raise  # exit 2, naming the file and the cap
        _refused(refused.path, refused.message)
        return None


def _tree_dir(tree: Path, path: str) -> tuple[tree_files.Entry, ...]:
    try:
        return tree_files.list_tree_dir(tree, path) or ()
    except tree_files.TreeFileRefused as refused:
        _refused(refused.path, refused.message)
        return ()


def _is_regular(tree: Path, path: str) -> bool:
    try:
        entry = tree_files.tree_entry(tree, path)
    except tree_files.TreeFileRefused as refused:
        _refused(refused.path, refused.message)
        return False
    if entry is not None and entry.kind is not FileKind.REGULAR:
        _refused(path, f"{path}: a {entry.kind}, not a regular file")
    return entry is not None and entry.kind is FileKind.REGULAR


def _refused(path: str, why: str) -> None:
    """A file of the tree the import roots do without: said in the log."""
    log.warning("tree.file_refused", path=path, why=why)


def import_roots(plan: ReplayPlan, side: SideSpec, tree: Path) -> tuple[str, ...]:
    """The side's import roots: its own, else those found in its exported tree."""
    if side.pythonpath is not None:
        return side.pythonpath
    return tree_pythonpath(tree, plan.extra_pythonpath).entries


def planned_pythonpath(repo: Path, rev: str, extra: Sequence[str] = ()) -> replay_env.SidePath:
    """A side's import roots, read at its revision (before anything is exported): only
    regular files count, as in :func:`tree_pythonpath` (a linked ``pyproject.toml`` is
    absent); a configuration file over the read cap is exit 2."""
    files, others = git_adapter.read_regular_files(repo, rev, replay_env.INI_FILES)
    for name, mode in sorted(others.items()):
        log.warning("tree.file_refused", path=name, rev=rev, why=f"{name}: mode {mode}")
    src_paths = git_adapter.list_paths(repo, rev, replay_env.SRC)
    return replay_env.side_pythonpath(files, src_paths, extra)
