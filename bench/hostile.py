"""What each hostile patch of tests/security costs the host: peak RSS of the CLI, peak
disk growth, wall time, the exit code and the patch side's label.

Each attack is a scratch repository whose patch turns the code under test into the
attack (tests/security/hostile_repo.py holds them), replayed once per side through the
real CLI and engine. Peak disk is sampled every 0.1 s on the file systems of the
scratch folder and of Docker's data root (noisy on a shared machine: other jobs write
too). A "baseline" row replays a harmless patch the same way.

    .venv/bin/python bench/hostile.py [--only NAME]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "security"))

from hostile_repo import (  # noqa: E402
    ATTACKS,
    BOMB_CAP,
    Repo,
    bomb_repo,
    hostile_repo,
    replay,
)

DOCKER_ROOT = Path("/var/lib/docker")
MIB = 1024 * 1024


class DiskPeak:
    """The largest growth of used bytes on the given file systems while it runs."""

    def __init__(self, paths: list[Path]) -> None:
        self._paths = [path for path in paths if path.exists()]
        self._start = self._used()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _used(self) -> int:
        devices: dict[int, int] = {}
        for path in self._paths:
            devices[path.stat().st_dev] = shutil.disk_usage(path).used
        return sum(devices.values())

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self._used() - self._start)

    def __enter__(self) -> DiskPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def one(name: str, make: object, env: dict[str, str] | None = None) -> str:
    with tempfile.TemporaryDirectory(prefix="hostile-") as folder:
        root = Path(folder)
        repo: Repo = make(root)  # type: ignore[operator]
        with DiskPeak([root, DOCKER_ROOT]) as disk:
            run = replay(root, repo, json_out=False, env=env, deadline_s=600)
        label = "-"
        summary = run.run_dir / "summary.json"
        if summary.exists():
            import json

            decisions = json.loads(summary.read_text())["decisions"]
            if decisions:
                reasons = decisions[0]["patch_reasons"]
                label = f"{decisions[0]['patch_labels'][0]}({reasons[0] or ''})"
        return (
            f"| {name} | {run.code} | {label} | {run.max_rss_kb / 1024:.0f} | "
            f"{disk.peak / MIB:.0f} | {run.wall_s:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the attack of this name")
    args = parser.parse_args()
    cases: list[tuple[str, object, dict[str, str] | None]] = [
        ("baseline", lambda root: hostile_repo(root, "def run():\n    return 1\n"), None)
    ]
    for name, (attack, extra) in ATTACKS.items():
        cases.append((name, lambda root, a=attack, e=extra: hostile_repo(root, a, extra=e), None))
    cases.append(("compression bomb (96 MiB, cap 64 MiB)", bomb_repo, BOMB_CAP))
    print("| attack | exit | patch label | CLI peak RSS MiB | peak disk MiB | wall s |")
    print("|---|---|---|---|---|---|")
    for name, make, env in cases:
        if args.only and args.only != name:
            continue
        print(one(name, make, env), flush=True)


if __name__ == "__main__":
    main()
