"""What a whole-suite replay costs as the suite grows: time, memory, run folder, output.

    .venv/bin/python bench/scale.py [--sizes 1000,10000,100000] [--rounds 3]
        [--old CHECKOUT] [--markdown] [--keep]
    .venv/bin/python bench/scale.py --repo PATH --base REV --patch REV [--rounds 3] [--old ...]

Generates, per size, a git repository of that many small tests (100 per module; each does
a few microseconds of work; the patch makes one of them fail), exports both revisions, and
times, round by round, side by side (the variants take turns going first):

- (f) the floor: one plain `pytest -q` run of the whole suite per side, both at once, each
  a `docker run` of the runner image with a replay container's limits (1 CPU, 512 MB, no
  network, read-only root);
- (r) `orchestrator replay` with its defaults (screened once per side, the tests with
  signal replayed to 5, the ledger record on), each round in a folder of its own (a fresh
  ledger: no round reuses the base an earlier one stored; the durations the last round
  recorded are carried, as a CI cache keeps them), of this checkout and, with `--old`, of
  another checkout (``python -m orchestrator`` with ``PYTHONPATH`` set to it, this
  interpreter and its dependencies: only the package differs, the probe included).

Per replay: the wall time; the CLI's peak resident memory and CPU time (user + system,
``/usr/bin/time``: the CLI and what it waited for, git included); the run folder's size
on disk; from the JSON log, how long each side's container took from the driver's start to
its first test result (``side.first_test``; the floor's is stamped by the host when the
suite's conftest says its first test ended), and the host's time after the last container
ended. "host CPU/test" is the CLI's CPU time over the tests of both sides.

With ``--repo`` a real repository is timed instead (no conftest of the bench's: the
floor's first result is not measured there).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "orchestrator-runner:latest"
PER_MODULE = 100
TIMEOUT = "3600"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}

LIB = '''\
"""A small library for the generated suite."""


def square(n):
    return n * n


def version_key(text):
    return tuple(int(part) for part in text.split("."))
'''
LIB_PATCH = LIB.replace(
    '    return tuple(int(part) for part in text.split("."))',
    '    return tuple(text.split("."))  # compares as strings: 1.10 < 1.9',
)
FAILS_ON_PATCH = "tests/test_m0000.py::test_version_order"

# Stamps the first finished test on the process's own standard error (below pytest's
# capture), so that the floor's host sees when its first result came.
CONFTEST = """\
import os
import time

_first = []


def pytest_runtest_logfinish(nodeid, location):
    if not _first:
        _first.append(nodeid)
        os.write(2, b"bench-first-test\\n")
"""
MODULE_HEAD = "import suitelib\n"
TEST = """

def test_t{n:05d}():
    assert suitelib.square({n}) == {square}
"""
SPECIAL = """

def test_version_order():
    assert suitelib.version_key("1.10") > suitelib.version_key("1.9")
"""


@dataclass(frozen=True)
class Suite:
    repo: Path
    base: str
    patch: str
    tests: int


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def generate(root: Path, tests: int) -> Suite:
    repo = root / f"suite-{tests}"
    (repo / "tests").mkdir(parents=True)
    (repo / "suitelib").mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (repo / "conftest.py").write_text(CONFTEST)
    (repo / "suitelib" / "__init__.py").write_text(LIB)
    (repo / "tests" / "__init__.py").write_text("")
    modules = max(1, tests // PER_MODULE)
    for module in range(modules):
        first = module * PER_MODULE
        count = PER_MODULE if module < modules - 1 else tests - first
        parts = [MODULE_HEAD]
        if module == 0:
            parts.append(SPECIAL)
            count -= 1
        parts.extend(TEST.format(n=n, square=n * n) for n in range(first, first + count))
        (repo / "tests" / f"test_m{module:04d}.py").write_text("".join(parts))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"a suite of {tests} tests")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "suitelib" / "__init__.py").write_text(LIB_PATCH)
    git(repo, "commit", "-q", "-am", "string versions")
    return Suite(repo=repo, base=base, patch=git(repo, "rev-parse", "HEAD"), tests=tests)


def export(repo: Path, rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], capture_output=True,
                             check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


# ---------------------------------------------------------------- the floor


def floor(trees: Sequence[Path], memory: str = "512m") -> tuple[float, list[float]]:
    """(f): one plain pytest run per side, both at once: wall seconds, and per side the
    seconds from `docker run` to its first finished test (when the suite says so)."""
    firsts: list[float] = []
    codes: list[int] = []
    lock = threading.Lock()

    def run(tree: Path) -> None:
        command = [
            "docker", "run", "--rm", "--network", "none", "--read-only",
            "--tmpfs", "/tmp:rw,exec", "--cpus", "1", "--memory", memory, "--user", "1000",
            "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "HOME=/tmp",
            "-v", f"{tree}:/src:ro", "-w", "/src",
            IMAGE, "python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
        ]  # fmt: skip
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert process.stderr is not None
        for line in process.stderr:
            if line.strip() == b"bench-first-test":
                with lock:
                    firsts.append(time.perf_counter() - started)
        with lock:
            codes.append(process.wait())

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(tree,)) for tree in trees]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if any(code not in (0, 1) for code in codes):
        print(f"  note: floor exit codes {codes}", file=sys.stderr)
    return elapsed, firsts


# ---------------------------------------------------------------- a replay


@dataclass(frozen=True)
class Measured:
    wall_s: float
    rss_mb: float
    cpu_s: float
    folder_mb: float
    files: int
    first_result_s: list[float]  # per side: the driver's start to its first test result
    after_s: float  # the last container's end to the CLI's exit
    exit_status: int
    table_lines: int  # lines the table printed on standard output
    summary_kb: float
    reused: int = 0  # sides whose screening came from a store (0: both sides ran)


def folder_size(path: Path) -> tuple[int, int]:
    """(bytes on disk, files) under ``path``."""
    used = count = 0
    for entry in path.rglob("*"):
        if entry.is_file() and not entry.is_symlink():
            used += entry.stat().st_blocks * 512
            count += 1
    return used, count


def cli_environment(checkout: Path | None) -> dict[str, str]:
    env = {**os.environ, "CI": "1"}
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    return env


def replay(
    checkout: Path | None,
    repo: Path,
    base: str,
    patch: str,
    workdir: Path,
    out: Path,
    extra: Sequence[str] = (),
) -> Measured:
    """One `orchestrator replay` with its defaults (and ``extra``), under /usr/bin/time."""
    rusage = workdir / "rusage.txt"
    command = [
        "/usr/bin/time", "-f", "%M %U %S", "-o", str(rusage),
        sys.executable, "-m", "orchestrator", "-v", "--log-format", "json", "replay",
        "--repo", str(repo), "--base", base, "--patch", patch, "--image", IMAGE,
        "--out", str(out), "--timeout", TIMEOUT, *extra,
    ]  # fmt: skip
    launched = time.time()
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=workdir, env=cli_environment(checkout), capture_output=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):  # measured all the same, and said
        failed = [line for line in done.stderr.decode().splitlines() if "oom" in line.lower()]
        print(f"  note: replay exit {done.returncode}: {(failed or ['see its log'])[0][:300]}")
    rss_kb, user, system = rusage.read_text().split()[-3:]
    used, count = folder_size(out)
    firsts, after = timings(done.stderr.decode(), launched + elapsed)
    return Measured(
        reused=reused_sides(out),
        wall_s=elapsed,
        rss_mb=int(rss_kb) / 1024,
        cpu_s=float(user) + float(system),
        folder_mb=used / 1e6,
        files=count,
        first_result_s=firsts,
        after_s=after,
        exit_status=done.returncode,
        table_lines=len(done.stdout.splitlines()),
        summary_kb=(out / "summary.json").stat().st_size / 1000
        if (out / "summary.json").exists()
        else float("nan"),
    )


def reused_sides(out: Path) -> int:
    """How many sides' screening the run took from a store (its run log says)."""
    try:
        pins = json.loads((out / "run-log.json").read_text())
    except (OSError, ValueError):
        return 0
    sides = (pins.get("reuse") or {}).get("sides") or []
    return sum(1 for side in sides if side.get("reused_from"))


def timings(log: str, ended: float) -> tuple[list[float], float]:
    """From the JSON log: per side, the seconds from the first phase's container start to
    its first test result, and the seconds from the last container's end to ``ended``."""
    events = []
    for line in log.splitlines():
        try:
            event = json.loads(line)
            at = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError, TypeError):
            continue
        events.append((at, event))
    started: dict[str, float] = {}
    last_end = 0.0
    for at, event in events:
        if event.get("event") == "container.timing":
            begin = at - event.get("run_ms", 0) / 1000
            started.setdefault(str(event.get("side")), begin)
            last_end = max(last_end, at)
    firsts: dict[str, float] = {}  # the first phase's: a side's first test of the run
    for at, event in events:
        side = str(event.get("side"))
        if event.get("event") == "side.first_test" and side in started:
            firsts.setdefault(side, at - started[side])
    return list(firsts.values()), (ended - last_end if last_end else float("nan"))


# ---------------------------------------------------------------- the run


def median(values: Sequence[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", type=Path, help="another checkout, measured side by side")
    parser.add_argument("--new", type=Path, help="the checkout measured (default: this one)")
    parser.add_argument("--repo", type=Path, help="time an existing repository")
    parser.add_argument("--base", help="with --repo: the base revision")
    parser.add_argument("--patch", help="with --repo: the patch revision")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--memory",
        default=None,
        help="memory of every container, floor and replays (default: 512m below 50,000 tests, "
        "1g from there: plain pytest takes 533 MB for 100,000; an old checkout without "
        "--memory runs with its own default)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    options = parser.parse_args(argv)
    if options.repo is not None and not (options.base and options.patch):
        parser.error("--repo needs --base and --patch")
    new = options.new.resolve() if options.new is not None else ROOT
    checkouts: dict[str, Path | None] = {"new": new}
    if options.old is not None:
        checkouts = {"old": options.old.resolve(), "new": new}

    scratch = Path(tempfile.mkdtemp(prefix="orchestrator-bench-scale-"))
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        if options.repo is not None:
            repo = options.repo.resolve()
            base, patch = git(repo, "rev-parse", options.base), git(repo, "rev-parse",
                                                                    options.patch)  # fmt: skip
            cases = [(repo.name, repo, base, patch, None)]
        else:
            cases = []
            for size in (int(s) for s in options.sizes.split(",")):
                suite = generate(scratch, size)
                cases.append((f"{size:,} tests", suite.repo, suite.base, suite.patch, size))
        for name, repo, base, patch, size in cases:
            trees = [export(repo, rev, scratch / "trees" / name / side)
                     for side, rev in (("base", base), ("patch", patch))]  # fmt: skip
            figures = measure(options, checkouts, scratch, name, repo, base, patch, trees, size)
            figures["tests"] = size
            rows.append((name, figures))
            print_row(name, figures, checkouts, markdown=False)
        print()
        print_table(rows, checkouts, markdown=options.markdown)
        load = os.getloadavg()
        print(f"load (1, 5, 15 min): {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}; "
              f"cpus {os.cpu_count()}")  # fmt: skip
    finally:
        if options.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def measure(options, checkouts, scratch, name, repo, base, patch, trees, size) -> dict[str, Any]:
    memory = options.memory or ("1g" if (size or 0) >= 50_000 else "512m")
    floors: list[float] = []
    floor_firsts: list[float] = []
    runs: dict[str, list[Measured]] = {key: [] for key in checkouts}
    ratios: dict[str, list[float]] = {key: [] for key in checkouts}
    variants = ["f", *checkouts]
    for round_ in range(1, options.rounds + 1):
        order = variants[round_ % len(variants) :] + variants[: round_ % len(variants)]
        for variant in order:
            if variant == "f":
                elapsed, firsts = floor(trees, memory)
                floors.append(elapsed)
                floor_firsts.extend(firsts)
                continue
            # A folder of its own per round: the ledger of an earlier round would hold
            # this base's screening, and the run would reuse it (a run whose base was
            # screened is bench/reuse.py's). The durations an earlier round recorded are
            # carried, as a CI cache of `.replay/durations/` keeps them.
            workdir = scratch / "work" / name / variant / f"round-{round_}"
            workdir.mkdir(parents=True, exist_ok=True)
            durations = scratch / "work" / name / variant / "durations"
            if durations.is_dir():
                shutil.copytree(durations, workdir / ".replay" / "durations")
            out = workdir / f"run-{round_}"
            extra = () if memory == "512m" else ("--memory", memory)
            if variant == "old" and extra and not supports_memory(checkouts[variant]):
                extra = ()
            runs[variant].append(replay(checkouts[variant], repo, base, patch, workdir, out, extra))
            shutil.rmtree(out, ignore_errors=True)
            recorded = workdir / ".replay" / "durations"
            if recorded.is_dir():
                shutil.rmtree(durations, ignore_errors=True)
                shutil.copytree(recorded, durations)
            shutil.rmtree(workdir, ignore_errors=True)
        for key in checkouts:
            ratios[key].append(runs[key][-1].wall_s / floors[-1])
        print(f"  {name} round {round_}: floor {floors[-1]:.2f} s, " + ", ".join(
            f"{key} {runs[key][-1].wall_s:.2f} s ({ratios[key][-1]:.2f}x, "
            f"{runs[key][-1].rss_mb:.0f} MB, {runs[key][-1].cpu_s:.1f} s CPU, "
            f"{runs[key][-1].folder_mb:.1f} MB folder, first {runs[key][-1].first_result_s}, "
            f"after {runs[key][-1].after_s:.1f} s, exit {runs[key][-1].exit_status}, "
            f"sides reused {runs[key][-1].reused})"
            for key in checkouts
        ), flush=True)  # fmt: skip
    return {"floor": floors, "floor_first": floor_firsts, "runs": runs, "ratios": ratios}


def supports_memory(checkout: Path | None) -> bool:
    """Whether a checkout's replay takes --memory (earlier ones did not)."""
    source = (checkout or ROOT) / "orchestrator" / "commands" / "_options.py"
    return "--memory" in source.read_text()


def summarize(figures: dict[str, Any], key: str) -> dict[str, Any]:
    runs: list[Measured] = figures["runs"][key]
    tests = figures.get("tests") or 0
    sides = 2 * tests if tests else float("nan")
    return {
        "replay": median([r.wall_s for r in runs]),
        "ratio": median(figures["ratios"][key]),
        "rss": median([r.rss_mb for r in runs]),
        "cpu_ms_per_test": median([r.cpu_s for r in runs]) * 1000 / sides,
        "folder": median([r.folder_mb for r in runs]),
        "kb_per_test": (median([r.folder_mb for r in runs]) * 1000 / tests)
        if tests
        else float("nan"),
        "files": median([r.files for r in runs]),
        "summary_kb": median([r.summary_kb for r in runs]),
        "first": median([s for r in runs for s in r.first_result_s]),
        "after": median([r.after_s for r in runs]),
        "lines": median([r.table_lines for r in runs]),
        "exits": ",".join(sorted({str(r.exit_status) for r in runs})),
    }


HEAD = ("suite", "checkout", "floor (s)", "replay (s)", "ratio", "exit", "CLI max RSS (MB)",
        "host CPU/test (ms)", "run folder (MB)", "KB/test", "files", "summary.json (KB)",
        "first result: floor / replay (s)", "after the containers (s)", "stdout lines")  # fmt: skip


def print_row(name: str, figures: dict[str, Any], checkouts, *, markdown: bool) -> None:
    for key in checkouts:
        s = summarize(figures, key)
        cells = [
            name, key, f"{median(figures['floor']):.1f}", f"{s['replay']:.1f}",
            f"{s['ratio']:.2f}x", s["exits"], f"{s['rss']:.0f}", f"{s['cpu_ms_per_test']:.2f}",
            f"{s['folder']:.1f}", f"{s['kb_per_test']:.2f}", f"{s['files']:.0f}",
            f"{s['summary_kb']:.0f}",
            f"{median(figures['floor_first']):.1f} / {s['first']:.1f}",
            f"{s['after']:.1f}", f"{s['lines']:.0f}",
        ]  # fmt: skip
        if markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("  " + ", ".join(f"{h}: {c}" for h, c in zip(HEAD, cells, strict=True)))


def print_table(rows, checkouts, *, markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(HEAD) + " |")
        print("|---|---|" + "---:|" * (len(HEAD) - 2))
    for name, figures in rows:
        print_row(name, figures, checkouts, markdown=markdown)
        if not markdown:
            print()
    for name, figures in rows:
        for key in checkouts:
            shown = ", ".join(f"{ratio:.2f}" for ratio in figures["ratios"][key])
            print(f"{name}, {key}: replay/floor per round {shown}")


if __name__ == "__main__":
    sys.exit(main())
