"""The in-container replay driver: N fresh pytest processes, one after another.

Started through its small entry module (which pins PYTHONHASHSEED first, see there):

    python -m orchestrator.probe.replay --replays N --timeout SECONDS --out DIR [--seed S] \
        [--spawn fork|exec] [--rewrite-cache CACHE] -- <pytest args>

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
  replays (`orchestrator/probe/rewrite_cache.py`, in DIR/.rewritten/, removed at the end;
  with `--rewrite-cache CACHE` in CACHE, used by every replay and left for the next
  driver of the same container): the module is still imported afresh by each, not
  rewritten again. pytest's initial config (its plugin manager with the built-in plugins,
  nothing of the project) is built once in the driver when N > 1, and each child uses
  its own forked copy of it, as in serve mode below (about 10 ms per replay).
- exec: a new interpreter per replay (`python -m pytest ...`), about 0.15 s more per
  replay (interpreter start and the import of pytest).

Before each replay (and outside its measured time) the driver creates every `--make-dir`
that is missing (HOME, in the container's /tmp; like /tmp it is shared by the replays of
one container, as a machine's are by test runs), empties every `--fresh-dir` (Hypothesis's
example database: no replay starts from examples another found); with `--copy-tree
FROM:TO` it empties TO and copies FROM's contents into it, so a suite that writes into its
tree gets a private writable copy that no earlier replay touched.

A replay past its deadline has its whole group killed and is recorded as `timeout`;
nothing inside the test body can write that status. For k = 1..N the driver writes
DIR/replay-<k:03d>.json (replay-run/1, with "spawn") atomically and prints
`result replay-<k:03d>.json <sha256 of its bytes>` (the host takes only those bytes)
and `replay <k>/<N> <status>`; when DIR has no room left for the file (a test filled
it) it prints `results-full replay-<k:03d>.json` instead, and a replay without a result
in a full DIR says `"results_full": true`. DIR/driver.json (replay-driver/1) is written
last. SIGTERM or SIGINT kills the running replay's group, writes driver.json with
"finished": false, and exits 128 + signal.

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
        [--result-files] [--seed S] [--spawn fork|exec]

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
- With --result-files (how the orchestrator serves) the document is a file instead:
  DIR/job-<n:06d>/replay-001.json (the folder made new for the job, its pytest output
  beside it as job.log, and removed when the next job starts), and the line written to
  --results is only a notice: {"job", "replay", "status", "result": "replay-001.json",
  "sha256": the SHA-256 of the file's bytes} (no room for the file: no "result" nor
  "sha256", and "results_full": true). The host reads the file through its own reader
  and takes it only when its bytes are the ones announced.
- Jobs share the container's /tmp, as the replays of one batch do. To keep a job cheap,
  the driver writes each probe result in the temp folder (a tmpfs in a container) and
  builds pytest's initial config (the plugin manager with the built-in plugins; nothing
  of the project) once per argument list; each forked job uses its own copy.
- End of the --jobs input ends the driver: DIR/driver.json ("replays": the number of
  jobs run, "finished": true), exit 0. A line that is not a valid job ends it too:
  driver.json says "finished": false with the "error", the error goes to standard
  error, exit 2 (the job's sender has a bug; nothing is guessed). A reader of --results
  that went away ends it with "finished": false and exit 1. SIGTERM or SIGINT: as above.

Where the parts live: the command line in `options.py`; the job, its environment and the
wire formats in `jobs.py`; one job's run (`run_job`, for both loops here) in `runner.py`;
forking and exec'ing a session in `spawn.py`; the deadline in `deadline.py`; the
`--make-dir`, `--fresh-dir` and `--copy-tree` folders in `workspace.py`; a split replay's merge in
`workers.py`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO, Final

from orchestrator.probe import DRIVER_SCHEMA, PROBE_VERSION
from orchestrator.probe.atomic import write_bytes_atomic, write_json_atomic
from orchestrator.probe.deadline import kill_and_reap
from orchestrator.probe.jobs import (
    COMPLETED,
    EXEC,
    FIXTURE_ENV,
    FORK,
    TIMEOUT,
    BadJob,
    Job,
    encode_notice,
    encode_run,
    encode_run_line,
    hash_seed,
    parse_job,
)
from orchestrator.probe.options import DriverOptions, parse_args
from orchestrator.probe.runner import Runner, run_job
from orchestrator.probe.spawn import ExecSpawner, ForkSpawner, Spawner
from orchestrator.probe.workspace import Workspace, copy_contents, empty_dir

# hash_seed, copy_contents and empty_dir are imported from here by the rest of the package.
__all__ = ["copy_contents", "empty_dir", "hash_seed", "main", "run_batch", "run_serve"]

STDIO: Final = "-"
JOB_RESULT: Final = "replay-001.json"  # a job's result in its folder (--result-files)


class Terminated(Exception):
    """The driver received SIGTERM or SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


def _spawners(
    options: DriverOptions, *, progress_fd: int | None, rewrite_cache_dir: Path | None
) -> dict[str, Spawner]:
    """The spawner of each mode; the fork one prepared (pytest imported) when it is used."""
    spawners: dict[str, Spawner] = {
        EXEC: ExecSpawner(attach=options.attach, progress_fd=progress_fd)
    }
    if options.spawn == FORK:
        # pytest's initial config is built once for all the sessions of one argument
        # list (serve mode, or replays 2..N of a batch): about 10 ms per session.
        fork = ForkSpawner(
            attach=options.attach, config_templates=options.serve or options.replays > 1
        )
        fork.prepare(rewrite_cache_dir)
        spawners[FORK] = fork
    return spawners


def _workspace(options: DriverOptions) -> Workspace:
    return Workspace(
        make_dirs=options.make_dirs, fresh_dirs=options.fresh_dirs, copy_tree=options.copy_tree
    )


def run_batch(options: DriverOptions) -> int:
    """Replays 1..N of the same pytest arguments, one after another."""
    from orchestrator.probe import rewrite_cache

    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    progress_fd = None if options.attach else _progress_stream()
    running: list[int] = []
    # Replays after the first load the test modules the first rewrote; a cache the
    # caller named outlives this driver, for the next one in the same container.
    cache = options.rewrite_cache
    owned = None
    if cache is None and options.replays > 1:
        cache = owned = out / rewrite_cache.FOLDER
    try:
        runner = Runner(
            spawners=_spawners(options, progress_fd=progress_fd, rewrite_cache_dir=cache),
            workspace=_workspace(options),
            out=out,
            result_dir=out,
            progress_fd=progress_fd,
            attach=options.attach,
            workers=options.workers,
            running=running,
        )
        for k in range(1, options.replays + 1):
            job = _batch_job(options, k)
            run, result = run_job(runner, job, out / f"replay-{k:03d}.log")
            name = f"replay-{k:03d}.json"
            digest = _write_result(out / name, run, result)
            if digest is None:
                # No room for the result: said, not a traceback; the host names the cause.
                print(f"results-full {name}", flush=True)
                continue
            if not options.attach:
                # What it wrote, for the host to check it is what it reads back.
                print(f"result replay-{k:03d}.json {digest}", flush=True)
                print(f"replay {k}/{options.replays} {run['status']}", flush=True)
    except Terminated as stop:
        kill_and_reap(running)
        rewrite_cache.remove(owned)
        with contextlib.suppress(OSError):
            _write_driver(out, replays=options.replays, finished=False, signal_number=stop.signum)
        return 128 + stop.signum
    rewrite_cache.remove(owned)
    with contextlib.suppress(OSError):  # a full folder: the host reads only the results
        _write_driver(out, replays=options.replays, finished=True)
    return 0


def _write_result(path: Path, run: dict[str, Any], result: bytes | None) -> str | None:
    """A replay's (or job's) replay-run/1 document written at ``path``, atomically; the
    SHA-256 of its bytes, or None when its folder had no room for it."""
    if run["status"] not in (COMPLETED, TIMEOUT) and _full(path.parent):
        run["results_full"] = True  # a test filled the folder its result goes to
    data = encode_run(run, result)
    try:
        write_bytes_atomic(path, data)
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        return None
    return hashlib.sha256(data).hexdigest()


def _full(folder: Path) -> bool:
    """Is there no room left in ``folder``'s file system?"""
    try:
        space = os.statvfs(folder)
    except OSError:
        return False
    return space.f_bavail == 0


def _batch_job(options: DriverOptions, k: int) -> Job:
    return Job(
        number=k,
        pytest_args=options.pytest_args,
        seed=options.seed,
        timeout_s=options.timeout_s,
        fixture=os.environ.get(FIXTURE_ENV) or None,
        spawn=options.spawn,
    )


def run_serve(options: DriverOptions) -> int:
    """Run the jobs read from --jobs until its end (the module docstring has the protocol)."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    import tempfile

    # The probe fsyncs its result file, which costs milliseconds on a disk; a served
    # result only lives until the driver has read it, so it is written in the temp
    # folder (a tmpfs in the replay container, where fsync is free).
    result_dir = Path(tempfile.mkdtemp(prefix="replay-serve-"))
    running: list[int] = []
    finished_jobs = 0
    try:
        spawners = _spawners(options, progress_fd=None, rewrite_cache_dir=options.rewrite_cache)
        with _job_streams(options) as (jobs, results, private_fds):
            runner = Runner(
                spawners=spawners,
                workspace=_workspace(options),
                out=out,
                result_dir=result_dir,
                private_fds=private_fds,
                running=running,
            )
            folder: Path | None = None  # the last job's, with --result-files
            for line in jobs:
                if not line.strip():
                    continue
                number = finished_jobs + 1
                job = parse_job(line, number, default_seed=options.seed, spawn=options.spawn)
                if not options.result_files:
                    run, result = run_job(runner, job, out / f"job-{number:06d}.log")
                    _write_all(results, encode_run_line(run, result))
                else:
                    # The host read the last job's folder before it sent this job.
                    folder = _job_folder(out, number, folder)
                    run, result = run_job(runner, job, folder / "job.log")
                    digest = _write_result(folder / JOB_RESULT, run, result)
                    notice = encode_notice(
                        job, run["status"], name=JOB_RESULT, digest=digest, full=digest is None
                    )
                    _write_all(results, notice)
                finished_jobs = number
                print(f"job {number} {job.job_id} {run['status']}", file=sys.stderr)
                sys.stderr.flush()
    except Terminated as stop:
        kill_and_reap(running)
        _write_driver(out, replays=finished_jobs, finished=False, signal_number=stop.signum)
        return 128 + stop.signum
    except BadJob as error:
        print(f"serve: {error}", file=sys.stderr, flush=True)
        _write_driver(out, replays=finished_jobs, finished=False, error=str(error))
        return 2
    except BrokenPipeError:
        print("serve: the reader of --results went away", file=sys.stderr, flush=True)
        _write_driver(out, replays=finished_jobs, finished=False, error="results closed")
        return 1
    finally:
        shutil.rmtree(result_dir, ignore_errors=True)
    _write_driver(out, replays=finished_jobs, finished=True)
    return 0


def _job_folder(out: Path, number: int, last: Path | None) -> Path:
    """Job ``number``'s own folder in ``out``, new and empty (whatever stood at its name
    is removed first: a process of the tree may have put it there); ``last`` (the
    previous job's) is removed, so that hundreds of jobs never fill the results folder."""
    for path in (last, out / f"job-{number:06d}"):
        if path is None:
            continue
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)
    folder = out / f"job-{number:06d}"
    folder.mkdir()
    folder.chmod(0o755)  # the host's reader (another user) lists it
    return folder


@contextlib.contextmanager
def _job_streams(options: DriverOptions) -> Iterator[tuple[BinaryIO, int, tuple[int, ...]]]:
    """The job lines to read, the descriptor results are written to, and the descriptors
    of the two that a session must not keep."""
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
        yield jobs, results, tuple(fd for fd in (jobs.fileno(), results) if fd > 2)


def _write_driver(
    out: Path,
    *,
    replays: int,
    finished: bool,
    signal_number: int | None = None,
    error: str | None = None,
) -> None:
    document: dict[str, Any] = {
        "schema": DRIVER_SCHEMA,
        "probe_version": PROBE_VERSION,
        "replays": replays,
        "finished": finished,
    }
    if signal_number is not None:
        document["signal"] = signal_number
    if error is not None:
        document["error"] = error
    write_json_atomic(out / "driver.json", document)


def _progress_stream() -> int | None:
    """A copy of standard output (above 2, so a replay's redirection leaves it alone) for
    the probes' per-test lines, or None when there is no standard output to copy."""
    sys.stdout.flush()
    try:
        fd = os.dup(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    # A container stop sends SIGTERM: kill the running replay's group, then leave.
    signal.signal(signal.SIGTERM, _raise_terminated)
    signal.signal(signal.SIGINT, _raise_terminated)
    return run_serve(options) if options.serve else run_batch(options)
