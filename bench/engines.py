"""One engine vs two engines in one run, and the one-time cost of shipping the image.

    .venv/bin/python bench/engines.py [--count 40] [--seconds 1] [--replays 3] [--slots 1]
                                      [--rounds 1] [--markdown]

Builds a repository of ``--count`` tests that each wait ``--seconds`` on a sleep
(fixtures/sleepy.py: I/O-bound, so two cores are enough to show the scheduler), starts
a second local Docker engine beside the machine's (scripts/ensure-docker with a private
root; stopped, unmounted and removed at the end), and times:

(s) shipping the runner image into the second engine, which does not hold it: the
    Docker SDK's ``save`` streamed into ``load``, the ID checked (once per engine);
(1) `orchestrator replay --slots N` on the machine's engine alone;
(2) the same run with `--engine <machine's> --engine <second>`;

each twice: with every test named by `--property`, and with none named (every test the
command runs: the two-engine run then collects the tests on both revisions first, in
the first engine, to cut them in two). Prints the wall times, the ratios (1)/(2) (goal:
at least 1.8 with --slots 1) and what each engine ran.
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "engines"))

import run_folder  # noqa: E402  (bench/, beside this script)
from second_engine import new_second_engine  # noqa: E402

from fixtures.sleepy import build_sleepy  # noqa: E402
from orchestrator.adapters import docker as docker_adapter  # noqa: E402

CLI = ROOT / ".venv" / "bin" / "orchestrator"


def replay(args: list[str], out: Path, scratch: Path) -> tuple[float, dict]:
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = subprocess.run(
        [str(CLI), *args, "--out", str(out), "--no-record"],
        env={**os.environ, "TMPDIR": str(scratch), "CI": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"bench: replay exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed, run_folder.report(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--replays", type=int, default=3)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--image", default=docker_adapter.RUNNER_IMAGE)
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="orchestrator-bench-engines-"))
    repo = build_sleepy(work / "repo", count=options.count, seconds=options.seconds)
    main_url = docker_adapter.engine_url(os.environ)
    source = docker_adapter.connect(os.environ)
    image_id = docker_adapter.resolve_image(source, options.image).id
    second = new_second_engine()
    rows: list[tuple[str, ...]] = []
    try:
        second.start()
        target = docker_adapter.connect(os.environ, url=second.url, timeout_s=600)
        shipped = docker_adapter.ship_image(source, target, image_id, tag=options.image)
        again = docker_adapter.image_state(target, image_id, options.image)
        assert again.present
        target.close()

        common = [
            "replay",
            "--repo",
            str(repo.path),
            "--base",
            repo.base,
            "--patch",
            repo.patch,
            "--image",
            options.image,
            "--replays",
            str(options.replays),
            # Engines against engines: every test N times, as when these figures were
            # first taken (a run of the whole suite is screened by default since).
            "--replays-all",
            "--timeout",
            "60",
            "--slots",
            str(options.slots),
        ]
        named = [arg for node_id in repo.property_ids for arg in ("--property", node_id)]
        variants = (("every test named", named), ("none named (collected)", []))
        times: dict[tuple[str, int], list[float]] = {}
        for round_ in range(1, options.rounds + 1):
            for label, extra in variants:
                for engines in (1, 2):
                    pool = [] if engines == 1 else ["--engine", main_url, "--engine", second.url]
                    tag = f"{'named' if extra else 'all'}-{engines}-{round_}"
                    elapsed, doc = replay(
                        [*common, *extra, *pool], work / tag, work / f"scratch-{tag}"
                    )
                    assert len(doc["decisions"]) == options.count
                    times.setdefault((label, engines), []).append(elapsed)
                    spread = ", ".join(
                        f"{engine['properties']} on engine {number}"
                        for number, engine in enumerate(doc.get("engines") or (), start=1)
                    )
                    print(f"round {round_}, {label}, {engines} engine(s): {elapsed:.1f} s {spread}")
        rows = [
            ("ship the runner image to a new engine", f"{shipped.seconds:.1f} s",
             f"{shipped.bytes / 1e6:.0f} MB, once per engine"),
        ]  # fmt: skip
        for label, _ in variants:
            one_s = statistics.median(times[(label, 1)])
            two_s = statistics.median(times[(label, 2)])
            rows += [
                (f"{label}: one engine", f"{one_s:.1f} s", "bind mounts"),
                (f"{label}: two engines", f"{two_s:.1f} s", "volumes"),
                (f"{label}: one / two", f"{one_s / two_s:.2f}x", "goal: at least 1.80x"),
            ]
    finally:
        second.remove()
        source.close()
    print(
        f"\n{options.count} tests of {options.seconds:g} s, --replays {options.replays}, "
        f"--slots {options.slots}, {options.rounds} round(s), median:"
    )
    if options.markdown:
        print("| what | wall time | note |\n|---|---:|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for what, figure, note in rows:
            print(f"{what:<40} {figure:>10}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
