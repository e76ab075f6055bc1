"""The replay CLI around two engines, for the scale-out tests (and bench/engines.py).

The second engine itself, ``wait_for`` and the CLI runner (``CliProcess``, whose ``Run``
reads a run's evidence through its summary.json) live in tests/support (one for the suite).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from support.cli import CLI, ERROR, CliProcess, Run  # noqa: E402
from support.engine import SecondEngine, new_second_engine  # noqa: E402
from support.polling import wait_for  # noqa: E402

__all__ = ["CLI", "ERROR", "CliProcess", "Run", "SecondEngine", "new_second_engine", "wait_for"]

PID_LABEL = "orchestrator.pid"
MARK_LABEL = "orchestrator.replay=1"


def example_tests() -> int:
    """How many tests the bundled example's base has (every one is a property)."""
    tests = ROOT / "fixtures" / "example" / "base" / "tests"
    return sum(path.read_text().count("\ndef test_") for path in tests.glob("test_*.py"))


# ---------------------------------------------------------------- the replay CLI


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


def ours(client: Any, pid: int) -> tuple[list[str], list[str]]:
    """The containers and volumes a replay process left on an engine (by its labels)."""
    label = f"{PID_LABEL}={pid}"
    containers = [c.name for c in client.containers.list(all=True, filters={"label": label})]
    volumes = [v.name for v in client.volumes.list(filters={"label": label})]
    return containers, volumes
