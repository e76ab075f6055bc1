"""Replay speed on the bundled example: naive shell vs floor vs `orchestrator replay`.

    .venv/bin/python bench/replay.py [--replays 5] [--rounds 5] [--image orchestrator-runner:latest]

Builds the example (fixtures/build_example.py), exports the base and the
extra-clock-read patch trees, and times, side by side in each round, with the same
image ID:

(a) naive: a shell script that calls `docker run` once per replay, one after another
    (2 x N container starts);
(b) floor: a shell script that starts one `docker run` per side, both at once, each
    looping N bare `pytest` invocations;
(c) `orchestrator replay` (source export, probe, evidence, decision and the ledger
    record, which is on by default, included);
(c2) the same with `--no-record`, to show the ledger's share (not part of the goals).

All of them run the same property with the same probe plugin and fixture. Prints the
median wall time of each over the rounds and the ratios (a)/(c) and (c)/(b) (and the
same for (c2));
--markdown prints the table for bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.build_example import BUDGET_PROPERTY, build_example  # noqa: E402

PATCH = "extra-clock-read"
PROBE_MOUNT = "/opt/orchestrator"  # the host's orchestrator package, read-only (probe only)


def image_id(ref: str) -> str:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"bench: image {ref} not found (run `make image` first)")
    return done.stdout.strip()


def export_tree(repo: Path, rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def docker_run_prefix(image: str, tree: Path, fixture: Path) -> list[str]:
    """A hermetic-enough `docker run` like the one a CI script would write by hand."""
    return [
        "docker",
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        f"{tree}:/src:ro",
        "-v",
        f"{fixture}:/fixture.json:ro",
        "-v",
        f"{ROOT / 'orchestrator'}:{PROBE_MOUNT}/orchestrator:ro",
        "-e",
        f"PYTHONPATH={PROBE_MOUNT}",
        "-e",
        "REPLAY_FIXTURE=/fixture.json",
        "-e",
        "REPLAY_RESULT=/tmp/result.json",
        "-e",
        "PYTHONDONTWRITEBYTECODE=1",
        "-w",
        "/src",
        image,
    ]


PYTEST = [
    "python3",
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "-p",
    "orchestrator.probe.plugin",
    BUDGET_PROPERTY,
]


def naive_script(image: str, trees: dict[str, Path], fixture: Path, replays: int) -> str:
    lines = ["set -u"]
    for tree in trees.values():
        run = shlex.join([*docker_run_prefix(image, tree, fixture), *PYTEST])
        lines.append(f"for i in $(seq {replays}); do {run} >/dev/null || true; done")
    return "\n".join(lines)


def floor_script(image: str, trees: dict[str, Path], fixture: Path, replays: int) -> str:
    loop = f"for i in $(seq {replays}); do {shlex.join(PYTEST)} >/dev/null || true; done"
    lines = ["set -u"]
    for tree in trees.values():
        run = shlex.join([*docker_run_prefix(image, tree, fixture), "sh", "-c", loop])
        lines.append(f"{run} >/dev/null &")
    lines.append("wait")
    return "\n".join(lines)


def orchestrator_command(
    image: str,
    repo: Path,
    base: str,
    patch: str,
    fixture: Path,
    replays: int,
    out: Path,
    *extra: str,
) -> list[str]:
    cli = ROOT / ".venv" / "bin" / "orchestrator"
    return [
        str(cli) if cli.exists() else "orchestrator",
        "replay",
        "--repo",
        str(repo),
        "--base",
        base,
        "--patch",
        patch,
        "--image",
        image,
        "--property",
        BUDGET_PROPERTY,
        "--fixture",
        str(fixture),
        "--replays",
        str(replays),
        "--timeout",
        "60",
        "--out",
        str(out),
        "--json",
        *extra,
    ]


def timed(command: list[str], *, expect: tuple[int, ...] = (0,), cwd: Path | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=cwd)
    elapsed = time.perf_counter() - started
    if done.returncode not in expect:
        tail = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        sys.exit(f"bench: {command[0]} exited {done.returncode}: {tail}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replays", type=int, default=5, help="replays per side (N)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the median is reported")
    parser.add_argument("--image", default="orchestrator-runner:latest")
    parser.add_argument("--markdown", action="store_true", help="print a table for the README")
    args = parser.parse_args(argv)

    image = image_id(args.image)
    workdir = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    try:
        repo = build_example(workdir / "example")
        patch = repo.rev(PATCH)
        trees = {
            "base": export_tree(repo.path, repo.base, workdir / "base"),
            "patch": export_tree(repo.path, patch, workdir / "patch"),
        }
        fixture = repo.fixture
        naive = ["bash", "-c", naive_script(image, trees, fixture, args.replays)]
        floor = ["bash", "-c", floor_script(image, trees, fixture, args.replays)]
        samples: dict[str, list[float]] = {"a": [], "b": [], "c": [], "c2": []}
        # One warm-up of each, not counted (page cache, first container start).
        timed(naive)
        timed(floor)
        for round_no in range(args.rounds + 1):
            out = workdir / "runs" / str(round_no)
            # Exit 1: the patch is a property regression, the expected verdict.
            seconds_c = timed(
                orchestrator_command(
                    image, repo.path, repo.base, patch, fixture, args.replays, out
                ),
                expect=(1,),
                cwd=workdir,  # the default ledger, .replay/ledger.db, goes there
            )
            out_c2 = out.with_name(f"{round_no}-c2")
            seconds_c2 = timed(
                orchestrator_command(
                    image, repo.path, repo.base, patch, fixture, args.replays, out_c2, "--no-record"
                ),
                expect=(1,),
                cwd=workdir,
            )
            if round_no == 0:
                continue  # warm-up
            samples["c"].append(seconds_c)
            samples["c2"].append(seconds_c2)
            samples["a"].append(timed(naive))
            samples["b"].append(timed(floor))
            print(
                f"round {round_no}: a {samples['a'][-1]:.2f} s  b {samples['b'][-1]:.2f} s  "
                f"c {seconds_c:.2f} s  c2 {seconds_c2:.2f} s",
                file=sys.stderr,
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    median = {key: statistics.median(values) for key, values in samples.items()}
    rows = [
        ("(a) naive: docker run per replay, sequential", median["a"], samples["a"]),
        ("(b) floor: one docker run per side, both at once", median["b"], samples["b"]),
        ("(c) orchestrator replay", median["c"], samples["c"]),
        ("(c2) orchestrator replay --no-record", median["c2"], samples["c2"]),
    ]
    speedup = median["a"] / median["c"]
    overhead = median["c"] / median["b"]
    no_record = (
        f"without the ledger record: (a)/(c2) = {median['a'] / median['c2']:.2f}x, "
        f"(c2)/(b) = {median['c2'] / median['b']:.2f}x"
    )
    cpus = os.cpu_count()
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    conditions = (
        f"N={args.replays} replays per side, median of {args.rounds}, {cpus} CPUs, load {load}"
    )
    if args.markdown:
        print(f"{conditions}\n")
        print("| variant | median (s) | samples (s) |")
        print("|---|---:|---|")
        for name, value, values in rows:
            print(f"| {name} | {value:.2f} | {', '.join(f'{v:.2f}' for v in values)} |")
        print(f"\n(a)/(c) = {speedup:.2f}x (goal >= 3)  ")
        print(f"(c)/(b) = {overhead:.2f}x (goal <= 1.25)  ")
        print(no_record)
    else:
        print(conditions)
        for name, value, _ in rows:
            print(f"{name:52s} {value:6.2f} s")
        print(f"(a)/(c) = {speedup:.2f}x (goal >= 3); (c)/(b) = {overhead:.2f}x (goal <= 1.25)")
        print(no_record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
