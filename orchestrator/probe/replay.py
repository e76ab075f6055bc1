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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from types import FrameType
from typing import Any, Final

from orchestrator.probe import DRIVER_SCHEMA, PROBE_VERSION, RESULT_SCHEMA, RUN_SCHEMA
from orchestrator.probe.atomic import write_json_atomic

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


def read_result(path: Path) -> tuple[str, Any]:
    """(status, document) for the plugin's result file; never trusts a half or foreign file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return NO_RESULT, None
    try:
        document = json.loads(raw)
    except ValueError:
        return CORRUPT_RESULT, None
    if not isinstance(document, dict) or document.get("schema") != RESULT_SCHEMA:
        return CORRUPT_RESULT, None
    if not isinstance(document.get("tests"), list):
        return CORRUPT_RESULT, None
    return COMPLETED, document


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

    def run_one(self, k: int) -> dict[str, Any]:
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
            timed_out = False
            try:
                exit_code: int | None = self.child.wait(timeout=options.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                exit_code = None
            # Kill the whole group either way: a test's background processes die with it.
            self.kill_child_group()
            self.child = None
        wall_ms = (perf_counter() - started) * 1000.0
        if timed_out:
            status, document = TIMEOUT, None
        else:
            status, document = read_result(result_path)
        result_path.unlink(missing_ok=True)
        return {
            "schema": RUN_SCHEMA,
            "probe_version": PROBE_VERSION,
            "replay": k,
            "status": status,
            "exit_code": exit_code,
            "wall_ms": round(wall_ms, 3),
            "seed": options.seed,
            "timeout_s": options.timeout_s,
            "result": document,
        }

    def run(self) -> int:
        options = self.options
        options.out.mkdir(parents=True, exist_ok=True)
        try:
            for k in range(1, options.replays + 1):
                run = self.run_one(k)
                write_json_atomic(options.out / f"replay-{k:03d}.json", run)
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
