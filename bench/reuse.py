"""Reusing the base side's screening: every lane with and without it, and what a pull
request whose base was screened costs against the floor.

    .venv/bin/python bench/reuse.py [--repo PATH --base REV --patch REV ...] [--rounds 5]
        [--tests 400 --test-ms 5]

Targets: a generated suite (``--tests`` tests in modules of 20, each spending about
``--test-ms`` of CPU; a pull request that changes one helper, so a few tests have signal),
and with ``--repo``/``--base``/``--patch`` a real repository (e.g. a corpus library,
bench/corpus.toml). For each target, in every counted round (order rotated, one warm-up
round not counted):

- (f) floor: one plain ``pytest -q`` per side, both at once (bench/overhead.py's);
- (n) ``orchestrator replay --no-reuse`` of base..patch (``--replays 3``);
- (m) the same replay with a store that holds nothing yet (the ledger of a fresh folder):
  what a run whose base was not screened costs, storing both sides;
- (r) the same replay where the base was screened by an earlier run: a run of
  base..<another pull request> first stores it (the ledger of a fresh folder), then the
  timed run reuses it.

Every replay's folder starts with the durations the warm-up round recorded (as a CI cache
step keeps ``.replay/durations/``): they decide the default workers of a run that stores
its screening (docs/lanes.md section 10, "Workers"), the same for (m), (r) and the run
that stores the base. Prints the medians of (f), (n), (m), (r) and the ratios, the
workers each variant ran with, and compares every property's lane and code between (n),
(m) and (r) in every round (a difference is listed with both sides' labels: flakiness
shows as labels that move between rounds of the same variant too).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from overhead import export, floor, git  # noqa: E402

CLI = ROOT / ".venv" / "bin" / "orchestrator"
IMAGE = "orchestrator-runner:latest"


def generated(work: Path, tests: int, test_ms: int) -> tuple[Path, str, str, str]:
    """A repository: base, a pull request that changes ``helper`` (a few tests fail), and
    another that only touches the README (the one that screens the base first)."""
    repo = work / "generated"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "bench@example.invalid")
    git(repo, "config", "user.name", "bench")
    (repo / "lib.py").write_text(
        # ms of this process's CPU time, whatever the machine's speed (a loop count would
        # make a faster machine's suite shorter, and move it across the workers rule's edge)
        "import time\n\n\ndef spin(ms):\n    end = time.process_time() + ms / 1000\n"
        "    total = 0\n    while time.process_time() < end:\n        total += 1\n"
        "    return total\n\n\ndef helper(x):\n    return x + 1\n"
    )
    (repo / "conftest.py").write_text("")
    (repo / "tests").mkdir()
    for module in range(0, tests, 20):
        body = ["import lib", ""]
        for index in range(module, min(module + 20, tests)):
            check = "lib.helper(1) == 2" if index % 50 == 0 else "True"
            body += [f"def test_{index}():", f"    lib.spin({test_ms})", f"    assert {check}", ""]
        (repo / "tests" / f"test_m{module // 20:03d}.py").write_text("\n".join(body))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "lib.py").write_text((repo / "lib.py").read_text().replace("x + 1", "x + 2"))
    git(repo, "commit", "-qam", "pull request: helper changed")
    patch = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", base)
    (repo / "README").write_text("docs\n")
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "another pull request: docs")
    other = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", patch)
    return repo, base, patch, other


def readme_commit(repo: Path, base: str, work: Path) -> str:
    """Another pull request on ``base`` that only adds a file: it screens the base first."""
    clone = work / "other-pr"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "checkout", "-q", base)
    (clone / "BENCH-NOTE").write_text("bench\n")
    git(clone, "add", "BENCH-NOTE")
    git(clone, "-c", "user.email=b@e.invalid", "-c", "user.name=b", "commit", "-qm", "note")
    sha = git(clone, "rev-parse", "HEAD")
    git(repo, "fetch", "-q", str(clone), sha)
    return sha


def replay(repo: Path, base: str, patch: str, cwd: Path, *extra: str) -> tuple[float, dict]:
    out = cwd / f"run-{time.monotonic_ns()}"
    started = time.perf_counter()
    done = subprocess.run(
        [str(CLI), "replay", "--repo", str(repo), "--base", base, "--patch", patch,
         "--image", IMAGE, "--command", "pytest -q", "--replays", "3", "--out", str(out),
         "--json", *extra],
        cwd=cwd, capture_output=True, text=True, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1, 3):
        sys.exit(f"bench: replay exited {done.returncode}: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    # What was reused is written to run-log.json once the run is complete.
    report["run_log"] = json.loads((out / "run-log.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    return elapsed, report


def lanes(report: dict) -> dict[str, tuple[str, str, str, str]]:
    return {
        e["property_id"]: (
            e["lane"],
            e["code"],
            ",".join(e["base_labels"]),
            ",".join(e["patch_labels"]),
        )
        for e in report["decisions"]
    }


def bench(
    name: str,
    repo: Path,
    base: str,
    patch: str,
    other: str,
    rounds: int,
    work: Path,
    extra: tuple[str, ...] = (),
) -> dict:
    trees = (export(repo, base, work / name / "base"), export(repo, patch, work / name / "patch"))
    times: dict[str, list[float]] = {"floor": [], "no_reuse": [], "miss": [], "reuse": []}
    jobs: dict[str, set[int]] = {"no_reuse": set(), "miss": set(), "reuse": set()}
    differences: list[str] = []
    reused_rounds = 0
    durations = work / name / "durations"  # what a CI cache step keeps between jobs
    for round_index in range(rounds + 1):
        order = ["floor", "no_reuse", "miss", "reuse"]
        order = order[round_index % 4 :] + order[: round_index % 4]
        got: dict[str, float] = {}
        reports: dict[str, dict] = {}
        for variant in order:
            if variant == "floor":
                got[variant] = floor(IMAGE, trees)
                continue
            cwd = Path(tempfile.mkdtemp(dir=work, prefix=f"{variant}-"))
            if durations.is_dir():
                shutil.copytree(durations, cwd / ".replay" / "durations")
            if variant == "reuse":  # the base screened by another pull request's run
                replay(repo, base, other, cwd, *extra)
            got[variant], reports[variant] = replay(
                repo, base, patch, cwd, *extra, *(["--no-reuse"] if variant == "no_reuse" else [])
            )
            if not durations.is_dir() and (cwd / ".replay" / "durations").is_dir():
                shutil.copytree(cwd / ".replay" / "durations", durations)
            shutil.rmtree(cwd, ignore_errors=True)
        if round_index == 0:
            continue  # warm-up (and the durations recorded)
        sides = reports["reuse"]["run_log"].get("reuse", {})
        reused_rounds += any(s.get("reused_from") for s in sides.get("sides", ()))
        for variant, seconds in got.items():
            times[variant].append(seconds)
        for variant, seen in jobs.items():
            seen.add(reports[variant]["run_log"]["jobs"])
        plain = lanes(reports["no_reuse"])
        for variant in ("miss", "reuse"):
            other_lanes = lanes(reports[variant])
            for property_id in sorted(set(plain) | set(other_lanes)):
                if plain.get(property_id, ("",))[:2] != other_lanes.get(property_id, ("",))[:2]:
                    differences.append(
                        f"round {round_index} {property_id}: no reuse {plain.get(property_id)}"
                        f" / {variant} {other_lanes.get(property_id)}"
                    )
        compared = len(plain)
    return {
        "jobs": {variant: sorted(values) for variant, values in jobs.items()},
        "name": name,
        "properties": compared,
        "median": {variant: statistics.median(values) for variant, values in times.items()},
        "samples": times,
        "differences": differences,
        "reused_rounds": reused_rounds,
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path)
    parser.add_argument("--base")
    parser.add_argument("--patch")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tests", type=int, default=400)
    parser.add_argument("--test-ms", type=int, default=5)
    parser.add_argument("--no-generated", action="store_true")
    parser.add_argument(
        "--replay-arg",
        action="append",
        default=[],
        help="one more argument to every replay (e.g. --replay-arg=--jobs --replay-arg=2: "
        "the same workers on the run that stores the base and on the run that reuses it)",
    )
    args = parser.parse_args()
    extra = tuple(args.replay_arg)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-reuse-") as folder:
        work = Path(folder)
        if not args.no_generated:
            repo, base, patch, other = generated(work, args.tests, args.test_ms)
            results.append(bench("generated", repo, base, patch, other, args.rounds, work, extra))
        if args.repo is not None:
            repo = args.repo.resolve()
            base, patch = git(repo, "rev-parse", args.base), git(repo, "rev-parse", args.patch)
            other = readme_commit(repo, base, work)
            results.append(bench(repo.name, repo, base, patch, other, args.rounds, work, extra))
    print(
        "| target | properties | floor (f) | --no-reuse (n) | store, no hit (m)"
        " | base reused (r) | (r)/(f) | (m)/(f) | (n)/(f) | workers n / m / r"
        " | rounds reused | lanes differing |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for item in results:
        median, jobs = item["median"], item["jobs"]
        workers = " / ".join(
            ",".join(str(j) for j in jobs[variant]) for variant in ("no_reuse", "miss", "reuse")
        )
        print(
            f"| {item['name']} | {item['properties']} | {median['floor']:.2f}"
            f" | {median['no_reuse']:.2f} | {median['miss']:.2f} | {median['reuse']:.2f}"
            f" | {median['reuse'] / median['floor']:.2f}"
            f" | {median['miss'] / median['floor']:.2f}"
            f" | {median['no_reuse'] / median['floor']:.2f}"
            f" | {workers} | {item['reused_rounds']}/{item['rounds']}"
            f" | {len(item['differences'])} |"
        )
    for item in results:
        for line in item["differences"]:
            print(f"{item['name']}: {line}")
        print(f"{item['name']} samples: {json.dumps(item['samples'])}")


if __name__ == "__main__":
    main()
