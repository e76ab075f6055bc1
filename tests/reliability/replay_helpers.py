"""Helpers for the reliability tests: the example repository, the CLI, leftovers.

Real engine, real git: every test here builds the bundled example (or a variant with
extra properties on both sides) with fixtures/build_example.py, runs the
`orchestrator replay` command in a subprocess, and then checks that the run left no
container, volume, worktree or exported source tree behind.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from support.cli import CLI, CliProcess, Run  # noqa: E402
from support.polling import wait_for  # noqa: E402

from fixtures.build_example import ExampleRepo  # noqa: E402

__all__ = ["CLI", "HANG_TIMEOUT_S", "Run", "wait_for"]

# A command line run in the test's own process (the ``in_process`` fixture).
InProcess = Callable[[Sequence[str], Path], Run]

PID_LABEL = "orchestrator.pid"  # the owning process, on every container (adapters/docker/owners.py)

# The --timeout of a hanging replay that a signal or a dead engine ends, not its deadline:
# far past the moment the test acts (seconds after the replay's containers run, on a loaded
# machine), short enough that a run which ignored what the test did still ends by itself.
HANG_TIMEOUT_S = 30.0


def labels_of(evidence: Mapping[str, Any], side: str) -> list[str]:
    return [replay["label"] for replay in evidence[side]]


def reasons_of(evidence: Mapping[str, Any], side: str) -> list[str | None]:
    return [replay.get("reason") for replay in evidence[side]]


def replay_args(
    repo: ExampleRepo,
    *,
    patch: str,
    properties: Sequence[str],
    image: str,
    out: Path,
    replays: int = 2,
    timeout_s: float = 20.0,
    fixture: bool = True,
    extra: Sequence[str] = (),
) -> list[str]:
    args = [
        str(CLI),
        "replay",
        "--repo",
        str(repo.path),
        "--base",
        repo.base,
        "--patch",
        repo.rev(patch),
        "--image",
        image,
        "--out",
        str(out),
        "--replays",
        str(replays),
        "--timeout",
        str(timeout_s),
        "--json",
    ]
    for node_id in properties:
        args += ["--property", node_id]
    if fixture:
        args += ["--fixture", str(repo.fixture)]
    return [*args, *extra]


class Runner(CliProcess):
    """`orchestrator replay` in a child process, with a private TMPDIR under ``tmp_path``."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path / "scratch")


def run_containers(client: Any, pid: int) -> list[Any]:
    """Containers (any state) that the replay process ``pid`` created, by their labels."""
    return list(
        client.containers.list(
            all=True, ignore_removed=True, filters={"label": f"{PID_LABEL}={pid}"}
        )
    )


def running_containers(client: Any, process: subprocess.Popen[str]) -> list[Any]:
    """The replay's running containers; fails at once if the replay process has ended."""
    if process.poll() is not None:
        _, stderr = process.communicate()
        raise AssertionError(
            f"the replay ended early (exit {process.returncode}): {stderr[-2000:]}"
        )
    return [c for c in run_containers(client, process.pid) if c.status == "running"]


def volume_names(client: Any) -> set[str]:
    return {volume.name for volume in client.volumes.list()}


def worktrees(repo: ExampleRepo) -> list[str]:
    listing = subprocess.run(
        ["git", "-C", str(repo.path), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in listing.splitlines() if line.startswith("worktree ")]


def assert_nothing_left(
    client: Any, run: Run, runner: Runner, repo: ExampleRepo, volumes_before: set[str]
) -> None:
    containers = run_containers(client, run.pid)
    assert containers == [], f"containers left: {[c.name for c in containers]}"
    new_volumes = volume_names(client) - volumes_before
    assert new_volumes == set(), f"volumes left: {sorted(new_volumes)}"
    assert worktrees(repo) == [f"worktree {repo.path}"], "a git worktree was left"
    assert runner.leftover_trees() == [], "an exported source tree was left"
