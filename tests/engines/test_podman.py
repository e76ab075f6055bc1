"""Podman as an engine: Debian's podman serving its Docker-compatible API
(`podman system service`) on a socket of its own, under a private storage root; the
runner image shipped to it from the machine's engine (save into load, same ID); the
bundled example replayed there through `--engine`.

Skipped when podman is not installed (installing it needs the network):
`apt-get install podman catatonit`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import stored_evidence
from support.polling import wait_for

from fixtures.build_example import SCENARIOS, build_example
from orchestrator.adapters.docker import connect, ship_image
from orchestrator.errors import EngineUnavailableError

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed"),
]

CLI = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "orchestrator"
# Podman gives every container nofile and nproc at their maximum; a machine that caps
# them lower (a container itself, say) refuses to start any. docs/engine.md, "Podman".
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=8192:8192", "nproc=4096:4096"]
"""


def podman(root: Path, *args: str) -> list[str]:
    return [
        "podman",
        "--root", str(root / "storage"),
        "--runroot", str(root / "run"),
        "--storage-driver", "overlay",
        *args,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def podman_url() -> Iterator[str]:
    if not Path("/usr/libexec/podman/catatonit").exists():
        pytest.skip("podman's init (catatonit) is not installed")
    root = Path(tempfile.mkdtemp(prefix="opm-", dir="/tmp"))  # short: a socket lives here
    (root / "containers.conf").write_text(CONTAINERS_CONF)
    url = f"unix://{root}/podman.sock"
    service = subprocess.Popen(
        podman(root, "system", "service", "--time=0", url),
        env={**os.environ, "CONTAINERS_CONF": str(root / "containers.conf")},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=(root / "service.log").open("w"),
        start_new_session=True,
    )
    try:

        def answers() -> bool:
            if service.poll() is not None:
                pytest.fail(f"podman system service ended (exit {service.returncode})")
            try:
                connect(os.environ, url=url, timeout_s=10).close()
            except EngineUnavailableError:
                return False
            return True

        wait_for(answers, timeout=60, what=f"podman system service to answer at {url}", poll=0.2)
        yield url
    finally:
        service.terminate()
        try:
            service.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
        # Its containers, images and overlay mounts, then the folder.
        subprocess.run(
            podman(root, "system", "reset", "--force"),
            check=False,
            capture_output=True,
            timeout=300,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize(
    "tree_options",
    [
        pytest.param((), id="read-only-tree"),
        # The tree is copied per replay into a tmpfs owned by the runner user (uid 1000):
        # Podman must mount it with those options as Docker does.
        pytest.param(("--writable-tree",), id="writable-tree"),
    ],
)
def test_podman_replays_the_example_with_the_shipped_runner_image(
    podman_url, docker_client, runner_image_id, tmp_path, tree_options
):
    client = connect(os.environ, url=podman_url)
    try:
        version = client.version()
        assert "podman" in json.dumps(version).lower()
        shipped = ship_image(docker_client, client, runner_image_id, tag=None)
        assert shipped.image_id == runner_image_id  # content-addressed: the same image
    finally:
        client.close()

    scenario = next(s for s in SCENARIOS if s.patch == "fix-trim-id")
    repo = build_example(tmp_path / "example")
    out = tmp_path / "run"
    command = [
        str(CLI), "replay",
        "--repo", str(repo.path), "--base", repo.base, "--patch", repo.rev(scenario.patch),
        "--engine", podman_url, "--image", runner_image_id,
        "--replays", "2", "--fixture", str(repo.path / "fixtures" / "event.json"),
        "--out", str(out), "--no-record", "--json", *tree_options,
    ]  # fmt: skip
    for node_id in scenario.properties:
        command += ["--property", node_id]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {item["decision"]["lane"] for item in report["decisions"]} == {scenario.lane}
    evidence = stored_evidence(out)
    replays = evidence["base"] + evidence["patch"]
    assert {replay["runner_id"] for replay in replays} == {podman_url}
    assert {replay["image_digest"] for replay in replays} == {runner_image_id}
    assert [replay["label"] for replay in evidence["patch"]] == ["assert_pass"] * 2
