"""Shrinking against the real test in one warm container, next to one `docker run` per call.

Run: ``.venv/bin/python bench/shrink_container.py [--rounds 3] [--docker-runs 8]``
(a few minutes; needs the engine and the runner image, as `make test` sets up).

Builds the bundled example and, for seed 000's walkthrough payload at 50, 200 and 800
keys (``fixtures.build_example.wide_user``), runs ``orchestrator shrink --test`` on
tests/test_users.py at patch/raw-role through the service (2 attempts, one warm
container): property calls per attempt, wall time of the whole shrink (container start,
both attempts, removal), and per candidate the host's round trip (job written to result
read), the driver's own wall time of the job (fork to reaped) and the job process's CPU
time. The baseline is the same test as one ``docker run`` per call (same image, same
mounts and limits as a replay, a fresh ``python3 -m pytest`` with the probe): the median
of ``--docker-runs`` real runs, times the shrink's property calls. Prints Markdown tables
and the load average, because the machine is shared and wall times move with it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fixtures.build_example import ROLE_PROPERTY, build_example, wide_user  # noqa: E402
from orchestrator.core.backend import Backend  # noqa: E402
from orchestrator.core.digest import canonical_json  # noqa: E402
from orchestrator.log import configure  # noqa: E402
from orchestrator.services.shrink import (  # noqa: E402
    ShrinkTestRequest,
    plan_test_shrink,
    shrink_test,
)
from orchestrator.services.sides.pool import open_backend  # noqa: E402

SIZES = (50, 200, 800)
PATCH = "raw-role"
PROBE_MOUNT = "/opt/orchestrator"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def load() -> str:
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def one_shrink(backend: Backend, repo: Path, rev: str, image: str, keys: int) -> dict[str, Any]:
    request = ShrinkTestRequest(
        repo=repo, rev=rev, image=image, test=ROLE_PROPERTY, timeout_s=60, attempts=2
    )
    plan = plan_test_shrink(request, backend=backend)
    started = time.perf_counter()
    outcome = shrink_test(plan, wide_user(keys), backend=backend)
    wall_s = time.perf_counter() - started
    runs = outcome.job_runs
    docs = [run.replay_file.doc or {} for run in runs]
    return {
        "calls": [calls for _, calls in outcome.report.minima],
        "stable": outcome.report.stable,
        "minimal": canonical_json(outcome.report.minimal).decode(),
        "wall_s": wall_s,
        # The first job also waits for the driver to start (interpreter, pytest import).
        "round_trip_ms": [run.round_trip_ms for run in runs[1:]],
        "first_ms": runs[0].round_trip_ms,
        "driver_ms": [float(doc["wall_ms"]) for doc in docs[1:] if "wall_ms" in doc],
        "cpu_ms": [float(doc["cpu_ms"]) for doc in docs[1:] if "cpu_ms" in doc],
    }


def export(repo: Path, rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def docker_run_seconds(image: str, tree: Path, fixture: Path, runs: int) -> list[float]:
    """One fresh container per call, as a hand-written CI loop would shrink."""
    command = [
        "docker", "run", "--rm", "--network", "none", "--read-only",
        "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m,mode=1777", "--user", "1000:1000",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--memory", "512m", "--memory-swap", "512m", "--pids-limit", "256", "--cpus", "1",
        "--init", "-v", f"{tree}:/src:ro", "-v", f"{fixture}:/replay/fixture.json:ro",
        "-v", f"{ROOT / 'orchestrator'}:{PROBE_MOUNT}/orchestrator:ro",
        "-e", f"PYTHONPATH={PROBE_MOUNT}", "-e", "REPLAY_FIXTURE=/replay/fixture.json",
        "-e", "REPLAY_RESULT=/tmp/result.json", "-e", "PYTHONDONTWRITEBYTECODE=1",
        "-e", "HOME=/tmp", "-w", "/src", image,
        "python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "-p", "orchestrator.probe.plugin", ROLE_PROPERTY,
    ]  # fmt: skip
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds.append(time.perf_counter() - started)
        if done.returncode != 1:  # the candidate fails the test: pytest's "tests failed"
            sys.exit(f"bench: docker run exited {done.returncode}: {done.stderr[-500:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="shrinks per size (medians)")
    parser.add_argument("--docker-runs", type=int, default=8, help="docker runs sampled")
    parser.add_argument("--image", default="orchestrator-runner:latest")
    args = parser.parse_args(argv)
    configure("console", {}, verbose=False)

    with open_backend(os.environ) as backend:
        image = backend.resolve_image(args.image).id
        workdir = Path(tempfile.mkdtemp(prefix="bench-shrink-"))
        print(f"load before: {load()}")
        try:
            repo = build_example(workdir / "example")
            tree = export(repo.path, repo.rev(PATCH), workdir / "tree")
            fixture = workdir / "candidate.json"
            fixture.write_bytes(canonical_json(wide_user(200)))
            fixture.chmod(0o644)
            rows = []
            for keys in SIZES:
                shrinks = [
                    one_shrink(backend, repo.path, repo.rev(PATCH), image, keys)
                    for _ in range(args.rounds)
                ]
                docker = docker_run_seconds(image, tree, fixture, args.docker_runs)
                rows.append((keys, shrinks, docker))
                print(f"{keys} keys done (load {load()})", file=sys.stderr)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    print()
    print(
        "| keys | property calls (attempt 1 + 2) | wall, whole shrink (s) "
        "| per candidate, warm: round trip median / p90 (ms) | driver wall (ms) "
        "| CPU (ms) | one `docker run` per call (s) | the same calls as `docker run`s (s) "
        "| speed-up |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for keys, shrinks, docker in rows:
        calls = shrinks[0]["calls"]
        total_calls = sum(calls)
        walls = [shrink["wall_s"] for shrink in shrinks]
        trips = [ms for shrink in shrinks for ms in shrink["round_trip_ms"]]
        driver = [ms for shrink in shrinks for ms in shrink["driver_ms"]]
        cpu = [ms for shrink in shrinks for ms in shrink["cpu_ms"]]
        per_run = statistics.median(docker)
        as_runs = per_run * total_calls
        wall = statistics.median(walls)
        print(
            f"| {keys} | {calls[0]} + {calls[1]} | {wall:.2f} "
            f"| {statistics.median(trips):.0f} / {percentile(trips, 0.9):.0f} "
            f"| {statistics.median(driver):.0f} | {statistics.median(cpu):.0f} "
            f"| {per_run:.2f} | {as_runs:.1f} | {as_runs / wall:.1f}x |"
        )
    print()
    print(
        "| keys | walls of the rounds (s) | first job, driver start included (ms) "
        "| minimal | stable |"
    )
    print("|---:|---|---:|---|---|")
    for keys, shrinks, _ in rows:
        walls = ", ".join(f"{shrink['wall_s']:.2f}" for shrink in shrinks)
        first = statistics.median([shrink["first_ms"] for shrink in shrinks])
        stable = all(shrink["stable"] for shrink in shrinks)
        print(f"| {keys} | {walls} | {first:.0f} | `{shrinks[0]['minimal']}` | {stable} |")
    print()
    print(f"load after: {load()} (2 CPUs; the machine is shared)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
