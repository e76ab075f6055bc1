"""Whole-suite replay against the floor: screening, workers and recorded durations.

    .venv/bin/python bench/suite.py [--rounds 3] [--replays 5] [--markdown] [--keep]

Generates a git repository whose suite has 2,000 tests in 40 modules: most pass in about
1 ms of CPU (a small computation), 20 write and read files (2 MB each), 20 sleep 0.2 s and
read a fake clock 10 times, 3 are flaky and 2 differ between base and patch (one fails on
the patch, one reads the clock once more on the patch with the same output). Then, round
by round, side by side:

- (f) floor: one plain `pytest` run of the whole suite per side, both at once, each in a
  `docker run` of the runner image with the limits of a replay container (1 CPU, 512 MB,
  no network, read-only root);
- (a) `orchestrator replay --replays-all --replays N`: every test N times per side;
- (s) `orchestrator replay --replays N`: screened once per side, then N replays of the
  tests with signal.

Both replays run with the ledger record on (the default), in one scratch folder whose
`.replay/` keeps the ledger and the recorded durations across rounds. Each round checks
that (a) and (s) decided the same lane for every test, and that the planted changes and
flakes landed where they should. Then it times one side alone, `--jobs 1` against
`--jobs 2` (the same run_sides call `replay` makes, one side, split by the durations
recorded above), and checks both gave the same labels.

The three flakes keep state in the container's /tmp, which the replays of one side share:
each fails the first time it runs in a container and then fails again every 2nd or 3rd run
or never. So each is caught by one screening run on both sides, and is mixed in any 5
replays. A flake that passes its first run on both sides is not caught by `--screen 1` (see
bench/README.md and docs/lanes.md, "Screening").
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import run_folder  # noqa: E402  (bench/, beside this script)

CLI = ROOT / ".venv" / "bin" / "orchestrator"
IMAGE = "orchestrator-runner:latest"
MODULES = 40
TESTS_PER_MODULE = 50
WORK = 20_000  # sum of squares below this: about 1 ms of CPU in the runner image here
TIMEOUT = "600"  # one deadline per replay: a whole-suite replay needs the suite's time

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}

FAILS_ON_PATCH = "tests/test_mod_07.py::test_version_order"
EXTRA_CLOCK_READ = "tests/test_mod_13.py::test_stamp_keeps_payload"
FLAKES = (
    "tests/test_mod_03.py::test_flaky_cold_cache",
    "tests/test_mod_21.py::test_flaky_every_second_run",
    "tests/test_mod_33.py::test_flaky_every_third_run",
)
EXPECTED = {
    FAILS_ON_PATCH: ("property_regression", "assertion_regression"),
    EXTRA_CLOCK_READ: ("property_regression", "call_budget"),
    **dict.fromkeys(FLAKES, ("flake_queue_eligible", "flake_queue_eligible")),
}

LIB = '''\
"""A small library for the generated suite."""


def work(n):
    return sum(i * i for i in range(n))


def version_key(text):
    return tuple(int(part) for part in text.split("."))


def stamp(payload, clock):
    return {**payload, "at": clock()}
'''
LIB_PATCH = LIB.replace(
    '    return tuple(int(part) for part in text.split("."))',
    '    return tuple(text.split("."))  # compares as strings: 1.10 < 1.9',
).replace(
    '    return {**payload, "at": clock()}', '    clock()\n    return {**payload, "at": clock()}'
)

HEADER = '''\
import os
import time

import suitelib

EXPECTED = suitelib.work({work})


def run_count(name):
    """How many times this test has run in this container (its /tmp is the container's)."""
    path = os.path.join("/tmp", "bench-" + name)
    count = int(open(path).read()) + 1 if os.path.exists(path) else 1
    with open(path, "w") as handle:
        handle.write(str(count))
    return count
'''
QUICK = """

def test_work_{index:02d}():
    assert suitelib.work({work}) == EXPECTED
"""
FILE_WORK = """

def test_file_work(tmp_path):
    data = "x" * 100_000
    for round_ in range(20):
        path = tmp_path / f"f{{round_}}.txt"
        path.write_text(data)
        assert path.read_text() == data
"""
CLOCK_WORK = """

def test_clock_work(deps):
    clock = deps.clock(start=0.0)
    for _ in range(10):
        time.sleep(0.02)
        clock()
    assert clock.calls == 10
"""
SPECIAL = {
    7: """

def test_version_order():
    assert suitelib.version_key("1.10") > suitelib.version_key("1.9")
""",
    13: """

def test_stamp_keeps_payload(deps):
    clock = deps.clock(start=5.0)
    assert suitelib.stamp({"id": 1}, clock) == {"id": 1, "at": 5.0}
""",
    3: """

def test_flaky_cold_cache():
    assert run_count("cold") > 1, "cold cache"
""",
    21: """

def test_flaky_every_second_run():
    assert run_count("second") % 2 == 0, "odd run"
""",
    33: """

def test_flaky_every_third_run():
    assert run_count("third") % 3 != 1, "every third run"
""",
}


def module_source(index: int) -> str:
    parts = [HEADER.format(work=WORK)]
    quick = TESTS_PER_MODULE - 1 - (index in SPECIAL)
    parts.extend(QUICK.format(index=n, work=WORK) for n in range(quick))
    parts.append(FILE_WORK if index < MODULES // 2 else CLOCK_WORK)
    if index in SPECIAL:
        parts.append(SPECIAL[index])
    return "".join(parts)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


# The floor runs plain pytest, without the probe: the tests that take the probe's `deps`
# fixture get a stand-in there, so that they run (and sleep) as in a replay instead of
# erroring at setup. In a replay the probe is importable and its own fixture serves them.
CONFTEST = """\
try:
    import orchestrator.probe.plugin  # noqa: F401  (a replay: the probe's deps fixture)
except ImportError:
    import pytest

    class _Clock:
        def __init__(self, start):
            self.start, self.calls = start, 0

        def __call__(self):
            self.calls += 1
            return self.start

    class _Deps:
        def clock(self, start=0.0):
            return _Clock(start)

    @pytest.fixture
    def deps():
        return _Deps()
"""


@dataclass(frozen=True)
class Suite:
    repo: Path
    base: str
    patch: str


def generate(root: Path) -> Suite:
    repo = root / "suite"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    files = {
        "pytest.ini": "[pytest]\ntestpaths = tests\n",
        "conftest.py": CONFTEST,
        "suitelib/__init__.py": LIB,
        "tests/__init__.py": "",
    }
    files.update({f"tests/test_mod_{i:02d}.py": module_source(i) for i in range(MODULES)})
    base = commit(repo, files, "a suite of 2,000 tests")
    patch = commit(
        repo, {"suitelib/__init__.py": LIB_PATCH}, "string versions, one more clock read"
    )
    return Suite(repo=repo, base=base, patch=patch)


def count_tests(suite: Suite) -> int:
    return sum(
        (suite.repo / f"tests/test_mod_{i:02d}.py").read_text().count("\ndef test_")
        for i in range(MODULES)
    )


# ---------------------------------------------------------------- the variants


def export(suite: Suite, rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(suite.repo), "archive", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dest


def floor(trees: Sequence[Path]) -> float:
    """(f): one plain pytest run per side, both at once."""

    def run(tree: Path, codes: list[int]) -> None:
        command = [
            "docker", "run", "--rm", "--network", "none", "--read-only",
            "--tmpfs", "/tmp:rw,exec", "--cpus", "1", "--memory", "512m", "--user", "1000",
            "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "HOME=/tmp",
            "-v", f"{tree}:/src:ro", "-w", "/src",
            IMAGE, "python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, check=False)
        codes.append(done.returncode)

    codes: list[int] = []
    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(tree, codes)) for tree in trees]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if codes != [1, 1]:  # each side fails its flakes first time (and the patch one more)
        print(f"  note: floor exit codes {codes}", file=sys.stderr)
    return elapsed


def replay(
    suite: Suite, workdir: Path, out: Path, *args: str
) -> tuple[float, dict[str, Any], dict[str, float]]:
    """One `orchestrator replay`: its wall time, its summary.json, and where the time went."""
    command = [
        str(CLI), "-v", "--log-format", "json", "replay", "--repo", str(suite.repo),
        "--base", suite.base, "--patch", suite.patch, "--image", IMAGE, "--out", str(out),
        "--timeout", TIMEOUT, *args,
    ]  # fmt: skip
    env = {**os.environ, "CI": "1"}
    launched = time.time()
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"replay failed ({done.returncode}): {done.stderr[-3000:]}")
    # The table went to stdout, as in a CI log; the decisions are read from the run folder.
    report: dict[str, Any] = run_folder.report(out)
    return elapsed, report, phases(done.stderr, launched, launched + elapsed)


def phases(log: str, launched: float, ended: float) -> dict[str, float]:
    """Seconds, from the JSON log: start to planned, each phase's containers (the first
    created to the last exited, both sides), the gaps, and what came after the last one."""
    from datetime import datetime

    events = []
    for line in log.splitlines():
        try:
            event = json.loads(line)
            at = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError, TypeError):
            continue
        events.append((at, event))
    planned = next((at for at, event in events if event.get("event") == "replay.planned"), launched)
    windows = [
        # A kept container (the second phase's) was emptied instead of created and started.
        (at - (event["run_ms"] + event.get("create_start_ms", event.get("clear_ms", 0))) / 1000, at)
        for at, event in events
        if event.get("event") == "container.timing"
    ]
    found = {"start to planned": planned - launched}
    previous_end = planned
    for number, pair in enumerate(zip(windows[::2], windows[1::2], strict=False), start=1):
        begin, end = min(w[0] for w in pair), max(w[1] for w in pair)
        found[f"to phase {number}"] = begin - previous_end
        found[f"phase {number} containers"] = end - begin
        previous_end = end
    found["after the containers"] = ended - previous_end
    # Inside those windows: finding the signal (before phase 2), settling the properties
    # without it (while phase 2 runs), recording in the ledger (after the containers).
    for name, shown in (
        ("screening.screened", "of which the signal"),
        ("screening.settled", "settling (beside phase 2)"),
        ("ledger.recorded", "of which the ledger"),
    ):
        seconds = [event.get("seconds") for _, event in events if event.get("event") == name]
        if seconds and isinstance(seconds[-1], int | float):
            found[shown] = float(seconds[-1])
    return found


def lanes(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {entry["property_id"]: (entry["lane"], entry["code"]) for entry in report["decisions"]}


def one_side(suite: Suite, jobs: int, durations: Path | None) -> tuple[float, dict[str, Any]]:
    """One side alone (the patch), one replay of the whole suite with ``jobs`` workers."""
    from orchestrator import log
    from orchestrator.adapters.docker import connect, engine_cpus, resolve_image
    from orchestrator.core.schedule import container_limits
    from orchestrator.services.sides import ReplayPlan, SideSpec, run_sides

    log.configure("console", os.environ)  # warnings only: no debug lines amid the figures
    client = connect(os.environ)
    try:
        limits = container_limits(jobs, engine_cpus(client))
        plan = ReplayPlan(
            image_id=resolve_image(client, IMAGE).id,
            pytest_args=("-q",),
            property_ids=(),
            fixture=None,
            replays=1,
            timeout_s=600,
            seed=0,
            runner_id="bench",
            memory=limits.memory,
            pids=limits.pids,
            cpus=limits.cpus,
            jobs=jobs,
            durations=durations,
        )
        started = time.perf_counter()
        side = SideSpec(name="patch", repo=suite.repo, rev=suite.patch)
        labelled = run_sides(plan, [side]).labelled
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    return elapsed, {pid: [r.label for r in replays] for pid, replays in labelled["patch"].items()}


# ---------------------------------------------------------------- the run


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replays", type=int, default=5)
    parser.add_argument("--jobs-rounds", type=int, default=3, help="0: skip --jobs 1 vs 2")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--repo", type=Path, help="time an existing repository instead of the generated suite"
    )
    parser.add_argument("--base", help="with --repo: the base revision")
    parser.add_argument("--patch", help="with --repo: the patch revision")
    parser.add_argument("--skip-all", action="store_true", help="do not time (a)")
    options = parser.parse_args(argv)
    if options.repo is not None and not (options.base and options.patch):
        parser.error("--repo needs --base and --patch")

    scratch = Path(tempfile.mkdtemp(prefix="orchestrator-bench-suite-"))
    try:
        if options.repo is None:
            suite = generate(scratch)
            print(f"suite: {count_tests(suite)} tests in {MODULES} modules, {suite.repo}")
        else:
            repo = options.repo.resolve()
            suite = Suite(
                repo=repo, base=git(repo, "rev-parse", options.base),
                patch=git(repo, "rev-parse", options.patch),
            )  # fmt: skip
            print(f"repository: {repo}, {suite.base[:12]}..{suite.patch[:12]}")
        trees = [export(suite, rev, scratch / "trees" / name) for name, rev in
                 (("base", suite.base), ("patch", suite.patch))]  # fmt: skip
        workdir = scratch / "work"
        workdir.mkdir()
        times: dict[str, list[float]] = {"f": [], "a": [], "s": []}
        replayed: list[int] = []
        breakdown: list[dict[str, float]] = []
        mismatches: list[str] = []
        for round_ in range(1, options.rounds + 1):
            # The variants take turns going first: other load on the machine comes and goes.
            order = ["f", "a", "s"][round_ % 3 :] + ["f", "a", "s"][: round_ % 3]
            all_report = None
            for variant in order:
                if variant == "f":
                    times["f"].append(floor(trees))
                elif variant == "a" and not options.skip_all:
                    elapsed, all_report, _ = replay(
                        suite, workdir, scratch / f"a{round_}", "--replays-all",
                        "--replays", str(options.replays),
                    )  # fmt: skip
                    times["a"].append(elapsed)
                elif variant == "s":
                    elapsed, screened_report, where = replay(
                        suite, workdir, scratch / f"s{round_}", "--replays", str(options.replays)
                    )
                    times["s"].append(elapsed)
            replayed.append(screened_report["screening"]["replayed"])
            problems = check_lanes(screened_report, all_report, generated=options.repo is None)
            if problems:
                mismatches.append(f"round {round_}: {problems}")
            print(
                f"round {round_}: f {times['f'][-1]:.2f} s, "
                + (f"a {times['a'][-1]:.2f} s, " if times["a"] else "")
                + f"s {times['s'][-1]:.2f} s, {screened_report['screening']['screened']} "
                f"screened, {replayed[-1]} replayed, lanes {problems or 'as expected'}",
                flush=True,
            )  # fmt: skip
            print("  (s): " + ", ".join(f"{name} {value:.2f}" for name, value in where.items()))
            print("  (s) replayed: " + ", ".join(
                f"{e['property_id']} ({e['lane']})" for e in screened_report["decisions"]
                if e["signal"]
            ))  # fmt: skip
            breakdown.append(where)
        jobs_times: dict[int, list[float]] = {1: [], 2: []}
        jobs_labels: dict[int, dict[str, Any]] = {}
        durations = next((workdir / ".replay" / "durations").glob("*.json"), None)
        for _ in range(options.jobs_rounds):
            for jobs in (1, 2):
                elapsed, labels = one_side(suite, jobs, durations)
                jobs_times[jobs].append(elapsed)
                jobs_labels[jobs] = labels
        same_labels = {p: v for p, v in jobs_labels.get(1, {}).items() if p not in FLAKES} == {
            p: v for p, v in jobs_labels.get(2, {}).items() if p not in FLAKES
        }
        report(options, times, replayed, mismatches, jobs_times, same_labels)
        names = list(dict.fromkeys(name for where in breakdown for name in where))
        print("(s), where the time went (medians, s): " + ", ".join(
            f"{name} {median([where[name] for where in breakdown if name in where]):.2f}"
            for name in names
        ))  # fmt: skip
    finally:
        if options.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


UNDECIDED = {"reject_malformed", "infra_queue", "rerun_shrink"}


def check_lanes(
    screened: dict[str, Any], replayed_all: dict[str, Any] | None, *, generated: bool
) -> str:
    """What is wrong with the lanes: (s) against (a), the planted ones, undecided ones."""
    s_lanes = lanes(screened)
    problems = []
    undecided = sorted(p for p, (lane, _) in s_lanes.items() if lane in UNDECIDED)
    if undecided:
        problems.append(f"undecided {undecided[:5]}")
    if replayed_all is not None:
        a_lanes = lanes(replayed_all)
        differ = sorted(
            p for p in a_lanes.keys() | s_lanes.keys() if a_lanes.get(p) != s_lanes.get(p)
        )
        if differ:
            problems.append(f"(a) and (s) differ on {differ[:5]}")
    if generated:
        wrong = sorted(p for p, lane in EXPECTED.items() if s_lanes.get(p) != lane)
        others = {lane for p, lane in s_lanes.items() if p not in EXPECTED}
        if wrong or others != {("no_freeze", "not_reproduced")}:
            problems.append(f"unexpected: {wrong}, others {others}")
    return "; ".join(problems)


def report(options, times, replayed, mismatches, jobs_times, same_labels) -> None:
    f, a, s = (median(times[key]) for key in ("f", "a", "s"))
    rows = [
        ("(f) floor: one plain pytest run per side, both at once", times["f"]),
        (f"(a) replay --replays-all --replays {options.replays}", times["a"]),
        (f"(s) replay --replays {options.replays} (screened once)", times["s"]),
        ("one side alone, --jobs 1", jobs_times[1]),
        ("one side alone, --jobs 2", jobs_times[2]),
    ]
    rows = [(name, samples) for name, samples in rows if samples]
    bar = "|" if options.markdown else " "
    print()
    if options.markdown:
        print("| variant | median (s) | samples (s) |")
        print("|---|---:|---|")
    for name, samples in rows:
        shown = ", ".join(f"{value:.2f}" for value in samples)
        if options.markdown:
            print(f"| {name} | {median(samples):.2f} | {shown} |")
        else:
            print(f"{name:<58}{bar}{median(samples):8.2f}  [{shown}]")
    print()
    shown = f"(s)/(f) = {s / f:.2f}x"
    if times["a"]:
        shown += f"   (a)/(f) = {a / f:.2f}x   (a)/(s) = {a / s:.2f}x"
    print(f"{shown}  (medians)")
    # Within a round the variants ran back to back, under about the same outside load.
    for name, top in (("(s)/(f)", times["s"]), ("(a)/(f)", times["a"])):
        ratios = [x / y for x, y in zip(top, times["f"], strict=False)]
        if ratios:
            shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"{name} per round: {shown}; median {median(ratios):.2f}x")
    print(f"replayed after screening: {replayed}")
    if jobs_times[1]:
        ratio = median(jobs_times[2]) / median(jobs_times[1])
        same = "yes" if same_labels else "NO"
        print(f"--jobs 2 / --jobs 1 (one side): {ratio:.2f}x, same labels (flakes aside): {same}")
    print("lanes: " + ("as expected in every round" if not mismatches else "; ".join(mismatches)))
    load = os.getloadavg()
    print(
        f"load (1, 5, 15 min): {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}; cpus {os.cpu_count()}"
    )


if __name__ == "__main__":
    sys.exit(main())
