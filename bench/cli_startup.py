"""The CLI's fixed overhead: `--help` and the read commands of two checkouts, alternated.

    .venv/bin/python bench/cli_startup.py --old /path/to/old/checkout [--runs 15]
        [--importtime 12]

Both checkouts run with this interpreter and its installed dependencies (``python -m
orchestrator`` with ``PYTHONPATH`` set to the checkout, so only the package differs), each
with a bytecode cache of its own (``PYTHONPYCACHEPREFIX``; an installed wheel has its
bytecode compiled at install time) and warmed up once. The read commands run against a
ledger made by the first warm-up in a scratch folder of each checkout's own. Runs are
alternated old/new (the order reversed every other round), so load on a shared machine
falls on both alike. Prints, per command, the median and the minimum wall time of each
checkout and the median of the per-round ratios new/old.

``--importtime K`` also prints the K modules with the largest cumulative import time
(``python -X importtime``) for ``--help`` and ``freeze list`` of each checkout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("--version",),
    ("freeze", "list"),
    ("infra", "list"),
    ("check",),
)


def environment(checkout: Path, cache: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    env.pop("CI", None)
    return env


def run_once(checkout: Path, cache: Path, cwd: Path, args: tuple[str, ...]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=environment(checkout, cache),
        capture_output=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(args)}: exit {done.returncode}: {done.stderr!r}")
    return seconds


def import_times(checkout: Path, cache: Path, cwd: Path, args: tuple[str, ...], top: int):
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", *args],
        cwd=cwd,
        env=environment(checkout, cache),
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, _, rest = line.partition(":")
        _self, cumulative, name = (part.strip() for part in rest.split("|"))
        rows.append((int(cumulative), name))
    rows.sort(reverse=True)
    return rows[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--new", type=Path, default=ROOT, help="default: this checkout")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--importtime", type=int, default=0, metavar="K")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="cli-startup-"))
    sides = {"old": args.old.resolve(), "new": args.new.resolve()}
    folders = {}
    for name, checkout in sides.items():
        folder = scratch / name
        (folder / "cwd").mkdir(parents=True)
        folders[name] = folder
        for command in COMMANDS:  # warm-up: bytecode cache, and the ledger made once
            run_once(checkout, folder / "pycache", folder / "cwd", command)
    times: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    ratios: dict[tuple[str, ...], list[float]] = {}
    for round_number in range(args.runs):
        for command in COMMANDS:
            order = ["old", "new"] if round_number % 2 == 0 else ["new", "old"]
            this_round = {}
            for name in order:
                folder = folders[name]
                seconds = run_once(sides[name], folder / "pycache", folder / "cwd", command)
                times.setdefault((name, command), []).append(seconds)
                this_round[name] = seconds
            ratios.setdefault(command, []).append(this_round["new"] / this_round["old"])
    print(f"runs: {args.runs} per command and checkout; old {sides['old']}, new {sides['new']}")
    print(f"load average before/after: {os.getloadavg()[0]:.2f}")
    print()
    print("| command | old median | old min | new median | new min | new/old (median ratio) |")
    print("|---|---:|---:|---:|---:|---:|")
    for command in COMMANDS:
        old, new = times[("old", command)], times[("new", command)]
        print(
            f"| `orchestrator {' '.join(command)}` | {statistics.median(old):.3f} s | "
            f"{min(old):.3f} s | {statistics.median(new):.3f} s | {min(new):.3f} s | "
            f"{statistics.median(ratios[command]):.2f} |"
        )
    if args.importtime:
        for command in (("--help",), ("freeze", "list")):
            for name in ("old", "new"):
                folder = folders[name]
                rows = import_times(
                    sides[name], folder / "pycache", folder / "cwd", command, args.importtime
                )
                print(f"\n`python -X importtime -m orchestrator {' '.join(command)}` ({name}):")
                print("| cumulative | module |")
                print("|---:|---|")
                for cumulative, module in rows:
                    print(f"| {cumulative / 1000:.1f} ms | `{module}` |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
