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
checkout, the median CPU time (user + system of the child, the steadier figure on a loaded
machine) and the median of the per-round wall-time ratios new/old.

The last row is the replay command up to its first look at the repository: ``replay``
with a base revision that does not exist, in a scratch git repository (exit 2 once the
command's modules are imported and the revision is looked up; no engine is asked).

``--importtime K`` also prints the K modules with the largest cumulative import time
(``python -X importtime``) for ``--help``, ``freeze list`` and that replay of each
checkout.
"""

from __future__ import annotations

import argparse
import os
import resource
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
    ("replay", "--help"),
)
# Up to the base revision's lookup, which fails (exit 2): the replay path's imports.
REPLAY = ("replay", "--repo", "repo", "--base", "no-such-revision", "--patch", "HEAD")
EXPECTED_EXIT: dict[tuple[str, ...], int] = {REPLAY: 2}


def environment(checkout: Path, cache: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    env.pop("CI", None)
    return env


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(checkout: Path, cache: Path, cwd: Path, args: tuple[str, ...]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run."""
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=environment(checkout, cache),
        capture_output=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != EXPECTED_EXIT.get(args, 0):
        raise SystemExit(f"{checkout}: {' '.join(args)}: exit {done.returncode}: {done.stderr!r}")
    return seconds, cpu_seconds() - cpu_before


def scratch_repository(folder: Path) -> None:
    """A git repository of one commit, for the replay row."""
    folder.mkdir()
    (folder / "test_one.py").write_text("def test_one():\n    assert True\n")
    for command in (
        ["git", "init", "-q"],
        ["git", "add", "."],
        [
            "git",
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",
            "commit",
            "-qm",
            "one",
        ],
    ):
        subprocess.run(command, cwd=folder, check=True, capture_output=True)


def import_times(
    checkout: Path, cache: Path, cwd: Path, args: tuple[str, ...], top: int, repeats: int = 5
) -> tuple[int, list[tuple[int, str]]]:
    """(modules imported, the ``top`` largest cumulative import times in microseconds),
    each module's time the least of ``repeats`` runs (the one least disturbed by load)."""
    least: dict[str, int] = {}
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "orchestrator", *args],
            cwd=cwd,
            env=environment(checkout, cache),
            capture_output=True,
            text=True,
            check=False,
        )
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "cumulative" in line:
                continue
            _, _, rest = line.partition(":")
            _self, cumulative, name = (part.strip() for part in rest.split("|"))
            least[name] = min(int(cumulative), least.get(name, int(cumulative)))
    rows = sorted(((cumulative, name) for name, cumulative in least.items()), reverse=True)
    return len(least), rows[:top]


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
    measured = (*COMMANDS, REPLAY)
    for name, checkout in sides.items():
        folder = scratch / name
        (folder / "cwd").mkdir(parents=True)
        scratch_repository(folder / "cwd" / "repo")
        folders[name] = folder
        for command in measured:  # warm-up: bytecode cache, and the ledger made once
            run_once(checkout, folder / "pycache", folder / "cwd", command)
    times: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    cpu: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    ratios: dict[tuple[str, ...], list[float]] = {}
    for round_number in range(args.runs):
        for command in measured:
            order = ["old", "new"] if round_number % 2 == 0 else ["new", "old"]
            this_round = {}
            for name in order:
                folder = folders[name]
                seconds, cpu_s = run_once(sides[name], folder / "pycache", folder / "cwd", command)
                times.setdefault((name, command), []).append(seconds)
                cpu.setdefault((name, command), []).append(cpu_s)
                this_round[name] = seconds
            ratios.setdefault(command, []).append(this_round["new"] / this_round["old"])
    print(f"runs: {args.runs} per command and checkout; old {sides['old']}, new {sides['new']}")
    print(f"load average before/after: {os.getloadavg()[0]:.2f}")
    print()
    print(
        "| command | old wall median | old wall min | new wall median | new wall min "
        "| old CPU median | new CPU median | new/old wall (median ratio) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for command in measured:
        old, new = times[("old", command)], times[("new", command)]
        label = "replay (to the revision lookup)" if command == REPLAY else " ".join(command)
        print(
            f"| `orchestrator {label}` | {statistics.median(old):.3f} s | "
            f"{min(old):.3f} s | {statistics.median(new):.3f} s | {min(new):.3f} s | "
            f"{statistics.median(cpu[('old', command)]):.3f} s | "
            f"{statistics.median(cpu[('new', command)]):.3f} s | "
            f"{statistics.median(ratios[command]):.2f} |"
        )
    if args.importtime:
        for command in (("--help",), ("freeze", "list"), REPLAY):
            for name in ("old", "new"):
                folder = folders[name]
                count, rows = import_times(
                    sides[name], folder / "pycache", folder / "cwd", command, args.importtime
                )
                label = (
                    "replay (to the revision lookup)" if command == REPLAY else " ".join(command)
                )
                print(
                    f"\n`python -X importtime -m orchestrator {label}` ({name}, {count} modules):"
                )
                print("| cumulative | module |")
                print("|---:|---|")
                for cumulative, module in rows:
                    print(f"| {cumulative / 1000:.1f} ms | `{module}` |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
