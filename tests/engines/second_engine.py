"""The replay CLI around two engines, for the scale-out tests (and bench/engines.py).

The second engine itself, and ``wait_for``, live in tests/support (one for the suite).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from support.engine import SecondEngine, new_second_engine  # noqa: E402
from support.polling import wait_for  # noqa: E402

__all__ = ["SecondEngine", "new_second_engine", "wait_for"]

CLI = ROOT / ".venv" / "bin" / "orchestrator"
PID_LABEL = "orchestrator.pid"
MARK_LABEL = "orchestrator.replay=1"


def example_tests() -> int:
    """How many tests the bundled example's base has (every one is a property)."""
    tests = ROOT / "fixtures" / "example" / "base" / "tests"
    return sum(path.read_text().count("\ndef test_") for path in tests.glob("test_*.py"))


# ---------------------------------------------------------------- the replay CLI


@dataclass(frozen=True, kw_only=True)
class Run:
    exit_code: int
    stdout: str
    stderr: str
    pid: int
    out: Path

    def summary(self) -> dict[str, Any]:
        path = self.out / "summary.json"
        if not path.exists():
            raise AssertionError(f"no summary.json (exit {self.exit_code}): {self.stderr[-3000:]}")
        return json.loads(path.read_text())

    def run_log(self) -> dict[str, Any]:
        return json.loads((self.out / "run-log.json").read_text())

    def lanes(self) -> dict[str, str]:
        return {entry["property_id"]: entry["lane"] for entry in self.summary()["decisions"]}

    def evidence(self) -> list[dict[str, Any]]:
        return [
            json.loads((self.out / entry["evidence_file"]).read_text())
            for entry in self.summary()["decisions"]
        ]


def replay_command(
    repo: Path,
    base: str,
    patch: str,
    *,
    image: str,
    out: Path,
    replays: int = 2,
    timeout_s: float = 60.0,
    engines: Sequence[str] = (),
    properties: Sequence[str] = (),
    extra: Sequence[str] = (),
) -> list[str]:
    args = [
        str(CLI),
        "replay",
        "--repo",
        str(repo),
        "--base",
        base,
        "--patch",
        patch,
        "--image",
        image,
        "--out",
        str(out),
        "--replays",
        str(replays),
        "--timeout",
        str(timeout_s),
        "--no-record",
    ]
    for url in engines:
        args += ["--engine", url]
    for node_id in properties:
        args += ["--property", node_id]
    return [*args, *extra]


def start(
    args: Sequence[str], scratch: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    scratch.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        list(args),
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=scratch,
    )


def finish(process: subprocess.Popen[str], out: Path, timeout: float = 600) -> Run:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
        raise AssertionError(f"replay did not finish in {timeout}s: {stderr[-3000:]}") from None
    return Run(exit_code=process.returncode, stdout=stdout, stderr=stderr, pid=process.pid, out=out)


def run(args: Sequence[str], out: Path, scratch: Path, env: Mapping[str, str] | None = None) -> Run:
    return finish(start(args, scratch, env), out)


def ours(client: Any, pid: int) -> tuple[list[str], list[str]]:
    """The containers and volumes a replay process left on an engine (by its labels)."""
    label = f"{PID_LABEL}={pid}"
    containers = [c.name for c in client.containers.list(all=True, filters={"label": label})]
    volumes = [v.name for v in client.volumes.list(filters={"label": label})]
    return containers, volumes
