"""The in-container replay driver: N fresh pytest processes, one after another.

    python -m orchestrator.probe.replay --replays N --timeout SECONDS --out DIR [--seed S] \
        -- <pytest args>

Each replay is a new interpreter (`python -m pytest -p orchestrator.probe.plugin ...`)
in its own process group, so one container start pays for N independent replays. A
replay past its deadline has its whole group killed and is recorded as `timeout`;
nothing inside the test body can write that status. For k = 1..N the driver writes
DIR/replay-<k:03d>.json (replay-run/1) atomically and prints `replay <k>/<N> <status>`;
DIR/driver.json (replay-driver/1) is written last. SIGTERM or SIGINT kills the running
replay's group, writes driver.json with "finished": false, and exits 128 + signal.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from types import FrameType
from typing import Any, Final

from orchestrator.probe import DRIVER_SCHEMA, PROBE_VERSION, RESULT_SCHEMA, RUN_SCHEMA
from orchestrator.probe.atomic import write_bytes_atomic, write_json_atomic

COMPLETED: Final = "completed"
TIMEOUT: Final = "timeout"
NO_RESULT: Final = "no_result"
CORRUPT_RESULT: Final = "corrupt_result"

PLUGIN: Final = "orchestrator.probe.plugin"
# The package root, so the child finds the plugin whatever PYTHONPATH the caller set.
_PACKAGE_ROOT: Final = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True, kw_only=True)
class DriverOptions:
    replays: int
    timeout_s: float
    out: Path
    seed: int
    pytest_args: tuple[str, ...]


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
        prog="python -m orchestrator.probe.replay",
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


def child_environment(base: dict[str, str], *, result_path: Path, seed: int) -> dict[str, str]:
    env = dict(base)
    env["REPLAY_RESULT"] = str(result_path)
    env["REPLAY_SEED"] = str(seed)
    # The same string hashing in every replay, so set iteration order cannot differ.
    env["PYTHONHASHSEED"] = str(seed % 2**32)
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


class Driver:
    def __init__(self, options: DriverOptions) -> None:
        self.options = options
        self.child: subprocess.Popen[bytes] | None = None

    def kill_child_group(self) -> None:
        child = self.child
        if child is None:
            return
        # The group may already be gone; that is the outcome we wanted.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()

    def run_one(self, k: int) -> tuple[dict[str, Any], bytes | None]:
        options = self.options
        result_path = options.out / f".probe-{k:03d}.json"
        log_path = options.out / f"replay-{k:03d}.log"
        result_path.unlink(missing_ok=True)
        env = child_environment(dict(os.environ), result_path=result_path, seed=options.seed)
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            PLUGIN,
            "-p",
            "no:cacheprovider",  # no state carried from one replay to the next
            *options.pytest_args,
        ]
        started = perf_counter()
        with log_path.open("wb") as log:
            self.child = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            timed_out = self._wait(self.child, options.timeout_s)
            exit_code: int | None = None if timed_out else self.child.returncode
            # Kill the whole group either way: a test's background processes die with it.
            self.kill_child_group()
            self.child = None
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
        }
        return run, result

    @staticmethod
    def _wait(child: subprocess.Popen[bytes], timeout_s: float) -> bool:
        """Block until the child exits; past the deadline kill its group. True if killed.

        A timer thread does the killing so that the wait itself is one blocking
        waitpid: the driver notices a finished replay at once, not at a poll tick.
        """
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, expire)
        timer.daemon = True
        timer.start()
        try:
            child.wait()
        finally:
            timer.cancel()
        # A replay that exited on its own just as the timer fired still completed.
        return expired.is_set() and child.returncode == -signal.SIGKILL

    def run(self) -> int:
        options = self.options
        options.out.mkdir(parents=True, exist_ok=True)
        try:
            for k in range(1, options.replays + 1):
                run, result = self.run_one(k)
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


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    # A container stop sends SIGTERM: kill the running replay's group, then leave.
    signal.signal(signal.SIGTERM, _raise_terminated)
    signal.signal(signal.SIGINT, _raise_terminated)
    return Driver(options).run()


if __name__ == "__main__":
    sys.exit(main())
