"""The fixed overhead of a small whole-suite replay: replay minus one plain run per side.

    .venv/bin/python bench/overhead.py --checkout main=/work/main --checkout branch=.
        [--repo PATH --base REV --patch REV] [--no-example] [--rounds 10]

Targets: the bundled example (fixtures/build_example.py) with a patch that only touches
its README, and, with ``--repo``, a real repository (``--base``/``--patch``: two of its
revisions whose tests behave alike, so that screening finds no signal and each side
runs the suite once). In every round and for every target, one after another:

- (f) floor: one plain ``pytest -q`` of the whole suite per side, both at once, each in
  a ``docker run`` of the runner image with a replay container's limits (1 CPU, 512 MB,
  no network, read-only root, uid 1000; ``PYTHONPATH=src`` when the tree has ``src/``);
- (r) ``orchestrator replay --repo --base --patch --image ID`` of each checkout (its
  own ``.venv``), ``--replays 1``: the whole suite screened once per side and nothing
  replayed after (the example's suite has tests that fail on both sides: signal, which
  ``--replays 1`` leaves decided on the screening run); ledger record on (the default),
  each checkout in its own scratch folder (its own ``.replay/``).

Each checkout's CLI caches its bytecode in a folder of its own (as an installed tool
does; ``--compile-each-run``: nothing cached, every start compiles the package), so that
no checkout reads ``__pycache__`` folders other runs left in its tree. The order of the
floor and the checkouts rotates from round to round (one warm-up round
is not counted), so that load from elsewhere falls on all of them alike. Prints, per
target and checkout, the medians of (r), of (f), and of the per-round difference
(r) - (f) in seconds: the fixed overhead the goal bounds (at most 0.3 s), and the
median CPU time of each checkout's CLI process (less sensitive to load from elsewhere).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.build_example import build_example  # noqa: E402

NOOP_PATCH = "bench-noop"


@dataclass(frozen=True)
class Target:
    name: str
    repo: Path
    base: str
    patch: str
    trees: tuple[Path, Path]


def checkout(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=PATH")
    cli = Path(path) / ".venv" / "bin" / "orchestrator"
    if not cli.exists():
        raise argparse.ArgumentTypeError(f"{cli} is missing (run `make venv` there)")
    return name, Path(path).resolve()


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"bench: git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def export(repo: Path, rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", rev], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


def target(name: str, repo: Path, base: str, patch: str, work: Path) -> Target:
    base, patch = git(repo, "rev-parse", base), git(repo, "rev-parse", patch)
    trees = (
        export(repo, base, work / "trees" / name / "base"),
        export(repo, patch, work / "trees" / name / "patch"),
    )
    return Target(name=name, repo=repo, base=base, patch=patch, trees=trees)


def floor(image: str, trees: tuple[Path, Path]) -> float:
    """(f): one plain pytest run per side, both at once."""
    codes: list[int] = []

    def run(tree: Path) -> None:
        path = ["-e", "PYTHONPATH=/src/src"] if (tree / "src").is_dir() else []
        command = [
            "docker", "run", "--rm", "--network", "none", "--read-only",
            "--tmpfs", "/tmp:rw,exec", "--cpus", "1", "--memory", "512m", "--user", "1000",
            "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "HOME=/tmp", *path,
            "-v", f"{tree}:/src:ro", "-w", "/src",
            image, "python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
        ]  # fmt: skip
        codes.append(subprocess.run(command, capture_output=True, check=False).returncode)

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(tree,)) for tree in trees]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if any(code not in (0, 1) for code in codes):
        sys.exit(f"bench: the floor's pytest exited {codes} (collection errors?)")
    return elapsed


def replay(
    checkout_path: Path, image: str, item: Target, cwd: Path, out: Path, env: dict[str, str]
) -> tuple[float, float]:
    """(r): one whole-suite `orchestrator replay` of ``item`` with one checkout's CLI: its
    wall time and its CPU time (user + system, with the processes it waited for, such as
    git; the containers' work is the engine's and is not counted)."""
    command = [
        str(checkout_path / ".venv" / "bin" / "orchestrator"), "replay",
        "--repo", str(item.repo), "--base", item.base, "--patch", item.patch,
        "--image", image, "--out", str(out), "--replays", "1", "--json",
    ]  # fmt: skip
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    stderr = child.stderr.read()  # the log: read as it comes, so the pipe never fills
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # 1: the example's suite fails on both sides
        sys.exit(f"bench: {checkout_path} replay exited {code}: {stderr[-600:]!r}")
    return elapsed, usage.ru_utime + usage.ru_stime


def bytecode_env(work: Path, name: str, *, compile_each_run: bool) -> dict[str, str]:
    """The CLI's environment: its bytecode cached in a folder of its own (as an installed
    tool has it), or, with ``compile_each_run``, nothing cached nor read. Either way no
    checkout reads ``__pycache__`` folders left in its tree by other runs."""
    env = dict(os.environ)
    if compile_each_run:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        empty = work / "pycache-none"
        empty.mkdir(exist_ok=True)
        env["PYTHONPYCACHEPREFIX"] = str(empty)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / f"pycache-{name}")
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=checkout, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--image", default="orchestrator-runner:latest")
    parser.add_argument("--repo", type=Path, help="a real repository to time as well")
    parser.add_argument("--base", help="with --repo: the base revision")
    parser.add_argument("--patch", help="with --repo: the patch revision")
    parser.add_argument("--no-example", action="store_true", help="skip the bundled example")
    parser.add_argument(
        "--compile-each-run",
        action="store_true",
        help="no bytecode cache: every CLI start compiles the package's source",
    )
    args = parser.parse_args()
    if args.repo is not None and not (args.base and args.patch):
        parser.error("--repo needs --base and --patch")
    names = [name for name, _ in args.checkout]
    if len(set(names)) != len(names):
        parser.error("give each checkout its own name")

    image = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", args.image],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    targets: list[Target] = []
    # target -> variant ("floor" or a checkout's name) -> seconds, one per counted round
    times: dict[str, dict[str, list[float]]] = {}
    cpus: dict[str, dict[str, list[float]]] = {}  # the same, the CLI's CPU seconds
    try:
        if not args.no_example:
            example = build_example(
                work / "example",
                extra_patches={NOOP_PATCH: {"README.md": "The example, with a README.\n"}},
            )
            targets.append(
                target("example", example.path, example.base, example.rev(NOOP_PATCH), work)
            )
        if args.repo is not None:
            targets.append(target(args.repo.name, args.repo.resolve(), args.base, args.patch, work))
        variants = ["floor", *names]
        paths = dict(args.checkout)
        for item in targets:
            times[item.name] = {variant: [] for variant in variants}
            cpus[item.name] = {variant: [] for variant in variants}
        for round_no in range(args.rounds + 1):
            shift = round_no % len(variants)
            order = variants[shift:] + variants[:shift]
            for item in targets:
                shown = []
                for variant in order:
                    if variant == "floor":
                        elapsed, cpu = floor(image, item.trees), 0.0
                    else:
                        cwd = work / "cwd" / item.name / variant
                        cwd.mkdir(parents=True, exist_ok=True)
                        out = work / "runs" / f"{item.name}-{variant}-{round_no}"
                        env = bytecode_env(work, variant, compile_each_run=args.compile_each_run)
                        elapsed, cpu = replay(paths[variant], image, item, cwd, out, env)
                    shown.append(f"{variant} {elapsed:.2f}" + (f" (CPU {cpu:.2f})" if cpu else ""))
                    if round_no:  # round 0 warms caches up
                        times[item.name][variant].append(elapsed)
                        cpus[item.name][variant].append(cpu)
                label = "warm-up" if round_no == 0 else f"round {round_no}"
                load = os.getloadavg()[0]
                print(f"{label} {item.name}: {', '.join(shown)} (load {load:.1f})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"\n{args.rounds} rounds, load at the end {load}; medians in seconds")
    print(
        "| target | checkout | replay (r) | floor (f) | (r) - (f), per round | quartiles "
        "| CLI CPU |"
    )
    print("|---|---|---:|---:|---:|---|---:|")
    for item in targets:
        floors = times[item.name]["floor"]
        for name in names:
            replays = times[item.name][name]
            diffs = [r - f for r, f in zip(replays, floors, strict=True)]
            low, _, high = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else (0, 0, 0)
            print(
                f"| {item.name} | {name} | {statistics.median(replays):.2f} "
                f"| {statistics.median(floors):.2f} | {statistics.median(diffs):+.2f} "
                f"| {low:+.2f} .. {high:+.2f} | {statistics.median(cpus[item.name][name]):.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
