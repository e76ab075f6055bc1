"""`orchestrator replay` of two or more checkouts, alternated round by round.

    .venv/bin/python bench/replay_ab.py --checkout old=/path/a --checkout new=/path/b
        [--rounds 10] [--replays 5] [--bytecode-cache]

Each checkout needs its own ``.venv`` (``make venv`` there). Builds the bundled example
once and runs the same replay as bench/replay.py's (c) (the budget property on base and
on ``patch/extra-clock-read``, same image ID, fixture and replays) with each checkout's
CLI, one after another in every round (the order reversed every other round, one
warm-up round not counted), so that load on a shared machine falls on all of them alike.
Per run: wall time and the CLI's CPU time (user + system of it and the processes it
waited for, such as git; the containers' work is the engine's and is not counted).
Prints the medians and, per checkout, the median of its per-round ratio to the first
checkout (wall) and of its per-round CPU difference.

``--bytecode-cache`` lets each checkout's interpreters cache bytecode in a folder of its
own (PYTHONPYCACHEPREFIX, PYTHONDONTWRITEBYTECODE unset): without it, an editable
checkout under PYTHONDONTWRITEBYTECODE=1 compiles its whole import path on every start.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.build_example import BUDGET_PROPERTY, build_example  # noqa: E402

PATCH = "extra-clock-read"


def checkout(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=PATH")
    cli = Path(path) / ".venv" / "bin" / "orchestrator"
    if not cli.exists():
        raise argparse.ArgumentTypeError(f"{cli} is missing (run `make venv` there)")
    return name, Path(path).resolve()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=checkout, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--replays", type=int, default=5)
    parser.add_argument("--image", default="orchestrator-runner:latest")
    parser.add_argument("--bytecode-cache", action="store_true")
    args = parser.parse_args()
    names = [name for name, _ in args.checkout]
    if len(set(names)) != len(names) or len(names) < 2:
        parser.error("give at least two checkouts, each its own name")

    image = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", args.image],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="bench-replay-ab-"))
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    try:
        repo = build_example(work / "example")
        patch = repo.rev(PATCH)
        for round_no in range(args.rounds + 1):
            order = args.checkout if round_no % 2 == 0 else args.checkout[::-1]
            for name, path in order:
                cwd = work / f"cwd-{name}"  # each checkout's default ledger stays its own
                cwd.mkdir(exist_ok=True)
                env = dict(os.environ)
                if args.bytecode_cache:
                    env.pop("PYTHONDONTWRITEBYTECODE", None)
                    env["PYTHONPYCACHEPREFIX"] = str(work / f"pycache-{name}")
                command = [
                    str(path / ".venv" / "bin" / "orchestrator"), "replay",
                    "--repo", str(repo.path), "--base", repo.base, "--patch", patch,
                    "--image", image, "--property", BUDGET_PROPERTY,
                    "--fixture", str(repo.fixture), "--replays", str(args.replays),
                    "--timeout", "60", "--out", str(work / "runs" / f"{name}-{round_no}"),
                    "--json",
                ]  # fmt: skip
                started = time.perf_counter()
                child = subprocess.Popen(
                    command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
                _, status, usage = os.wait4(child.pid, 0)
                wall = time.perf_counter() - started
                stderr = child.stderr.read().decode() if child.stderr else ""
                if os.waitstatus_to_exitcode(status) != 1:  # 1: the expected regression
                    sys.exit(f"bench: {name} exited {status}: {stderr[-400:]}")
                if round_no == 0:
                    continue  # warm-up
                cpu = usage.ru_utime + usage.ru_stime
                samples[name].append((wall, cpu))
                print(
                    f"round {round_no} {name}: wall {wall:.2f} s, CPU {cpu:.2f} s, "
                    f"load {os.getloadavg()[0]:.1f}",
                    file=sys.stderr,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    first = names[0]
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"{args.rounds} rounds, {args.replays} replays per side, load at the end {load}")
    print(f"| checkout | wall median (s) | CPU median (s) | wall / {first} | CPU - {first} (s) |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        walls = [wall for wall, _ in samples[name]]
        cpus = [cpu for _, cpu in samples[name]]
        ratio = statistics.median(
            w / w0 for (w, _), (w0, _) in zip(samples[name], samples[first], strict=True)
        )
        extra = statistics.median(
            c - c0 for (_, c), (_, c0) in zip(samples[name], samples[first], strict=True)
        )
        print(
            f"| {name} | {statistics.median(walls):.2f} | {statistics.median(cpus):.2f} "
            f"| {ratio:.3f} | {extra:+.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
