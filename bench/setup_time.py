"""Time the set-up `make test` does, cold and warm, without disturbing the machine's engine.

Clones HEAD into a temporary folder, starts a private Docker engine for it
(ORCHESTRATOR_DOCKERD_ROOT: empty data root, so the base and runner images are built from
scratch), runs `make venv engine image` twice and prints both times. The private engine
is stopped and everything removed at the end. Needs root (it starts dockerd).

    .venv/bin/python bench/setup_time.py [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed_make(clone: Path, env: dict[str, str], log: Path) -> tuple[float, str]:
    started = time.monotonic()
    with log.open("a") as sink:
        done = subprocess.run(
            ["make", "--no-print-directory", "venv", "engine", "image"],
            cwd=clone,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
            check=True,
        )
    image_id = done.stdout.strip().splitlines()[-1]
    return time.monotonic() - started, image_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the clone and engine folder")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="osb-", dir="/tmp"))  # short: sockets live below
    clone, engine_root, log = work / "clone", work / "engine", work / "setup.log"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    env |= {"CI": "true", "ORCHESTRATOR_DOCKERD_ROOT": str(engine_root)}
    try:
        cold, cold_id = timed_make(clone, env, log)
        warm, warm_id = timed_make(clone, env, log)
    finally:
        subprocess.run([str(clone / "scripts" / "stop-docker")], env=env, check=False)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"set-up, fresh clone + empty engine: {cold:7.1f} s  (runner {cold_id[:19]})")
    print(f"set-up, second run (nothing built): {warm:7.1f} s  (runner {warm_id[:19]})")
    print(f"same runner image both times: {cold_id == warm_id}")
    if args.keep:
        print(f"log: {log}")


if __name__ == "__main__":
    main()
