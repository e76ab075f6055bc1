"""What a fresh writable tree costs per replay, two ways (the choice behind --writable-tree).

- copy: the driver empties a tmpfs at /src and copies the read-only export into it before
  each replay (what `--writable-tree` does; `--copy-tree` of orchestrator/probe/driver.py),
  timed inside one container of the runner image, median of `--runs`;
- overlay: a `local` volume of type overlay whose lower layer is the export (upper and
  work folders in a scratch folder), made by the engine, mounted at /src of a new
  container that runs `true`, then the container and the volume removed: the price of one
  container per replay, which an overlay needs (it cannot be reset inside a running
  container); "container" is the same without the volume.

    .venv/bin/python bench/writable_tree.py [--runs 5]

Trees: synthetic, N files of 12 KB in folders of 50 (the size of a small, a mid-sized
and a large project's checkout).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.adapters import docker as docker_adapter  # noqa: E402

TREES = (("small", 120), ("medium", 1200), ("large", 6000))
TIMER = """
import statistics, sys, time
from pathlib import Path
from orchestrator.probe.driver import copy_contents, empty_dir
runs = int(sys.argv[1])
times = []
for _ in range(runs):
    started = time.perf_counter()
    empty_dir(Path("/src"))
    copy_contents(Path("/replay/tree"), Path("/src"))
    times.append((time.perf_counter() - started) * 1000)
print(statistics.median(times))
"""


def make_tree(folder: Path, files: int) -> int:
    payload = b"x = 1\n" * 2048
    for index in range(files):
        sub = folder / f"pkg{index // 50}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"mod{index}.py").write_bytes(payload)
    return files * len(payload)


def copy_ms(client, image_id: str, tree: Path, size: int, runs: int) -> float:
    owner = docker_adapter.Owner.current(f"bench-{uuid.uuid4().hex[:8]}")
    megabytes = max(64, (2 * size) // (1024 * 1024) + 32)
    config = docker_adapter.container_config(
        image_id=image_id,
        name=f"orchestrator-{owner.run_id}",
        command=["python3", "-c", TIMER, str(runs)],
        mounts=[
            docker_adapter.Mount(source=tree, target="/replay/tree"),
            docker_adapter.Mount(
                source=ROOT / "orchestrator", target="/opt/orchestrator/orchestrator"
            ),
        ],
        environment={"PYTHONPATH": "/opt/orchestrator"},
        labels=owner.labels("bench"),
        limits=docker_adapter.Limits(memory="2g"),
        tmpfs={"/src": f"rw,exec,size={megabytes}m,uid=1000,gid=1000,mode=0755"},
    )
    lines: list[str] = []
    with docker_adapter.Container(client, config) as container:
        pump = container.follow_logs(lines.append)
        container.wait(deadline=time.monotonic() + 600)
        pump.join(timeout=5)
    return float(lines[-1])


def container_ms(client, image_id: str, tree: Path | None, runs: int) -> float:
    times = []
    for _ in range(runs):
        scratch = Path(tempfile.mkdtemp(prefix="orchestrator-bench-"))
        started = time.perf_counter()
        volume = None
        mounts = []
        if tree is not None:
            (scratch / "upper").mkdir()
            (scratch / "work").mkdir()
            volume = client.volumes.create(
                name=f"orchestrator-bench-{uuid.uuid4().hex[:8]}",
                driver="local",
                driver_opts={
                    "type": "overlay",
                    "device": "overlay",
                    "o": f"lowerdir={tree},upperdir={scratch / 'upper'},workdir={scratch / 'work'}",
                },
            )
        owner = docker_adapter.Owner.current(f"bench-{uuid.uuid4().hex[:8]}")
        config = docker_adapter.container_config(
            image_id=image_id,
            name=f"orchestrator-{owner.run_id}",
            command=["true"],
            mounts=mounts,
            environment={},
            labels=owner.labels("bench"),
            limits=docker_adapter.Limits(),
        )
        if volume is not None:
            config["volumes"] = {volume.name: {"bind": "/src", "mode": "rw"}}
        try:
            with docker_adapter.Container(client, config) as container:
                container.wait(deadline=time.monotonic() + 120)
        finally:
            if volume is not None:
                volume.remove(force=True)
        times.append((time.perf_counter() - started) * 1000)
        shutil.rmtree(scratch, ignore_errors=True)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    client = docker_adapter.connect(os.environ)
    image_id = docker_adapter.resolve_image(client, docker_adapter.RUNNER_IMAGE).id
    print("| tree | files | MB | copy per replay, ms | overlay volume + container, ms |"
          " container alone, ms |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    plain = container_ms(client, image_id, None, args.runs)
    for name, files in TREES:
        with tempfile.TemporaryDirectory(prefix="orchestrator-bench-tree-") as folder:
            tree = Path(folder)
            tree.chmod(0o755)
            size = make_tree(tree, files)
            copy = copy_ms(client, image_id, tree, size, args.runs)
            overlay = container_ms(client, image_id, tree, args.runs)
        print(f"| {name} | {files} | {size / 1e6:.1f} | {copy:.0f} | {overlay:.0f} | {plain:.0f} |")


if __name__ == "__main__":
    main()
