"""Helpers for the reliability tests: the example repository, the CLI, leftovers.

Real engine, real git: every test here builds the bundled example (or a variant with
extra properties on both sides) with fixtures/build_example.py, runs the
`orchestrator replay` command in a subprocess, and then checks that the run left no
container, volume, worktree or exported source tree behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures.build_example import ExampleRepo  # noqa: E402

CLI = ROOT / ".venv" / "bin" / "orchestrator"
SCRATCH_PREFIX = "orchestrator-replay-"  # exported source trees (adapters/git.py)
PID_LABEL = "orchestrator.pid"  # the owning process, on every container (adapters/docker/owners.py)


@dataclass(frozen=True, kw_only=True)
class Run:
    """One finished `orchestrator replay` process."""

    exit_code: int
    stdout: str
    stderr: str
    pid: int
    out: Path

    @property
    def report(self) -> dict[str, Any]:
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError:
            raise AssertionError(
                f"no JSON report (exit {self.exit_code}); stderr: {self.stderr[-2000:]}"
            ) from None

    def evidence(self) -> list[dict[str, Any]]:
        """The evidence documents the run wrote (one per property)."""
        return [json.loads(path.read_text()) for path in sorted(self.out.glob("evidence-*.json"))]

    def decisions(self) -> list[dict[str, Any]]:
        return [json.loads(path.read_text()) for path in sorted(self.out.glob("decision-*.json"))]


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


class Runner:
    """Starts `orchestrator replay` with a private TMPDIR, so exported trees are visible."""

    def __init__(self, tmp_path: Path) -> None:
        self.scratch = tmp_path / "scratch"
        self.scratch.mkdir()
        self.env = {
            **os.environ,
            "TMPDIR": str(self.scratch),
            "CI": "1",  # structlog JSON lines, no progress bars
        }

    def start(
        self, args: Sequence[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            list(args),
            env={**self.env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.scratch.parent,
        )

    def finish(self, process: subprocess.Popen[str], out: Path, timeout: float = 240) -> Run:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=60)
            raise AssertionError(
                f"orchestrator replay did not finish in {timeout}s: {stderr[-2000:]}"
            ) from None
        return Run(
            exit_code=process.returncode, stdout=stdout, stderr=stderr, pid=process.pid, out=out
        )

    def run(self, args: Sequence[str], out: Path, env: Mapping[str, str] | None = None) -> Run:
        return self.finish(self.start(args, env), out)

    def leftover_trees(self) -> list[str]:
        return sorted(p.name for p in self.scratch.iterdir() if p.name.startswith(SCRATCH_PREFIX))


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


def wait_for(predicate: Any, *, timeout: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something truthy (a condition, not a sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
