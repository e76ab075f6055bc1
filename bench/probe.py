"""What the replay probe adds to a pytest run's wall time.

Two generated suites, each run in a fresh `python -m pytest` process with and without
`-p orchestrator.probe.plugin`: 2,000 trivial tests, and 200 tests that each open 50
files. Runs alternate (without, with, ...) and the median of 5 is reported, with the
ratio with/without. Two more rows time the replay driver (one replay, forked from a
driver that imported pytest, and one new interpreter per replay) against the plain
probed pytest run it wraps (the driver's probe also writes one progress line per test).
The in-interpreter line also times the probe with its per-test progress lines on. Goal:
the probe adds under 5%.

    .venv/bin/python bench/probe.py [--runs 5] [--python /usr/bin/python3]

`--python` picks the interpreter that runs pytest (it must have pytest installed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter

ROOT = Path(__file__).resolve().parents[1]
PYTEST_OPTIONS = ("-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def make_trivial_suite(folder: Path, *, files: int = 20, per_file: int = 100) -> None:
    folder.mkdir()
    for f in range(files):
        body = "".join(f"def test_{i}():\n    assert True\n\n\n" for i in range(per_file))
        (folder / f"test_trivial_{f:02d}.py").write_text(body)


def make_open_suite(folder: Path, *, files: int = 4, per_file: int = 50, opens: int = 50) -> None:
    folder.mkdir()
    data = folder / "data"
    data.mkdir()
    for n in range(opens):
        (data / f"item-{n:02d}.txt").write_text(f"item {n}\n" * 10)
    header = textwrap.dedent(
        f"""
        from pathlib import Path

        PATHS = sorted(str(p) for p in (Path(__file__).parent / "data").iterdir())
        assert len(PATHS) == {opens}


        def read_all():
            total = 0
            for path in PATHS:
                with open(path) as handle:
                    total += len(handle.read())
            return total


        """
    )
    tests = "".join(f"def test_{i}():\n    assert read_all() > 0\n\n\n" for i in range(per_file))
    for f in range(files):
        (folder / f"test_opens_{f}.py").write_text(header + tests)


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float  # user + system time of the pytest process: steadier on a busy host


def timed(command: list[str], *, cwd: Path, env: dict[str, str]) -> Sample:
    started = perf_counter()
    child = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"bench run failed ({child.returncode}): {' '.join(command)}")
    return Sample(wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime)


@dataclass(frozen=True)
class Row:
    name: str
    without: Sample
    with_probe: Sample
    without_min: Sample
    with_probe_min: Sample


def median(samples: list[Sample]) -> Sample:
    return Sample(
        wall_s=statistics.median(s.wall_s for s in samples),
        cpu_s=statistics.median(s.cpu_s for s in samples),
    )


def fastest(samples: list[Sample]) -> Sample:
    # The least disturbed run: on a shared host the minimum is the steadier estimate.
    return Sample(wall_s=min(s.wall_s for s in samples), cpu_s=min(s.cpu_s for s in samples))


def compare(
    name: str, baseline: list[str], probed: list[str], *, cwd: Path, env: dict[str, str], runs: int
) -> Row:
    timed(baseline, cwd=cwd, env=env)  # warm-up: bytecode caches, page cache
    timed(probed, cwd=cwd, env=env)
    without, with_probe = [], []
    for _ in range(runs):
        without.append(timed(baseline, cwd=cwd, env=env))
        with_probe.append(timed(probed, cwd=cwd, env=env))
    return Row(
        name=name,
        without=median(without),
        with_probe=median(with_probe),
        without_min=fastest(without),
        with_probe_min=fastest(with_probe),
    )


# Runs both variants alternately inside one interpreter, so start-up and imports drop
# out and only the per-test cost of the hooks remains (printed as "without with").
# A third variant adds the per-test progress line the driver asks for ($REPLAY_PROGRESS_FD,
# here on /dev/null: the cost of the write call itself).
IN_PROCESS = """
import contextlib, io, os, sys, time, pytest
base = sys.argv[2:]
null = os.open(os.devnull, os.O_WRONLY)
times = {"none": [], "probe": [], "progress": []}
for _ in range(int(sys.argv[1])):
    for variant in times:
        args = base if variant == "none" else [*base, "-p", "orchestrator.probe.plugin"]
        if variant == "progress":
            os.environ["REPLAY_PROGRESS_FD"] = str(null)
        else:
            os.environ.pop("REPLAY_PROGRESS_FD", None)
        started = time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            pytest.main(args)
        times[variant].append(time.process_time() - started)
print(*(min(found) for found in times.values()))
"""


def in_process(
    python: str, *, cwd: Path, env: dict[str, str], runs: int
) -> tuple[float, float, float]:
    completed = subprocess.run(
        [python, "-c", IN_PROCESS, str(runs), *PYTEST_OPTIONS],
        cwd=cwd, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    without, with_probe, with_progress = (float(x) for x in completed.stdout.split()[-3:])
    return without, with_probe, with_progress


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pytest")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="probe-bench-") as temp:
        work = Path(temp)
        make_trivial_suite(work / "trivial")
        make_open_suite(work / "opens")
        env = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["REPLAY_RESULT"] = str(work / "result.json")
        pytest_cmd = [options.python, "-m", "pytest", *PYTEST_OPTIONS]
        probe_cmd = [*pytest_cmd, "-p", "orchestrator.probe.plugin"]
        driver_cmd = [
            options.python,
            "-m",
            "orchestrator.probe.replay",
            "--replays",
            "1",
            "--timeout",
            "600",
            "--out",
            str(work / "driver-out"),
            "--spawn",
            "fork",
            "--",
            *PYTEST_OPTIONS,
        ]
        exec_driver_cmd = [*driver_cmd]
        exec_driver_cmd[exec_driver_cmd.index("fork")] = "exec"
        rows = [
            compare(
                "2,000 trivial tests",
                pytest_cmd,
                probe_cmd,
                cwd=work / "trivial",
                env=env,
                runs=options.runs,
            ),
            compare(
                "200 tests x 50 opens",
                pytest_cmd,
                probe_cmd,
                cwd=work / "opens",
                env=env,
                runs=options.runs,
            ),
            compare(
                "driver --spawn fork, 1 replay (vs probed pytest)",
                probe_cmd,
                driver_cmd,
                cwd=work / "trivial",
                env=env,
                runs=options.runs,
            ),
            compare(
                "driver --spawn exec, 1 replay (vs probed pytest)",
                probe_cmd,
                exec_driver_cmd,
                cwd=work / "trivial",
                env=env,
                runs=options.runs,
            ),
        ]
        hooks_only = in_process(options.python, cwd=work / "trivial", env=env, runs=options.runs)
    version = subprocess.run(
        [
            options.python,
            "-c",
            "import sys, pytest; print(sys.version.split()[0], pytest.__version__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    print(
        f"python {version[0]}, pytest {version[1]}, "
        f"median of {options.runs} runs, {os.cpu_count()} CPUs"
    )
    print()
    print("| suite | wall without (s) | wall with (s) | wall ratio | CPU ratio | min-wall ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        a, b = row.without, row.with_probe
        fastest_ratio = row.with_probe_min.wall_s / row.without_min.wall_s
        print(
            f"| {row.name} | {a.wall_s:.3f} | {b.wall_s:.3f} | {b.wall_s / a.wall_s:.3f} "
            f"| {b.cpu_s / a.cpu_s:.3f} | {fastest_ratio:.3f} |"
        )
    without, with_probe, with_progress = hooks_only
    print()
    print(
        f"2,000 trivial tests in one interpreter (hooks only, fastest CPU of {options.runs}): "
        f"{without:.3f} s without, {with_probe:.3f} s with, ratio {with_probe / without:.3f}; "
        f"with per-test progress lines {with_progress:.3f} s, "
        f"ratio {with_progress / with_probe:.3f} to the probe without them"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
