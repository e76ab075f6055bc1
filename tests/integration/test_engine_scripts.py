"""scripts/ensure-docker, scripts/stop-docker and scripts/build-images on the real machine.

The engine `make test` brought up is left running: these tests only exercise the paths
that must not start or stop anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]


def script(name: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / "scripts" / name)],
        capture_output=True,
        text=True,
        env={**os.environ, **env_extra},
        timeout=300,
        check=False,
    )


def test_ensure_docker_uses_an_answering_engine(docker_client, tmp_path):
    result = script("ensure-docker", {"ORCHESTRATOR_STATE_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert docker_client.version()["Version"] in result.stderr
    assert not (tmp_path / "dockerd.pid").exists()  # it started nothing


def test_ensure_docker_refuses_a_dead_docker_host_in_one_line(tmp_path):
    dead = f"unix://{tmp_path / 'docker.sock'}"
    result = script("ensure-docker", {"DOCKER_HOST": dead, "ORCHESTRATOR_STATE_DIR": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert dead in result.stderr
    assert not (tmp_path / "dockerd.pid").exists()


def test_stop_docker_without_a_record_stops_nothing(docker_client, tmp_path):
    result = script("stop-docker", {"ORCHESTRATOR_STATE_DIR": str(tmp_path)})
    assert result.returncode == 0
    assert "nothing to stop" in result.stderr
    assert docker_client.ping()


def test_stop_docker_leaves_a_process_that_is_not_its_dockerd(tmp_path):
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "dockerd.pid").write_text(f"{bystander.pid}\n")
        result = script("stop-docker", {"ORCHESTRATOR_STATE_DIR": str(tmp_path)})
        assert result.returncode == 0
        assert bystander.poll() is None  # still running
        assert not (tmp_path / "dockerd.pid").exists()  # the stale record is forgotten
    finally:
        bystander.kill()
        bystander.wait()


def test_build_images_reuses_an_unchanged_context(runner_image_id):
    result = script("build-images", {})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == runner_image_id
    # It runs `orchestrator image runner` on the recipe in the package: nothing is built.
    assert "runner_image.reused" in result.stderr
    assert "building" not in result.stderr


@pytest.fixture
def private_root() -> Iterator[Path]:
    # Short path: the daemon's sockets live below it (unix socket paths max 108 bytes).
    root = Path(tempfile.mkdtemp(prefix="odk-", dir="/tmp"))
    yield root
    script("stop-docker", {"ORCHESTRATOR_DOCKERD_ROOT": str(root)})
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="starting dockerd needs root")
def test_ensure_docker_starts_a_detached_engine_that_only_stop_docker_stops(
    docker_client, private_root
):
    env = {
        "ORCHESTRATOR_DOCKERD_ROOT": str(private_root),
        "DOCKER_HOST": f"unix://{private_root}/docker.sock",
    }
    started = script("ensure-docker", env)
    assert started.returncode == 0, started.stderr
    assert "started by this project" in started.stderr
    pid = int((private_root / "dockerd.pid").read_text())
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "dockerd"
    # Its own session: it outlives the script (and make) that started it.
    assert os.getsid(pid) == pid

    again = script("ensure-docker", env)
    assert again.returncode == 0, again.stderr
    assert "started by this project" not in again.stderr  # reused, not restarted
    assert int((private_root / "dockerd.pid").read_text()) == pid

    stopped = script("stop-docker", env)
    assert stopped.returncode == 0, stopped.stderr
    assert not Path(f"/proc/{pid}").exists()
    assert not (private_root / "dockerd.pid").exists()
    assert docker_client.ping()  # the shared engine was left alone
