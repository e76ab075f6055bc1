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
  same way.
- exec: a new interpreter per replay (`python -m pytest ...`), about 0.15 s more per
  replay (interpreter start and the import of pytest).

A replay past its deadline has its whole group killed and is recorded as `timeout`;
nothing inside the test body can write that status. For k = 1..N the driver writes
DIR/replay-<k:03d>.json (replay-run/1, with "spawn") atomically and prints
`replay <k>/<N> <status>`; DIR/driver.json (replay-driver/1) is written last. SIGTERM or
SIGINT kills the running replay's group, writes driver.json with "finished": false, and
exits 128 + signal.

With `--workers J` (J > 1) each replay is J pytest sessions at once, each collecting the
whole selection and running its share of whole modules (`orchestrator/probe/workers.py`);
the replay's result is the merge of theirs, and a worker that dies labels only its own
tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from types import FrameType, ModuleType
from typing import Any, Final

from orchestrator.probe import DRIVER_SCHEMA, PROBE_VERSION, RESULT_SCHEMA, RUN_SCHEMA
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
# The package root, so the child finds the plugin whatever PYTHONPATH the caller set.
_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[2])
# A forked replay that died in the driver's own code before pytest ran (EX_SOFTWARE).
_CHILD_FAILED: Final = 70
_STOP_SIGNALS: Final = frozenset((signal.SIGTERM, signal.SIGINT))


@dataclass(frozen=True, kw_only=True)
class DriverOptions:
    replays: int
    timeout_s: float
    out: Path
    seed: int
    pytest_args: tuple[str, ...]
    spawn: str = FORK
    workers: int = 1  # pytest sessions per replay, each running its share (probe/workers.py)


class Terminated(Exception):
    """The driver received SIGTERM or SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


def parse_args(argv: Sequence[str]) -> DriverOptions:
    args = list(argv)
    if "--" in args:
        split = args.index("--")
        own, pytest_args = args[:split], args[split + 1 :]
    else:
        own, pytest_args = args, []
    parser = argparse.ArgumentParser(
        prog=f"python -m {DRIVER_MODULE}",
        description="Run N fresh pytest replays under the replay probe, one after another.",
        epilog="Everything after `--` is passed to pytest unchanged.",
    )
    parser.add_argument("--replays", type=_positive_int, required=True, help="number of replays")
    parser.add_argument(
        "--timeout", type=_positive_float, required=True, help="deadline per replay, seconds"
    )
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
    options = parser.parse_args(own)
    seed = options.seed
    if seed is None:
        raw = os.environ.get("REPLAY_SEED", "").strip()
        try:
            seed = int(raw) if raw else 0
        except ValueError:
            parser.error(f"REPLAY_SEED must be an integer, got {raw!r}")
    return DriverOptions(
        replays=options.replays,
        timeout_s=options.timeout,
        out=options.out,
        seed=seed,
        pytest_args=tuple(pytest_args),
        spawn=options.spawn,
        workers=options.workers,
    )


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


def hash_seed(seed: int) -> str:
    """The PYTHONHASHSEED of a replay with this seed (it must lie in [0, 2**32))."""
    return str(seed % 2**32)


def child_environment(base: dict[str, str], *, result_path: Path, seed: int) -> dict[str, str]:
    env = dict(base)
    env["REPLAY_RESULT"] = str(result_path)
    env["REPLAY_SEED"] = str(seed)
    # The same string hashing in every replay, so set iteration order cannot differ.
    env["PYTHONHASHSEED"] = hash_seed(seed)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _PACKAGE_ROOT not in paths:
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *paths])
    return env


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
        self._pytest: ModuleType | None = None
        self._plugin: ModuleType | None = None

    def prepare(self) -> None:
        """Fork mode: import pytest, its built-in plugins and the probe once, here."""
        if self.options.spawn != FORK:
            return
        import importlib

        import pytest
        from _pytest.config import default_plugins

        for name in default_plugins:
            # Some built-ins need optional modules; the child reports that like exec would.
            with contextlib.suppress(ImportError):
                importlib.import_module(f"_pytest.{name}")
        self._pytest = pytest
        # Importing the plugin installs the audit hook and the sleep wrapper, inert
        # here: the meter is only on while a test body runs in a child.
        self._plugin = importlib.import_module(PLUGIN)

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

    def run_one(self, k: int) -> tuple[dict[str, Any], bytes | None]:
        options = self.options
        result_path = options.out / f".probe-{k:03d}.json"
        log_path = options.out / f"replay-{k:03d}.log"
        result_path.unlink(missing_ok=True)
        env = child_environment(dict(os.environ), result_path=result_path, seed=options.seed)
        started = perf_counter()
        spawn = self._fork if options.spawn == FORK else self._exec
        pid = spawn(env, log_path)
        with _Deadline(pid, options.timeout_s) as deadline:
            _, wait_status = os.waitpid(pid, 0)
        exit_code: int | None = os.waitstatus_to_exitcode(wait_status)
        # A replay that exited on its own just as the deadline fired still completed.
        timed_out = deadline.expired and exit_code == -signal.SIGKILL
        if timed_out:
            exit_code = None
        # Kill the whole group either way: a test's background processes die with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        self.child_pid = None
        wall_ms = (perf_counter() - started) * 1000.0
        if timed_out:
            status, result = TIMEOUT, None
        else:
            status, result = read_result(result_path)
        result_path.unlink(missing_ok=True)
        run = {
            "schema": RUN_SCHEMA,
            "probe_version": PROBE_VERSION,
            "replay": k,
            "status": status,
            "exit_code": exit_code,
            "wall_ms": round(wall_ms, 3),
            "seed": options.seed,
            "timeout_s": options.timeout_s,
            "spawn": options.spawn,
        }
        return run, result

    def spawn(self, env: dict[str, str], log_path: Path) -> int:
        """Start one pytest session (a worker of a split replay) in its own process group."""
        pid = self._fork(env, log_path) if self.options.spawn == FORK else self._exec(env, log_path)
        self.worker_pids.append(pid)
        self.child_pid = None  # from here on killed as one of the worker_pids
        return pid

    def _exec(self, env: dict[str, str], log_path: Path) -> int:
        import subprocess

        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            PLUGIN,
            "-p",
            "no:cacheprovider",  # no state carried from one replay to the next
            *self.options.pytest_args,
        ]
        with log_path.open("wb") as log:
            child = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # Reaped with os.waitpid by the caller; Popen must not reap it too.
        child.returncode = 0
        self.child_pid = child.pid
        return child.pid

    def _fork(self, env: dict[str, str], log_path: Path) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        # A stop signal between fork and the child's own handlers must not run the
        # driver's handler in the child; the parent takes it right after the fork.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                self._child(env, log_path, blocked)  # never returns
            self.child_pid = pid
            # Also set here, so a kill right after the fork reaches the child's group.
            with contextlib.suppress(OSError):
                os.setpgid(pid, pid)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return pid

    def _child(self, env: dict[str, str], log_path: Path, mask: set[int | signal.Signals]) -> None:
        """One replay in the forked child; always ends in os._exit, never returns."""
        status = _CHILD_FAILED
        try:
            os.setpgid(0, 0)
            # A fresh interpreter's dispositions: SIGTERM kills, SIGINT raises KeyboardInterrupt.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.environ.clear()
            os.environ.update(env)
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
            args = ["-p", "no:cacheprovider", *self.options.pytest_args]
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
        options = self.options
        options.out.mkdir(parents=True, exist_ok=True)
        try:
            self.prepare()
            for k in range(1, options.replays + 1):
                run, result = self.run_one(k) if options.workers == 1 else run_split(self, k)
                write_bytes_atomic(options.out / f"replay-{k:03d}.json", encode_run(run, result))
                print(f"replay {k}/{options.replays} {run['status']}", flush=True)
        except Terminated as stop:
            self.kill_child_group()
            self._write_driver(finished=False, signal_number=stop.signum)
            return 128 + stop.signum
        self._write_driver(finished=True, signal_number=None)
        return 0

    def _write_driver(self, *, finished: bool, signal_number: int | None) -> None:
        document: dict[str, Any] = {
            "schema": DRIVER_SCHEMA,
            "probe_version": PROBE_VERSION,
            "replays": self.options.replays,
            "finished": finished,
        }
        if signal_number is not None:
            document["signal"] = signal_number
        write_json_atomic(self.options.out / "driver.json", document)


def run_split(driver: Driver, k: int) -> tuple[dict[str, Any], bytes | None]:
    from orchestrator.probe.workers import run_workers

    return run_workers(driver, k)


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
