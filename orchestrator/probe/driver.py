"""The in-container replay driver: N fresh pytest processes, one after another.

Started through its small entry module (which pins PYTHONHASHSEED first, see there):

    python -m orchestrator.probe.replay --replays N --timeout SECONDS --out DIR [--seed S] \
        [--spawn fork|exec] -- <pytest args>

Each replay is a new process in its own process group, so one container start pays for
N independent replays. How the process is made (`--spawn`):

- fork (default): the driver imports pytest and the probe plugin once, then forks one
  child per replay, which runs `pytest.main(<pytest args>)` with fresh pytest session
  state and exits. Nothing of the project under test (conftest files, test modules,
  rootdir collection) is ever imported in the driver, so every replay imports the
  user's code afresh; what a replay's tests do to module state dies with its process.
  The driver runs with PYTHONHASHSEED pinned to the seed (`orchestrator.probe.replay`
  re-executes the interpreter once when it is not), so every child hashes strings the
  same way. The code pytest's assertion rewriting makes of a module is kept for the later
  replays (`orchestrator/probe/rewrite_cache.py`, in DIR/.rewritten/, removed at the end):
  the module is still imported afresh by each, not rewritten again.
- exec: a new interpreter per replay (`python -m pytest ...`), about 0.15 s more per
  replay (interpreter start and the import of pytest).

Before each replay (and outside its measured time) the driver creates every `--make-dir`
that is missing (HOME, in the container's /tmp; like /tmp it is shared by the replays of
one container, as a machine's are by test runs); with `--copy-tree FROM:TO` it empties TO
and copies FROM's contents into it, so a suite that writes into its tree gets a private
writable copy that no earlier replay touched.

A replay past its deadline has its whole group killed and is recorded as `timeout`;
nothing inside the test body can write that status. For k = 1..N the driver writes
DIR/replay-<k:03d>.json (replay-run/1, with "spawn") atomically and prints
`replay <k>/<N> <status>`; DIR/driver.json (replay-driver/1) is written last. SIGTERM or
SIGINT kills the running replay's group, writes driver.json with "finished": false, and
exits 128 + signal.

While a replay runs, its probe writes `test <done>/<total> <outcome>` for each finished
test (orchestrator/probe/plugin.py) on a copy of the driver's standard output, passed as
$REPLAY_PROGRESS_FD: the replay's own output goes to its log, and pytest's capture only
redirects descriptors 1 and 2. Each line is one write shorter than PIPE_BUF, so lines of
concurrent workers do not interleave. Not with --attach (pytest's output is the stream
there) nor in serve mode.

With `--workers J` (J > 1) each replay is J pytest sessions at once, each collecting the
whole selection and running its share of whole modules (`orchestrator/probe/workers.py`);
the replay's result is the merge of theirs, and a worker that dies labels only its own
tests.

With `--attach` (`orchestrator reproduce`) a replay keeps the driver's standard input,
output and error instead of /dev/null and DIR/replay-<k>.log, so pytest's own output
streams out as it comes and `--pdb` can talk to the terminal; on a terminal the replay's
process group takes the foreground (a background group that reads it would be stopped,
and Ctrl-C is meant for pytest), and the driver takes it back after. The driver then
prints nothing of its own. It replays one session at a time (not with `--workers`).

Serve mode: one warm driver, many jobs
--------------------------------------

    python -m orchestrator.probe.replay --serve --jobs PATH --results PATH --out DIR \
        [--seed S] [--spawn fork|exec]

The driver imports pytest and the probe once (as above), then runs jobs as they
arrive, one at a time, each exactly like one replay: a fresh pytest session in a forked
child, in its own process group, killed at its deadline. It is how `orchestrator
shrink --test` runs hundreds of candidates in one warm container; any feature that
needs several pytest runs in one container can speak it.

- PATH for --jobs is read line by line: a FIFO, a pipe or a regular file ("-": standard
  input). Each line is one job, a JSON object (schema "replay-job/1"):

      {"schema": "replay-job/1", "id": "1.17", "pytest_args": ["-q", "tests/t.py::test_x"],
       "seed": 0, "fixture": "/replay/serve/candidate-17.json", "timeout_s": 30}

  "id" (a string) is echoed in the job's result; "pytest_args" (strings) go to pytest
  after `-p no:cacheprovider`; "fixture" is the JSON file the job's tests read as
  $REPLAY_FIXTURE (null: none, the variable is unset); "timeout_s" (a number > 0) is
  the job's deadline; "seed" (an integer; default --seed) is its REPLAY_SEED. Strings
  hash with PYTHONHASHSEED = --seed in a forked child (it is fixed when the driver
  starts), so a job whose seed hashes differently runs in a new interpreter instead
  ("spawn": "exec" in its result). Other keys are ignored. Blank lines are skipped.
- For each job, one line is written to --results ("-": standard output), flushed at
  once: the job's replay-run/1 document, as a replay file holds it, plus "job" (the
  job's id); its "replay" is the job's number in this driver (1, 2, ...). The pytest
  output of job n is DIR/job-<n:06d>.log. A progress line `job <n> <id> <status>`
  goes to standard error.
- Jobs share the container's /tmp, as the replays of one batch do. To keep a job cheap,
  the driver writes each probe result in the temp folder (a tmpfs in a container) and
  builds pytest's initial config (the plugin manager with the built-in plugins; nothing
  of the project) once per argument list; each forked job uses its own copy.
- End of the --jobs input ends the driver: DIR/driver.json ("replays": the number of
  jobs run, "finished": true), exit 0. A line that is not a valid job ends it too:
  driver.json says "finished": false with the "error", the error goes to standard
  error, exit 2 (the job's sender has a bug; nothing is guessed). A reader of --results
  that went away ends it with "finished": false and exit 1. SIGTERM or SIGINT: as above.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from types import FrameType, ModuleType
from typing import Any, BinaryIO, Final

from orchestrator.probe import DRIVER_SCHEMA, JOB_SCHEMA, PROBE_VERSION, RESULT_SCHEMA, RUN_SCHEMA
from orchestrator.probe.atomic import write_bytes_atomic, write_json_atomic

COMPLETED: Final = "completed"
TIMEOUT: Final = "timeout"
NO_RESULT: Final = "no_result"
CORRUPT_RESULT: Final = "corrupt_result"

FORK: Final = "fork"
EXEC: Final = "exec"
SPAWN_MODES: Final = (FORK, EXEC)

PLUGIN: Final = "orchestrator.probe.plugin"
DRIVER_MODULE: Final = "orchestrator.probe.replay"  # the entry module
FIXTURE_ENV: Final = "REPLAY_FIXTURE"
PROGRESS_FD_ENV: Final = "REPLAY_PROGRESS_FD"
STDIO: Final = "-"
# The package root, so the child finds the plugin whatever PYTHONPATH the caller set.
_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[2])
# A forked replay that died in the driver's own code before pytest ran (EX_SOFTWARE).
_CHILD_FAILED: Final = 70
_STOP_SIGNALS: Final = frozenset((signal.SIGTERM, signal.SIGINT))
# Imported lazily by every pytest session (the debugging plugin's configure imports pdb,
# the argument parser _argcomplete): importing them once in the driver saves each forked
# replay 10-20 ms. Standard library and pytest only, nothing of the project under test.
_WARM_MODULES: Final = (
    "pdb",
    "faulthandler",
    "_pytest._argcomplete",
    "_pytest.config.compat",
)


@dataclass(frozen=True, kw_only=True)
class DriverOptions:
    replays: int
    timeout_s: float
    out: Path
    seed: int
    pytest_args: tuple[str, ...]
    spawn: str = FORK
    workers: int = 1  # pytest sessions per replay, each running its share (probe/workers.py)
    make_dirs: tuple[Path, ...] = ()
    copy_tree: tuple[Path, Path] | None = None
    serve: bool = False
    jobs: str | None = None
    results: str | None = None
    attach: bool = False


@dataclass(frozen=True, kw_only=True)
class Job:
    """One pytest run: a replay of the batch mode, or one job of serve mode."""

    number: int  # k: the replay-<k> / job-<k> files, and "replay" in the run document
    pytest_args: tuple[str, ...]
    seed: int
    timeout_s: float
    fixture: str | None  # $REPLAY_FIXTURE of the run (None: unset)
    spawn: str
    job_id: str | None = None  # serve mode: the sender's id, echoed as "job"


class Terminated(Exception):
    """The driver received SIGTERM or SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


class BadJob(ValueError):
    """A serve-mode input line that is not a valid replay-job/1 document."""


def parse_args(argv: Sequence[str]) -> DriverOptions:
    args = list(argv)
    if "--" in args:
        split = args.index("--")
        own, pytest_args = args[:split], args[split + 1 :]
    else:
        own, pytest_args = args, []
    parser = argparse.ArgumentParser(
        prog=f"python -m {DRIVER_MODULE}",
        description="Run N fresh pytest replays under the replay probe, one after another "
        "(or, with --serve, one per job read from --jobs).",
        epilog="Everything after `--` is passed to pytest unchanged.",
    )
    parser.add_argument("--replays", type=_positive_int, help="number of replays")
    parser.add_argument("--timeout", type=_positive_float, help="deadline per replay, seconds")
    parser.add_argument("--out", type=Path, required=True, help="folder for the result files")
    parser.add_argument(
        "--seed", type=int, default=None, help="REPLAY_SEED for every replay (default: env or 0)"
    )
    parser.add_argument(
        "--spawn",
        choices=SPAWN_MODES,
        default=FORK,
        help="fork: a child of a driver that imported pytest once (default); "
        "exec: a new interpreter per replay",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="split each replay's tests by module across this many pytest sessions "
        "(default 1; see orchestrator/probe/workers.py)",
    )
    parser.add_argument(
        "--make-dir",
        type=Path,
        action="append",
        default=[],
        help="created before each replay when missing (repeatable)",
    )
    parser.add_argument(
        "--copy-tree",
        type=_copy_pair,
        default=None,
        metavar="FROM:TO",
        help="before each replay, empty TO and copy FROM's contents into it",
    )
    parser.add_argument(
        "--serve", action="store_true", help="run the jobs read from --jobs (see the docstring)"
    )
    parser.add_argument("--jobs", help="serve mode: where job lines come from (- for stdin)")
    parser.add_argument("--results", help="serve mode: where result lines go (- for stdout)")
    parser.add_argument(
        "--attach",
        action="store_true",
        help="each replay keeps the driver's stdin, stdout and stderr (no log file), "
        "and the terminal's foreground when there is one",
    )
    options = parser.parse_args(own)
    if options.serve and options.attach:
        parser.error("--attach goes with replays, not --serve")
    if options.attach and options.workers > 1:
        parser.error("--attach runs one pytest session per replay, not --workers")
    if options.serve:
        if options.jobs is None or options.results is None:
            parser.error("--serve needs --jobs and --results")
        if options.replays is not None or pytest_args:
            parser.error("--serve takes its pytest arguments from each job, not --replays/--")
    else:
        if options.jobs is not None or options.results is not None:
            parser.error("--jobs and --results go with --serve")
        if options.replays is None or options.timeout is None:
            parser.error("--replays and --timeout are required (or --serve)")
    seed = options.seed
    if seed is None:
        raw = os.environ.get("REPLAY_SEED", "").strip()
        try:
            seed = int(raw) if raw else 0
        except ValueError:
            parser.error(f"REPLAY_SEED must be an integer, got {raw!r}")
    return DriverOptions(
        replays=options.replays or 0,
        timeout_s=options.timeout or 0.0,
        out=options.out,
        seed=seed,
        pytest_args=tuple(pytest_args),
        spawn=options.spawn,
        workers=options.workers,
        make_dirs=tuple(options.make_dir),
        copy_tree=options.copy_tree,
        serve=options.serve,
        jobs=options.jobs,
        results=options.results,
        attach=options.attach,
    )


def _copy_pair(text: str) -> tuple[Path, Path]:
    source, sep, dest = text.partition(":")
    if not sep or not source or not dest:
        raise argparse.ArgumentTypeError(f"expected FROM:TO, got {text!r}")
    return Path(source), Path(dest)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def empty_dir(folder: Path) -> None:
    """Remove everything in ``folder`` (not the folder: it may be a mount point)."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


def copy_contents(source: Path, dest: Path) -> None:
    """Copy what ``source`` holds into the empty ``dest`` (links kept as links). The
    copies belong to whoever runs the driver, so they are writable."""
    import shutil

    with os.scandir(source) as entries:
        for entry in entries:
            target = dest / entry.name
            if entry.is_dir(follow_symlinks=False):
                shutil.copytree(entry.path, target, symlinks=True)
            else:
                shutil.copy2(entry.path, target, follow_symlinks=False)


def hash_seed(seed: int) -> str:
    """The PYTHONHASHSEED of a replay with this seed (it must lie in [0, 2**32))."""
    return str(seed % 2**32)


def child_environment(
    base: dict[str, str],
    *,
    result_path: Path,
    seed: int,
    fixture: str | None = None,
    progress_fd: int | None = None,
) -> dict[str, str]:
    env = dict(base)
    env["REPLAY_RESULT"] = str(result_path)
    env["REPLAY_SEED"] = str(seed)
    if fixture is None:
        env.pop(FIXTURE_ENV, None)
    else:
        env[FIXTURE_ENV] = fixture
    if progress_fd is None:
        env.pop(PROGRESS_FD_ENV, None)
    else:
        env[PROGRESS_FD_ENV] = str(progress_fd)
    # The same string hashing in every replay, so set iteration order cannot differ.
    env["PYTHONHASHSEED"] = hash_seed(seed)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _PACKAGE_ROOT not in paths:
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *paths])
    return env


def _on_terminal() -> bool:
    try:
        return os.isatty(0)
    except OSError:
        return False


def take_terminal(pgid: int | None = None) -> None:
    """Make process group ``pgid`` (default: our own) the foreground of the terminal on
    stdin, when there is one.

    Asked from a background group, the kernel would stop us with SIGTTOU: ignore it for
    the call, as shells do.
    """
    if not _on_terminal():
        return
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(0, os.getpgrp() if pgid is None else pgid)
    finally:
        signal.signal(signal.SIGTTOU, previous)


def parse_job(line: bytes, number: int, *, default_seed: int, spawn: str) -> Job:
    """One serve-mode input line as a :class:`Job`; :class:`BadJob` says what is wrong."""
    try:
        document = json.loads(line.decode("utf-8"))
    except ValueError as error:
        raise BadJob(f"job {number}: not a JSON line ({error})") from None
    if not isinstance(document, dict) or document.get("schema") != JOB_SCHEMA:
        raise BadJob(f"job {number}: expected a {JOB_SCHEMA} object")
    job_id = document.get("id")
    if not isinstance(job_id, str):
        raise BadJob(f"job {number}: id must be a string")
    args = document.get("pytest_args")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise BadJob(f"job {job_id}: pytest_args must be a list of strings")
    fixture = document.get("fixture")
    if fixture is not None and not isinstance(fixture, str):
        raise BadJob(f"job {job_id}: fixture must be a path or null")
    timeout = document.get("timeout_s")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise BadJob(f"job {job_id}: timeout_s must be a number greater than 0")
    seed = document.get("seed", default_seed)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise BadJob(f"job {job_id}: seed must be an integer")
    # A forked child hashes with the driver's seed: another one needs a new interpreter.
    same_hashing = hash_seed(seed) == hash_seed(default_seed)
    return Job(
        number=number,
        pytest_args=tuple(args),
        seed=seed,
        timeout_s=float(timeout),
        fixture=fixture,
        spawn=spawn if same_hashing else EXEC,
        job_id=job_id,
    )


def read_result(path: Path) -> tuple[str, bytes | None]:
    """(status, the result's validated JSON bytes); never trusts a half or foreign file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return NO_RESULT, None
    try:
        document = json.loads(raw.decode("utf-8"))
    except ValueError:  # not UTF-8 or not JSON (a half-written file)
        return CORRUPT_RESULT, None
    if not isinstance(document, dict) or document.get("schema") != RESULT_SCHEMA:
        return CORRUPT_RESULT, None
    if not isinstance(document.get("tests"), list):
        return CORRUPT_RESULT, None
    return COMPLETED, raw


def encode_run(run: dict[str, Any], result: bytes | None) -> bytes:
    """The replay-run/1 document with the probe's result spliced in as it was written.

    The result was already parsed once to validate it; splicing its bytes saves
    encoding thousands of test entries a second time.
    """
    head = json.dumps(run, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return head[:-1].encode("utf-8") + b',"result":' + (result or b"null") + b"}"


def encode_run_line(run: dict[str, Any], result: bytes | None) -> bytes:
    """:func:`encode_run` as one line (a result with line breaks is re-encoded compactly)."""
    if result is not None and (b"\n" in result or b"\r" in result):
        compact = json.dumps(
            json.loads(result.decode("utf-8")), separators=(",", ":"), ensure_ascii=False
        )
        result = compact.encode("utf-8")
    return encode_run(run, result) + b"\n"


class _Deadline:
    """SIGALRM after `timeout_s` kills a process group: the driver itself only blocks in
    waitpid (no timer thread, which would make fork unsafe; no poll tick)."""

    def __init__(self, pgid: int, timeout_s: float) -> None:
        self.pgid = pgid
        self.timeout_s = timeout_s
        self.expired = False

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        self.expired = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGKILL)

    def __enter__(self) -> _Deadline:
        signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


class Driver:
    def __init__(self, options: DriverOptions) -> None:
        self.options = options
        self.child_pid: int | None = None
        self.worker_pids: list[int] = []  # the running workers of a split replay
        self.finished_jobs = 0
        self._pytest: ModuleType | None = None
        self._plugin: ModuleType | None = None
        # Descriptors a forked child must not keep (the serve-mode job and result streams).
        self._private_fds: list[int] = []
        # Serve mode: where the probe writes each job's result before the driver reads it.
        self._result_dir: Path | None = None
        # Serve mode: pytest's initial config per argument list, built once here and used
        # (a fresh copy each time) by every forked job with those arguments.
        self._config_templates: dict[tuple[str, ...], Any] = {}
        # Batch mode: where the replays' probes write their per-test progress lines.
        self.progress_fd: int | None = None

    def prepare(self) -> None:
        """Fork mode: import pytest, its built-in plugins and the probe once, here."""
        if self.options.spawn != FORK:
            return
        import gc
        import importlib

        import pytest
        from _pytest.config import default_plugins

        for name in (*(f"_pytest.{plugin}" for plugin in default_plugins), *_WARM_MODULES):
            # Some built-ins need optional modules; the child reports that like exec would.
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        self._pytest = pytest
        if not self.options.serve and self.options.replays > 1:
            # Replays after the first load the test modules the first rewrote.
            from orchestrator.probe import rewrite_cache

            rewrite_cache.install(self.options.out / rewrite_cache.FOLDER)
        # Importing the plugin installs the audit hook and the sleep wrapper, inert
        # here: the meter is only on while a test body runs in a child.
        self._plugin = importlib.import_module(PLUGIN)
        _warm_inspect_cache()
        # What is imported now lives as long as the driver: keep the collector from
        # touching (and so copying) those pages in every forked child.
        gc.collect()
        gc.freeze()

    def kill_child_group(self) -> None:
        from orchestrator.probe.workers import kill_workers

        kill_workers(self)
        pid = self.child_pid
        if pid is None:
            return
        # The group may already be gone; that is the outcome we wanted.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        self.child_pid = None

    def batch_job(self, k: int) -> Job:
        options = self.options
        return Job(
            number=k,
            pytest_args=options.pytest_args,
            seed=options.seed,
            timeout_s=options.timeout_s,
            fixture=os.environ.get(FIXTURE_ENV) or None,
            spawn=options.spawn,
        )

    def run_one(self, k: int) -> tuple[dict[str, Any], bytes | None]:
        """Batch replay k: DIR/replay-<k:03d>.log and the run document with its result."""
        return self.run_job(self.batch_job(k), self.options.out / f"replay-{k:03d}.log")

    def run_job(self, job: Job, log_path: Path) -> tuple[dict[str, Any], bytes | None]:
        result_path = (self._result_dir or self.options.out) / f".probe-{job.number:03d}.json"
        result_path.unlink(missing_ok=True)
        self.reset_dirs()
        env = child_environment(
            dict(os.environ),
            result_path=result_path,
            seed=job.seed,
            fixture=job.fixture,
            progress_fd=self.progress_fd,
        )
        started = perf_counter()
        spawn = self._fork if job.spawn == FORK else self._exec
        pid = spawn(job, env, log_path)
        with _Deadline(pid, job.timeout_s) as deadline:
            _, wait_status, usage = os.wait4(pid, 0)
        exit_code: int | None = os.waitstatus_to_exitcode(wait_status)
        # A replay that exited on its own just as the deadline fired still completed.
        timed_out = deadline.expired and exit_code == -signal.SIGKILL
        if timed_out:
            exit_code = None
        # Kill the whole group either way: a test's background processes die with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        self.child_pid = None
        if self.options.attach:
            take_terminal()
        wall_ms = (perf_counter() - started) * 1000.0
        if timed_out:
            status, result = TIMEOUT, None
        else:
            status, result = read_result(result_path)
        result_path.unlink(missing_ok=True)
        run = {
            "schema": RUN_SCHEMA,
            "probe_version": PROBE_VERSION,
            "replay": job.number,
            "status": status,
            "exit_code": exit_code,
            "wall_ms": round(wall_ms, 3),
            # The replay process's own CPU time (not its children's): what a replay costs
            # apart from waiting for a core on a busy machine.
            "cpu_ms": round((usage.ru_utime + usage.ru_stime) * 1000.0, 3),
            "seed": job.seed,
            "timeout_s": job.timeout_s,
            "spawn": job.spawn,
        }
        if job.job_id is not None:
            run["job"] = job.job_id
        return run, result

    def spawn(self, job: Job, env: dict[str, str], log_path: Path) -> int:
        """Start one pytest session (a worker of a split replay) in its own process group."""
        pid = (
            self._fork(job, env, log_path) if job.spawn == FORK else self._exec(job, env, log_path)
        )
        self.worker_pids.append(pid)
        self.child_pid = None  # from here on killed as one of the worker_pids
        return pid

    def reset_dirs(self) -> None:
        """HOME there, and (with --copy-tree) a fresh tree, for the next replay."""
        for folder in self.options.make_dirs:
            folder.mkdir(parents=True, exist_ok=True)
        if self.options.copy_tree is not None:
            source, dest = self.options.copy_tree
            empty_dir(dest)
            copy_contents(source, dest)
        if self.options.copy_tree is not None:
            import importlib

            # Folders on sys.path that did not exist when the driver started (the tree's
            # src/ before its first copy) are cached as "nothing here": forget that.
            importlib.invalidate_caches()
            for entry in [key for key, finder in sys.path_importer_cache.items() if not finder]:
                del sys.path_importer_cache[entry]  # what Python < 3.10 does not forget

    def _exec(self, job: Job, env: dict[str, str], log_path: Path) -> int:
        import subprocess

        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            PLUGIN,
            "-p",
            "no:cacheprovider",  # no state carried from one replay to the next
            *job.pytest_args,
        ]
        if self.options.attach:
            child = subprocess.Popen(command, env=env, process_group=0)
            take_terminal(child.pid)
            # Had it read the terminal before it had the foreground, it was stopped.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGCONT)
        else:
            with log_path.open("wb") as log:
                child = subprocess.Popen(
                    command,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=() if self.progress_fd is None else (self.progress_fd,),
                )
        # Reaped with os.waitpid by the caller; Popen must not reap it too.
        child.returncode = 0
        self.child_pid = child.pid
        return child.pid

    def _config_template(self, args: list[str]) -> Any:
        """Serve mode: ``_pytest.config.get_config(args, [plugin])``, built once per
        argument list in the driver; None when it cannot be built (the child then builds
        its own, as in a batch replay).

        What it holds (a plugin manager with pytest's built-in plugins imported and
        registered, minus the ``-p no:`` ones, and the invocation's arguments and folder)
        reads neither the project nor the job's environment, so a forked copy is the
        object the child's own ``get_config`` would have made; the driver never uses it.
        This saves each job a tenth to a fifth of its time.
        """
        key = tuple(args)
        if key in self._config_templates:
            return self._config_templates[key]
        template = None
        if self.options.serve and self._plugin is not None and not os.environ.get("PYTEST_DEBUG"):
            try:
                from _pytest.config import get_config

                template = get_config(list(args), [self._plugin])
            except Exception:
                template = None
            import gc

            gc.freeze()  # as in prepare(): the children's collector leaves it alone
        self._config_templates[key] = template
        return template

    def _fork(self, job: Job, env: dict[str, str], log_path: Path) -> int:
        template = self._config_template(_pytest_main_args(job))
        sys.stdout.flush()
        sys.stderr.flush()
        # A stop signal between fork and the child's own handlers must not run the
        # driver's handler in the child; the parent takes it right after the fork.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                self._child(job, env, log_path, blocked, template)  # never returns
            self.child_pid = pid
            # Also set here, so a kill right after the fork reaches the child's group.
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return pid

    def _child(
        self,
        job: Job,
        env: dict[str, str],
        log_path: Path,
        mask: set[int | signal.Signals],
        template: Any = None,
    ) -> None:
        """One replay in the forked child; always ends in os._exit, never returns."""
        status = _CHILD_FAILED
        try:
            os.setpgid(0, 0)
            # A fresh interpreter's dispositions: SIGTERM kills, SIGINT raises KeyboardInterrupt.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for fd in self._private_fds:  # the tests must not see the job streams
                with contextlib.suppress(OSError):
                    os.close(fd)
            os.environ.clear()
            os.environ.update(env)
            if self.options.attach:
                take_terminal()
            else:
                null = os.open(os.devnull, os.O_RDONLY)
                log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(null, 0)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.close(null)
                os.close(log)
            pytest, plugin = self._pytest, self._plugin
            if pytest is None or plugin is None:
                raise RuntimeError("fork mode: prepare() was not called")
            args = _pytest_main_args(job)
            if template is not None:
                _use_config_template(template, args, plugin)
            # What `python -m pytest <args>` would show the tests.
            sys.argv = [str(Path(str(pytest.__file__)).parent / "__main__.py"), *args]
            # The plugin object is registered directly (as `-p` would by name): its module
            # is already imported, and naming it would warn that it cannot be rewritten.
            status = int(pytest.main(args, plugins=[plugin]))
            _interpreter_exit()
        except SystemExit as stop:
            code = stop.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        except BaseException:
            with contextlib.suppress(BaseException):
                import traceback

                traceback.print_exc()
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(status & 0xFF)

    def run(self) -> int:
        if self.options.serve:
            return self.serve()
        options = self.options
        options.out.mkdir(parents=True, exist_ok=True)
        if not options.attach:
            self.progress_fd = _progress_stream()
        try:
            self.prepare()
            for k in range(1, options.replays + 1):
                run, result = self.run_one(k) if options.workers == 1 else run_split(self, k)
                write_bytes_atomic(options.out / f"replay-{k:03d}.json", encode_run(run, result))
                if not options.attach:
                    print(f"replay {k}/{options.replays} {run['status']}", flush=True)
        except Terminated as stop:
            self.kill_child_group()
            self._drop_rewritten()
            self._write_driver(finished=False, signal_number=stop.signum)
            return 128 + stop.signum
        self._drop_rewritten()
        self._write_driver(finished=True, signal_number=None)
        return 0

    def _drop_rewritten(self) -> None:
        from orchestrator.probe import rewrite_cache

        rewrite_cache.remove(self.options.out / rewrite_cache.FOLDER)

    # -- serve mode ---------------------------------------------------------------------

    def serve(self) -> int:
        """Run the jobs read from --jobs until its end (the module docstring has the protocol)."""
        options = self.options
        options.out.mkdir(parents=True, exist_ok=True)
        import tempfile

        # The probe fsyncs its result file, which costs milliseconds on a disk; a served
        # result only lives until the driver has read it, so it is written in the temp
        # folder (a tmpfs in the replay container, where fsync is free).
        self._result_dir = Path(tempfile.mkdtemp(prefix="replay-serve-"))
        try:
            self.prepare()
            with self._job_streams() as (jobs, results):
                for line in jobs:
                    if not line.strip():
                        continue
                    job = parse_job(
                        line,
                        self.finished_jobs + 1,
                        default_seed=options.seed,
                        spawn=options.spawn,
                    )
                    run, result = self.run_job(job, options.out / f"job-{job.number:06d}.log")
                    _write_all(results, encode_run_line(run, result))
                    self.finished_jobs = job.number
                    print(f"job {job.number} {job.job_id} {run['status']}", file=sys.stderr)
                    sys.stderr.flush()
        except Terminated as stop:
            self.kill_child_group()
            self._write_driver(finished=False, signal_number=stop.signum)
            return 128 + stop.signum
        except BadJob as error:
            print(f"serve: {error}", file=sys.stderr, flush=True)
            self._write_driver(finished=False, signal_number=None, error=str(error))
            return 2
        except BrokenPipeError:
            print("serve: the reader of --results went away", file=sys.stderr, flush=True)
            self._write_driver(finished=False, signal_number=None, error="results closed")
            return 1
        finally:
            import shutil

            shutil.rmtree(self._result_dir, ignore_errors=True)
        self._write_driver(finished=True, signal_number=None)
        return 0

    @contextlib.contextmanager
    def _job_streams(self) -> Iterator[tuple[BinaryIO, int]]:
        """The job lines to read and the descriptor results are written to."""
        options = self.options
        jobs_path, results_path = options.jobs or STDIO, options.results or STDIO
        with contextlib.ExitStack() as stack:
            if jobs_path == STDIO:
                jobs: BinaryIO = sys.stdin.buffer
            else:
                # A FIFO's open waits for its writer: the sender opens it first.
                jobs = stack.enter_context(open(jobs_path, "rb"))
            if results_path == STDIO:
                results = sys.stdout.fileno()
            else:
                results = os.open(results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                stack.callback(os.close, results)
            self._private_fds = [fd for fd in (jobs.fileno(), results) if fd > 2]
            try:
                yield jobs, results
            finally:
                self._private_fds = []

    def _write_driver(
        self, *, finished: bool, signal_number: int | None, error: str | None = None
    ) -> None:
        document: dict[str, Any] = {
            "schema": DRIVER_SCHEMA,
            "probe_version": PROBE_VERSION,
            "replays": self.finished_jobs if self.options.serve else self.options.replays,
            "finished": finished,
        }
        if signal_number is not None:
            document["signal"] = signal_number
        if error is not None:
            document["error"] = error
        write_json_atomic(self.options.out / "driver.json", document)


def _progress_stream() -> int | None:
    """A copy of standard output (above 2, so a replay's redirection leaves it alone) for
    the probes' per-test lines, or None when there is no standard output to copy."""
    sys.stdout.flush()
    try:
        fd = os.dup(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return fd


def run_split(driver: Driver, k: int) -> tuple[dict[str, Any], bytes | None]:
    from orchestrator.probe.workers import run_workers

    return run_workers(driver, k)


def _warm_inspect_cache() -> None:
    """Fill ``inspect``'s module-by-file cache for every module imported so far.

    Reporting a failure, pytest asks ``inspect.getmodule`` where the failing source
    lives, which resolves the file of every module in ``sys.modules`` not yet in that
    cache (a realpath each: about 15 ms in the runner image). Done here once, a forked
    replay only resolves the modules it imported itself.
    """
    import inspect

    with contextlib.suppress(Exception):
        inspect.getmodule(compile("", "<orchestrator-warm-up>", "exec"))


def _pytest_main_args(job: Job) -> list[str]:
    return ["-p", "no:cacheprovider", *job.pytest_args]


def _use_config_template(template: Any, args: list[str], plugin: ModuleType) -> None:
    """In a forked child: pytest.main's ``get_config(args, [plugin])`` returns the
    driver's template (this process's own copy); any other call builds a config."""
    import _pytest.config

    config_module: Any = _pytest.config
    original = config_module.get_config

    def get_config(call_args: Any = None, plugins: Any = None, *rest: Any, **options: Any) -> Any:
        if (
            not rest
            and not options.get("prog")
            and call_args is not None
            and list(call_args) == args
            and plugins is not None
            and list(plugins) == [plugin]
        ):
            config_module.get_config = original  # used once
            return template
        return original(call_args, plugins, *rest, **options)

    config_module.get_config = get_config


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _interpreter_exit() -> None:
    """What a fresh interpreter does on its way out: join non-daemon threads, run atexit."""
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    # A container stop sends SIGTERM: kill the running replay's group, then leave.
    signal.signal(signal.SIGTERM, _raise_terminated)
    signal.signal(signal.SIGINT, _raise_terminated)
    return Driver(options).run()
